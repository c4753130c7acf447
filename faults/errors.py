"""The one error a fault raises: a reason the user can act on, in one line.

It lives here, not in harness, so that faults never import the harness (harness -> faults
is one-way). Both it and `harness.errors.HarnessError` are `kipcheck.errors.KipcheckError`s:
the nemesis records either (a cluster verb a fault calls is harness code) as a known reason,
and the CLI prints either as one line with a non-zero exit.
"""
from kipcheck.errors import KipcheckError


class FaultError(KipcheckError):
    """A fault that cannot be applied or healed here (no leader, no namespaces, no proxies), in one line."""
