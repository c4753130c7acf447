"""Private network for a native cluster: one namespace per node on a bridge.

Addresses come from 198.18.0.0/15 (RFC 2544, set aside for benchmarking), so they
never collide with a real network. The bridge's own address is the harness's
(root namespace) view of the cluster; clients reach nodes directly through it.
Partitions are iptables rules in a node's own namespace, in a chain named
KIPCHECK, so deleting the namespace deletes every rule with it. Beside a host firewall
that filters bridged traffic (Docker), the bridge gets one ACCEPT rule (harness.backends.firewall).
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kipcheck.faults.cluster import NodeFiles
from kipcheck.harness.backends import firewall
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.state import process_start_time, process_state, same_process_alive

NS_PREFIX = "kipcheck-"
CHAIN = "KIPCHECK"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise HarnessError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip()}")
    return proc


def namespaces_available() -> bool:
    """Namespaces need root and the `ip` tool; without them nodes share loopback."""
    return os.geteuid() == 0 and subprocess.run(["which", "ip"], capture_output=True).returncode == 0


def iptables_available() -> bool:
    return subprocess.run(["which", "iptables"], capture_output=True).returncode == 0


def list_namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_age(ns: str) -> float:
    """Seconds since `ip netns add` created the namespace (its mount point's mtime)."""
    import time
    try:
        return time.time() - os.stat(f"/run/netns/{ns}").st_mtime
    except OSError:
        return 0.0


def namespace_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(x) for x in out.split()]


class Runner(NodeFiles, Protocol):
    """What a `KafkaNode` asks of the machine it runs on: `Host` here, `harness.backends.ssh.SshHost`
    over SSH (tests/test_ssh_hosts_file.py holds both to it). The file verbs faults use are
    `faults.cluster.NodeFiles`'s; these are the rest."""

    name: str
    address: str
    netns: str | None
    remote: bool

    @property
    def chain(self) -> str: ...

    def run(self, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess: ...

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess: ...

    def spawn(self, argv: list[str], log: Path, env: dict | None = None) -> tuple: ...

    def alive(self, pid: int | None, start: int | None) -> bool: ...

    def signal(self, pid: int, sig: int) -> None: ...

    def process_state(self, pid: int) -> str | None: ...

    def remove_tree(self, path: Path) -> None: ...

    def fetch(self, path: Path, local: Path) -> Path | None: ...


@dataclass(frozen=True)
class Host:
    """A node's place on the network, and the command runner of a node on this machine.

    `KafkaNode` does everything through these verbs (run, spawn, signal, files, iptables),
    so a node on a remote host is the same code with `harness.backends.ssh.SshHost`, which
    implements them over SSH. Paths are the host's own; here they are this machine's."""

    name: str
    address: str
    netns: str | None  # None: the root namespace (loopback mode)
    remote = False  # commands run on this machine

    @property
    def chain(self) -> str:
        """The iptables chain of kipcheck's drop rules (the namespace is the cluster's own)."""
        return CHAIN

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that runs argv on this host."""
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def run(self, argv: list[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command to its end (text output); the caller judges the exit code."""
        return subprocess.run(self.wrap(argv), capture_output=True, text=True, timeout=timeout)

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        if not self.netns:
            raise HarnessError("packet-level faults need network namespaces (run as root)")
        proc = self.run(["iptables", "-w", *args])
        if check and proc.returncode != 0:
            raise HarnessError(f"iptables {' '.join(args)} on {self.name} failed: {proc.stderr.strip()}")
        return proc

    def spawn(self, argv: list[str], log: Path, env: dict | None = None) -> tuple[int, int | None, subprocess.Popen]:
        """Start a long-running process in its own session, output appended to `log`, with `env`
        added to this one's environment: (pid, start time, a handle the caller may wait on)."""
        with open(log, "ab") as out:
            # own session: a Ctrl-C in the terminal reaches the harness, which stops nodes in order
            proc = subprocess.Popen(self.wrap(argv), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, **env} if env else None)
        return proc.pid, process_start_time(proc.pid), proc

    def alive(self, pid: int | None, start: int | None) -> bool:
        return same_process_alive(pid, start)

    def signal(self, pid: int, sig: int) -> None:
        os.kill(pid, sig)

    def process_state(self, pid: int) -> str | None:
        return process_state(pid)

    # -- files (the node's directory) ------------------------------------------------------
    def write_text(self, path: Path, text: str) -> None:
        self.write_bytes(path, text.encode())

    def write_bytes(self, path: Path, data: bytes) -> None:
        """Write whole or not at all (a reader never sees half: libfaketime's offset file, a segment)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".kipcheck-tmp")
        tmp.write_bytes(data)
        tmp.replace(path)

    def read_bytes(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except OSError:
            return None

    def read_text(self, path: Path) -> str | None:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return None

    def exists(self, path: Path) -> bool:
        return path.exists()

    def remove_tree(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def file_sizes(self, directory: Path, suffix: str) -> dict[str, int]:
        """name -> size of the files in `directory` ending in `suffix` (none: {})."""
        return {p.name: p.stat().st_size for p in directory.glob(f"*{suffix}")} if directory.is_dir() else {}

    def truncate(self, path: Path, size: int) -> None:
        os.truncate(path, size)

    def list_dir(self, directory: Path, dirs_only: bool = False) -> list[str]:
        """The names in `directory` (with `dirs_only`, of its subdirectories), sorted; no such directory: []."""
        try:
            return sorted(e.name for e in os.scandir(directory) if not dirs_only or e.is_dir(follow_symlinks=False))
        except OSError:
            return []

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()

    def rename(self, source: Path, target: Path) -> None:
        os.rename(source, target)

    def remove(self, path: Path) -> None:
        """Delete one file (or symlink); one already gone is fine."""
        Path(path).unlink(missing_ok=True)

    def fetch(self, path: Path, local: Path) -> Path | None:
        """The file where the harness can read it: here, the file itself (None when absent)."""
        return path if path.exists() else None


def install_chain(host) -> None:
    """Create the host's kipcheck chain and jump to it from INPUT and OUTPUT (a native node's
    namespace, or a remote host: harness.backends.ssh)."""
    host.iptables("-N", host.chain)
    host.iptables("-I", "INPUT", "-j", host.chain)
    host.iptables("-I", "OUTPUT", "-j", host.chain)


def remove_chain(host) -> None:
    """Undo `install_chain` (a remote host is left as found; a namespace just goes). Parts already gone are fine."""
    for args in (("-D", "INPUT", "-j", host.chain), ("-D", "OUTPUT", "-j", host.chain),
                 ("-F", host.chain), ("-X", host.chain)):
        host.iptables(*args, check=False)


class BridgeNetwork:
    """Creates and deletes the bridge, the namespaces and their veth pairs.

    Every resource name is recorded in the cluster state before it is created, so a
    teardown from the state alone (after a crash) finds everything."""

    def __init__(self, cluster_id: str, subnet_index: int, state):
        self.cluster_id = cluster_id
        self.subnet = f"198.18.{subnet_index}"
        self.bridge = f"kcb{cluster_id[:8]}"
        self.state = state
        self.rule_error: str | None = None  # why the firewall ACCEPT rule could not be added

    @property
    def gateway(self) -> str:
        return f"{self.subnet}.1"

    def create_bridge(self) -> None:
        self.state.update(subnet=self.subnet)
        self.state.append("links", self.bridge)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self.rule_error = firewall.accept_bridge(self.state, self.bridge, self.cluster_id)

    def add_host(self, name: str, octet: int, chain: bool = True) -> Host:
        """A namespace on the bridge; with `chain`, kipcheck's KIPCHECK chain in it (a node's)."""
        ns = f"{NS_PREFIX}{self.cluster_id}-{name}"
        veth = f"kcv{self.cluster_id[:6]}{octet:03d}"
        self.state.append("namespaces", ns)
        self.state.append("links", veth)
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _ip("link", "set", veth, "master", self.bridge, "up")
        address = f"{self.subnet}.{octet}"
        _ip("-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", ns, "route", "add", "default", "via", self.gateway)
        host = Host(name, address, ns)
        if chain and iptables_available():
            install_chain(host)
        return host

    def check_paths(self, hosts: list[Host]) -> None:
        """Fail at once, naming what blocks it, when the harness cannot reach a node or one
        node cannot reach another (rather than a node that dies later for want of a quorum)."""
        first = hosts[0]
        error = firewall.probe(first.address)
        if error:
            raise HarnessError(f"the harness cannot reach node {first.name} ({first.address}) "
                               f"on bridge {self.bridge}: {error}")
        if len(hosts) > 1:
            other = hosts[1]
            error = firewall.probe(other.address, wrap=first.wrap)
            if error:
                raise HarnessError(f"node {first.name} cannot reach node {other.name} ({other.address}: {error}) "
                                   f"across bridge {self.bridge}: "
                                   f"{firewall.why_blocked(self.bridge, self.cluster_id, self.rule_error)}")


def delete_network(namespaces: list[str], links: list[str]) -> None:
    """Delete namespaces (and with them every rule and veth end inside) and links."""
    for ns in namespaces:
        if ns in list_namespaces():
            for pid in namespace_pids(ns):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            _ip("netns", "del", ns, check=False)
    for link in links:
        _ip("link", "del", link, check=False)


def used_subnet_indices(states) -> set[int]:
    used = set()
    for s in states:
        sub = s.data.get("subnet")
        if sub:
            used.add(int(sub.rsplit(".", 1)[1]))
    out = _ip("-4", "addr", "show", check=False).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("inet 198.18."):
            used.add(int(line.split()[1].split(".")[2]))
    return used
