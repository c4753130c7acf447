"""The root of kipcheck's own errors: a reason the user can act on, in one line.

A bottom module: every layer may import it, and it imports nothing of ours. Each layer
raises its own subclass (`faults.errors.FaultError`, `harness.errors.HarnessError`); code
that means "a known error, print its one line" catches `KipcheckError`.
"""


class KipcheckError(Exception):
    """A known failure (bad input, the environment, the cluster, a fault), explained in one line."""
