"""Watchdog for a cluster owned by one harness process: tears it down if the owner dies.

Started detached by `NativeCluster.up`; it exits quietly once the owner removes the
state file (a normal teardown). A SIGKILLed harness thus leaves nothing running for
long, and `reap_stale()` on the next start covers even a killed watchdog."""
import sys
import time
from pathlib import Path

from kipcheck.harness.backends.state import ClusterState
from kipcheck.harness.backends.sweep import teardown


def main(state_path: str) -> None:
    path = Path(state_path)
    while path.exists():
        try:
            state = ClusterState.load(path)
        except (OSError, ValueError):
            time.sleep(0.5)
            continue
        if state.is_stale():
            teardown(state)
            return
        time.sleep(1.0)


if __name__ == "__main__":
    main(sys.argv[1])
