"""Blocking calls side by side: node formats and stops (a JVM each), one SSH session per host.

One helper for every backend module, so none reaches into another's private one."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


def side_by_side(calls) -> list:
    """Run the calls at once; their results in order. The first failure is raised, after all ended."""
    calls = list(calls)
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        futures = [pool.submit(c) for c in calls]
        return [f.result() for f in futures]
