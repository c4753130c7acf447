#!/usr/bin/env bash
# The test suite on a fresh machine: install, then every test (unit, property, Spark and
# live-cluster integration), on two pytest-xdist workers, a module to a worker (tests/conftest.py says
# which go first and which never overlap). Extra arguments go to pytest (e.g. -m "not cluster", -n 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --test
exec python3 -m pytest -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder "$@"
