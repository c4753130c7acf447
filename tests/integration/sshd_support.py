"""Remote hosts for the ssh backend's tests: network namespaces, each running its own sshd.

The namespaces are made the native backend's way (harness.backends.network.BridgeNetwork,
recorded in a cluster state owned by the test process, so a killed pytest is cleaned by the
next `reap_stale`), without kipcheck's chain: a host starts as a machine kipcheck has never
touched. Each runs Debian's /usr/sbin/sshd with a host key and a client key made for this
run, its own config and port 22 on its own address.

Each sshd also runs as the init of a pid namespace and in a mount namespace of its own, with a
private tmpfs on the hosts' scratch directory, where the cluster file's `kipcheck.dir` lies.
What kipcheck puts on a host (the classpath, node directories, segments, clock files) exists
only there, and the pids it records are the host's own, as on a machine of its own: a verb
that touched this machine's files or pids instead of going over SSH fails the tests. The
tests look inside with `SshdHosts.exists` (nsenter into a host's mount namespace).
Everything goes on exit: sshd (and with it each host's tmpfs), the namespaces, the bridge, the
keys, and /run/sshd when the fixture made it.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kipcheck.harness.backends import network, ssh
from kipcheck.harness.backends.sweep import teardown
from kipcheck.harness.backends.state import ClusterState, all_states, process_start_time

SSHD = Path("/usr/sbin/sshd")

SSHD_CONFIG = """Port 22
ListenAddress {address}
HostKey {dir}/host_key
PidFile none
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
MaxSessions 200
MaxStartups 200
LogLevel ERROR
"""


def require_sshd() -> None:
    if not SSHD.exists():
        pytest.skip("Debian's openssh-server is not installed (scripts/install.sh --test)")
    if not network.namespaces_available():
        pytest.skip("sshd hosts need network namespaces (root)")


@dataclass
class SshdHosts:
    cluster_file: Path
    hosts: list[network.Host]  # the namespaces, as the test inspects them (iptables, processes)
    remote_dir: str  # kipcheck's directory on the hosts (the cluster file's kipcheck.dir)
    client_key: Path
    tmp: Path
    entries: list[dict] = field(default_factory=list)  # the cluster file's nodes
    sshd_pids: list[int] = field(default_factory=list)  # each host's unshare: its mount namespace is the host's disk

    def exists(self, index: int, path: str) -> bool:
        """Whether `path` exists on host `index` (0-based), inside its own filesystem."""
        return subprocess.run(["nsenter", "-t", str(self.sshd_pids[index]), "-m", "test", "-e", path]).returncode == 0

    def chains(self, host: network.Host) -> list[str]:
        out = subprocess.run(host.wrap(["iptables", "-w", "-S"]), capture_output=True, text=True).stdout
        return [l for l in out.splitlines() if "KIPCHECK" in l]

    def processes(self, pattern: str) -> list[str]:
        """`host:pid:command line` of the hosts' processes whose command line contains `pattern`;
        the pid as the host itself numbers it (the last of /proc's NSpid), as kipcheck records it."""
        found = []
        for h in self.hosts:
            for pid in network.namespace_pids(h.netns):
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                    nspid = next(l for l in Path(f"/proc/{pid}/status").read_text().splitlines()
                                 if l.startswith("NSpid:")).split()[-1]
                except (OSError, StopIteration):
                    continue
                if pattern in cmd:
                    found.append(f"{h.name}:{nspid}:{cmd[:120]}")
        return found


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kipcheck-test", "-f", str(path)],
                   check=True, capture_output=True)


def _wait_banner(address: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, 22), timeout=1) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"sshd on {address} did not answer within {timeout:.0f} s")


@contextlib.contextmanager
def sshd_hosts(count: int = 3, roles: list[list[str]] | None = None):
    """`count` sshd hosts and a ducktape cluster file naming them; gone on exit."""
    require_sshd()
    tmp = Path(tempfile.mkdtemp(prefix="kipcheck-sshd-"))
    cluster_id = "h" + uuid.uuid4().hex[:7]
    state = ClusterState.create(cluster_id, os.getpid(), root=str(tmp), mode="sshd-hosts")
    privsep = Path("/run/sshd")  # sshd's privilege separation directory (Debian's service makes it)
    made_privsep = not privsep.exists()
    scratch = Path(f"/tmp/kipcheck-hosts-{cluster_id}")  # here an empty mount point; on each host its own tmpfs
    remote_dir = str(scratch / "kipcheck")
    try:
        if made_privsep:
            privsep.mkdir(mode=0o755, parents=True)
        used = network.used_subnet_indices(all_states())
        net = network.BridgeNetwork(cluster_id, next(i for i in range(16, 250) if i not in used), state)
        net.create_bridge()
        _keygen(tmp / "host_key")
        _keygen(tmp / "client_key")
        shutil.copy(tmp / "client_key.pub", tmp / "authorized_keys")
        hosts, entries, sshd_pids = [], [], []
        for i in range(1, count + 1):
            host = net.add_host(f"h{i}", 10 + i, chain=False)
            config = tmp / f"sshd_config.{i}"
            config.write_text(SSHD_CONFIG.format(address=host.address, dir=tmp))
            scratch.mkdir(exist_ok=True)
            # the host's own disk (a tmpfs in its mount namespace) and own pids (a pid namespace, sshd its
            # init: when it goes, every process of the host goes); the helper pid is unshare's, in both
            own_machine = ["unshare", "--mount", "--propagation", "private", "--pid", "--fork", "--kill-child",
                           "--mount-proc", "sh", "-c",
                           'mount -t tmpfs -o size=4g,mode=1777 kipcheck-host "$0" && exec "$@"', str(scratch)]
            with open(tmp / f"sshd.{i}.log", "ab") as log:
                proc = subprocess.Popen(host.wrap([*own_machine, str(SSHD), "-D", "-e", "-f", str(config)]), stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            state.set_entry("helpers", f"sshd-{i}", {"pid": proc.pid, "start": process_start_time(proc.pid)})
            sshd_pids.append(proc.pid)
            hosts.append(host)
            entry = {"externally_routable_ip": host.address,
                     "ssh_config": {"host": f"worker{i}", "hostname": host.address, "user": "root", "port": 22,
                                    "password": None, "identityfile": str(tmp / "client_key")}}
            if roles:
                entry["kipcheck"] = {"roles": roles[i - 1]}
            entries.append(entry)
        for h in hosts:
            _wait_banner(h.address)
        cluster_file = tmp / "cluster.json"
        cluster_file.write_text(json.dumps({"nodes": entries, "kipcheck": {"dir": remote_dir}}, indent=1))
        yield SshdHosts(cluster_file, hosts, remote_dir, tmp / "client_key", tmp, entries, sshd_pids)
    finally:
        ssh.close_all()
        teardown(state)  # the sshd helpers, the namespaces (every rule in them) and the bridge
        if made_privsep:
            shutil.rmtree(privsep, ignore_errors=True)
        # each host's files went with its tmpfs; here only the empty mount point is left
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
