"""Errors a user can act on: printed as one line by the CLI, never as a traceback."""
from kipcheck.errors import KipcheckError


class HarnessError(KipcheckError):
    """A problem with the environment, the cluster or the input, explained in one line.

    A `kipcheck.errors.KipcheckError`, as `faults.errors.FaultError` is: what the cluster
    verbs raise inside a fault is a known reason to the nemesis; catch `KipcheckError` where
    a fault's own error may arrive too."""
