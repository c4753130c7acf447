"""The reports (`kipcheck.reports`): a run directory turned into the interactive HTML page,
campaign summaries and Allure results. Imports `kipcheck.checks` (verdicts, conformance)
and `kipcheck.rundir` (the run's files); never the harness."""
