"""Errors a user can act on: printed as one line by the CLI, never as a traceback."""
from kipcheck.faults.errors import FaultError


class HarnessError(FaultError):
    """A problem with the environment, the cluster or the input, explained in one line.

    A `faults.errors.FaultError`, so that what the cluster verbs raise inside a fault is a
    known reason to the nemesis; catch `FaultError` where a fault's own error may arrive too."""
