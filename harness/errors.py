"""Errors a user can act on: printed as one line by the CLI, never as a traceback."""


class HarnessError(Exception):
    """A problem with the environment, the cluster or the input, explained in one line."""
