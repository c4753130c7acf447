"""The root of kipcheck's own errors: a reason the user can act on, in one line.

A bottom module: every layer may import it, and it imports nothing of ours. Each layer
raises its own subclass (`faults.errors.FaultError`, `harness.errors.HarnessError`); code
that means "a known error, print its one line" catches `KipcheckError`.
"""


class KipcheckError(Exception):
    """A known failure (bad input, the environment, the cluster, a fault), explained in one line."""


#: the exit codes of `kipcheck run` and `kipcheck check` (docs/cli.md)
EXIT_VALID, EXIT_ANOMALIES, EXIT_ERROR, EXIT_UNKNOWN = 0, 1, 2, 3


def exit_code(verdict: dict | None) -> int:
    """A verdict's exit code: VALID 0, anomalies 1, unknown 3; no verdict at all is an error, 2."""
    if verdict is None:
        return EXIT_ERROR
    return {True: EXIT_VALID, False: EXIT_ANOMALIES}.get(verdict["valid"], EXIT_UNKNOWN)
