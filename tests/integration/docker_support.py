"""dockerd in a network namespace of its own, for the tests that need Docker.

Never in the host's namespace: there dockerd would set the host's FORWARD policy to DROP
under every other cluster on the machine. Its data root, exec root, pid file and socket
live in a temporary directory; on exit dockerd, every process left in the namespace
(containerd, containers, a harness a failed test left), the namespace and the directory go.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

BRIDGE_NF = "/proc/sys/net/bridge/bridge-nf-call-iptables"
DOCKER_BIP = "198.19.200.1/24"  # Docker's default bridge is 172.17/16: private ranges are off limits here


@dataclass
class DockerNamespace:
    name: str
    socket: str = ""  # unix:///... of its dockerd

    @property
    def ip_netns_exec(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)

    def nsenter(self, *argv: str) -> list[str]:
        """argv in this network namespace only (`ip netns exec` would also remount /sys,
        hiding the cgroup mounts dockerd needs)."""
        return ["nsenter", f"--net=/run/netns/{self.name}", *argv]

    def sh(self, *argv: str) -> str:
        return subprocess.run(self.nsenter(*argv), capture_output=True, text=True, check=True).stdout

    def rules(self) -> str:
        """iptables-save without its timestamps and packet counters: what the rules *are*."""
        lines = [re.sub(r" \[\d+:\d+\]$", "", l) for l in self.sh("iptables-save").splitlines()]
        return "\n".join(l for l in lines if not l.startswith("#"))

    def forward_rules(self) -> str:
        return self.sh("iptables", "-w", "-S", "FORWARD")


def _settled(rules: str, earlier: str | None) -> bool:
    """dockerd's rules (`DockerNamespace.rules`) as it keeps them: FORWARD policy DROP, the
    DOCKER-USER jump moved to the top of FORWARD (dockerd does that last; a snapshot taken before
    it differs from every later one, seen in a suite run), and the same as a second `earlier`."""
    appended = [l for l in rules.splitlines() if l.startswith("-A FORWARD")]
    return (":FORWARD DROP" in rules and appended[:1] == ["-A FORWARD -j DOCKER-USER"]
            and rules == earlier)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def dockerd_namespace(storage_driver: str = "vfs"):
    """A network namespace with dockerd (`--bip 198.19.200.1/24`) running; gone afterwards.
    `vfs` needs no kernel support (fine when no container runs); containers want `overlay2`."""
    dockerd = shutil.which("dockerd")
    if os.geteuid() != 0 or not dockerd:
        pytest.skip("needs root and dockerd (`bash scripts/install.sh --test` installs Debian's docker.io)")
    ns = DockerNamespace(f"kcdock{uuid.uuid4().hex[:6]}")
    work = Path(tempfile.mkdtemp(prefix="kcdock-", dir="/tmp"))  # short: unix socket paths are bounded
    ns.socket = f"unix://{work}/docker.sock"
    subprocess.run(["ip", "netns", "add", ns.name], check=True)
    proc = None
    try:
        subprocess.run(["ip", "-n", ns.name, "link", "set", "lo", "up"], check=True)
        if not Path(BRIDGE_NF).exists() and shutil.which("modprobe"):
            subprocess.run(["modprobe", "br_netfilter"], capture_output=True)
        log = open(work / "dockerd.log", "w")
        proc = subprocess.Popen(
            ns.nsenter(dockerd, "--data-root", str(work / "data"), "--exec-root", str(work / "exec"),
                       "--pidfile", str(work / "docker.pid"), "-H", ns.socket,
                       "--bip", DOCKER_BIP, "--storage-driver", storage_driver),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline, last = time.monotonic() + 90, None
        while not _settled(rules := ns.rules(), last):
            if proc.poll() is not None:
                tail = (work / "dockerd.log").read_text().strip().splitlines()[-1:]
                pytest.skip(f"dockerd cannot start on this machine: {tail}")
            assert time.monotonic() < deadline, f"dockerd ran but its iptables rules never settled:\n{rules}"
            last = rules
            time.sleep(1)
        yield ns
    finally:
        if proc is not None:
            _stop(proc)
        for pid in subprocess.run(["ip", "netns", "pids", ns.name], capture_output=True, text=True).stdout.split():
            try:  # dockerd's own containerd, containers, or a kipcheck harness a failed test left in the namespace
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", ns.name])
        _unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)


def _unmount_under(work: Path) -> None:
    """overlay2 and container mounts a killed dockerd left under its directories (deepest first)."""
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for m in sorted((m for m in mounts if m.startswith(str(work) + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", m], capture_output=True)
