"""`python -m kipcheck ...` is the `kipcheck` command (e.g. from a checkout that is not the installed one)."""
from kipcheck.harness.cli import main

raise SystemExit(main())
