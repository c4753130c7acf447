"""The one error a fault raises: a reason the user can act on, in one line.

It lives here, not in harness, so that faults never import the harness (harness -> faults
is one-way). `harness.errors.HarnessError` subclasses it, so the cluster verbs a fault
calls (harness code) fail with an error the nemesis records as a known reason, and the
CLI prints either as one line with a non-zero exit.
"""


class FaultError(Exception):
    """A fault that cannot be applied or healed here (no leader, no namespaces, no proxies), in one line."""
