"""On-disk registry of what the harness has started, so nothing outlives a killed harness.

Every cluster writes `state.json` before it creates anything (namespaces, bridge,
processes) and updates it as it goes. A cluster owned by a process that is gone
(SIGKILL, crash) is stale: the next `kipcheck` start, or `kipcheck cluster down`,
tears it down from this record alone.
"""
from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path


def state_root() -> Path:
    return Path(os.environ.get("KIPCHECK_STATE_DIR", "/tmp/kipcheck-state"))


def parse_stat(stat: str) -> tuple[str, int]:
    """(state letter, kernel start time in clock ticks since boot) from a /proc/PID/stat line;
    one parser for local pids and those a remote host reports (harness.backends.ssh)."""
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces; fields resume after the last ')'
    return fields[0], int(fields[19])


def process_start_time(pid: int) -> int | None:
    """Kernel start time of a pid (clock ticks since boot), to tell a reused pid apart."""
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())[1]
    except OSError:
        return None


def process_state(pid: int) -> str | None:
    """The state letter of a local pid (R, S, T for stopped, Z), None when there is none."""
    try:
        return parse_stat(Path(f"/proc/{pid}/stat").read_text())[0]
    except OSError:
        return None


def same_process_alive(pid: int | None, start_time: int | None) -> bool:
    """True while the recorded process runs (a zombie waiting to be reaped counts as gone)."""
    if not pid:
        return False
    try:
        state, start = parse_stat(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return False
    return state != "Z" and (start_time is None or start == start_time)


class _Local:
    """This machine's processes, as `kill_recorded` asks a host (harness.backends.network.Host, ssh.SshHost)."""

    alive = staticmethod(same_process_alive)

    @staticmethod
    def signal(pid: int, sig: int) -> None:
        os.kill(pid, sig)


def kill_recorded(pid: int | None, start_time: int | None, grace: float = 0.0, host=_Local) -> None:
    """Kill a recorded process only if it is still the same process (pid reuse safe); on
    `host` (its `alive(pid, start)` and `signal(pid, sig)`), this machine by default."""
    if not host.alive(pid, start_time):
        return
    try:
        host.signal(pid, signal.SIGCONT)  # a paused JVM cannot handle SIGTERM
        if grace > 0:
            host.signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and host.alive(pid, start_time):
                time.sleep(0.1)
        if host.alive(pid, start_time):
            host.signal(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and host.alive(pid, start_time):
        time.sleep(0.05)


class ClusterState:
    """The JSON record of one cluster's resources; written through on every change."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data
        self._lock = threading.RLock()  # nodes start and stop from several threads

    @classmethod
    def create(cls, cluster_id: str, owner_pid: int | None, **fields) -> "ClusterState":
        path = state_root() / cluster_id / "state.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "cluster_id": cluster_id,
            "owner_pid": owner_pid,
            "owner_start": process_start_time(owner_pid) if owner_pid else None,
            "created": time.time(),
            "nodes": {},
            "namespaces": [],
            "links": [],
            "helpers": {},
            **fields,
        }
        state = cls(path, data)
        state.save()
        return state

    @classmethod
    def load(cls, path: Path) -> "ClusterState":
        return cls(path, json.loads(path.read_text()))

    def save(self) -> None:
        with self._lock:
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self.data, indent=1))
            os.replace(tmp, self.path)

    def update(self, **fields) -> None:
        with self._lock:
            self.data.update(fields)
            self.save()

    def set_entry(self, section: str, key: str, value) -> None:
        """Set one entry of a dict-valued field (nodes, helpers) atomically."""
        with self._lock:
            entries = dict(self.data.get(section, {}))
            if value is None:
                entries.pop(key, None)
            else:
                entries[key] = value
            self.data[section] = entries
            self.save()

    def append(self, section: str, item) -> None:
        with self._lock:
            self.data[section] = list(self.data.get(section, [])) + [item]
            self.save()

    def owner_alive(self) -> bool:
        return same_process_alive(self.data.get("owner_pid"), self.data.get("owner_start"))

    def is_stale(self) -> bool:
        """Owned by a harness that is gone. Clusters from `cluster up` have no owner."""
        return self.data.get("owner_pid") is not None and not self.owner_alive()

    def remove(self) -> None:
        try:
            self.path.unlink()
            self.path.parent.rmdir()
        except OSError:
            pass


def all_states() -> list[ClusterState]:
    root = state_root()
    if not root.exists():
        return []
    states = []
    for p in sorted(root.glob("*/state.json")):
        try:
            states.append(ClusterState.load(p))
        except (OSError, ValueError):
            continue
    return states
