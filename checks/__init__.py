"""The checker (`kipcheck.checks`): model-based rules over a history (checks/rules), the
local and Spark engines that only move records to them, the verdict, coverage and
conformance table. Imports `kipcheck.reference_model` (which outcomes a proven state allows)
and `kipcheck.rundir` (reading a run); never the harness or the cluster."""
