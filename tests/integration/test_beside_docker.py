"""The main job beside Debian's dockerd: Docker's FORWARD policy DROP with br_netfilter on.

dockerd runs in a network namespace of its own, never in the host's: there it would set the
host's FORWARD policy to DROP under every other cluster on the machine. kipcheck runs in that
same namespace (`ip netns exec`), so its bridge and its firewall rule live beside Docker's.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.network import list_namespaces
from tests.integration.run_support import (background_run, cluster_states, history_once_it_shows, kafka_args,
                                           kipcheck, leftovers, verdict_of)

pytestmark = pytest.mark.cluster

BRIDGE_NF = "/proc/sys/net/bridge/bridge-nf-call-iptables"


@dataclass
class DockerNamespace:
    name: str

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


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def docker_ns():
    """A network namespace with dockerd (`--bip 198.19.200.1/24`) running; gone afterwards."""
    dockerd = shutil.which("dockerd")
    if os.geteuid() != 0 or not dockerd:
        pytest.skip("needs root and dockerd (`bash scripts/install.sh --test` installs Debian's docker.io)")
    ns = DockerNamespace(f"kcdock{uuid.uuid4().hex[:6]}")
    work = Path(tempfile.mkdtemp(prefix="kcdock-", dir="/tmp"))  # short: unix socket paths are bounded
    subprocess.run(["ip", "netns", "add", ns.name], check=True)
    proc = None
    try:
        subprocess.run(["ip", "-n", ns.name, "link", "set", "lo", "up"], check=True)
        if not Path(BRIDGE_NF).exists() and shutil.which("modprobe"):
            subprocess.run(["modprobe", "br_netfilter"], capture_output=True)
        log = open(work / "dockerd.log", "w")
        proc = subprocess.Popen(
            ns.nsenter(dockerd, "--data-root", str(work / "data"), "--exec-root", str(work / "exec"),
                       "--pidfile", str(work / "docker.pid"), "-H", f"unix://{work}/docker.sock",
                       "--bip", "198.19.200.1/24",
                       "--storage-driver", "vfs"),  # no container runs here; vfs needs no kernel support
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 90
        while "-P FORWARD DROP" not in ns.forward_rules() or "DOCKER-USER" not in ns.forward_rules():
            if proc.poll() is not None:
                tail = (work / "dockerd.log").read_text().strip().splitlines()[-1:]
                pytest.skip(f"dockerd cannot start on this machine: {tail}")
            assert time.monotonic() < deadline, "dockerd ran but never set up its iptables rules"
            time.sleep(0.5)
        yield ns
    finally:
        if proc is not None:
            _stop(proc)
        for pid in subprocess.run(["ip", "netns", "pids", ns.name], capture_output=True, text=True).stdout.split():
            try:  # dockerd's own containerd, or a kipcheck harness a failed test left in the namespace
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", ns.name])
        shutil.rmtree(work, ignore_errors=True)


def _docker_conditions(ns: DockerNamespace) -> None:
    """What made the run fail before kipcheck added its own rule: both must hold here."""
    assert "-P FORWARD DROP" in ns.forward_rules()
    assert ns.sh("cat", BRIDGE_NF).strip() == "1", "br_netfilter is off: bridged traffic would skip iptables"


def test_main_job_is_valid_beside_docker_and_leaves_its_rules_as_found(docker_ns, tmp_path, kafka_version):
    _docker_conditions(docker_ns)
    before = docker_ns.rules()
    proc = kipcheck("run", "--duration", "30", "--seed", "1", "--runs-dir", str(tmp_path), "--quiet",
                    *kafka_args(kafka_version), prefix=docker_ns.ip_netns_exec)
    accept_seen = ""
    deadline = time.monotonic() + 120
    while proc.poll() is None and not accept_seen and time.monotonic() < deadline:
        accept_seen = "\n".join(l for l in docker_ns.forward_rules().splitlines() if "kipcheck" in l)
        time.sleep(0.5)
    out, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err[-3000:]}"
    assert verdict_of(next(tmp_path.iterdir()))["valid"] is True
    assert "-i kcb" in accept_seen and "-o kcb" in accept_seen and "-j ACCEPT" in accept_seen, accept_seen
    assert docker_ns.rules() == before


def test_blocked_bridge_is_one_line_naming_the_firewall(docker_ns, tmp_path, kafka_version):
    """A drop kipcheck's rule cannot override (mangle runs before filter): a quick error saying why."""
    block = ["-t", "mangle", "-I", "FORWARD", "-i", "kcb+", "-j", "DROP"]
    docker_ns.sh("iptables", "-w", *block)
    try:
        before = docker_ns.rules()
        proc = kipcheck("run", "--duration", "30", "--runs-dir", str(tmp_path), "--quiet",
                        *kafka_args(kafka_version), prefix=docker_ns.ip_netns_exec)
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 2, f"exit {proc.returncode}\n{out}\n{err[-3000:]}"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in err, err
        assert "cannot reach node" in lines[0] and "FORWARD policy is DROP" in lines[0], lines[0]
        assert "br_netfilter" in lines[0] and "exited" not in lines[0], lines[0]
        assert docker_ns.rules() == before
        assert leftovers(next(tmp_path.iterdir())) == []
    finally:
        docker_ns.sh("iptables", "-w", *[("-D" if a == "-I" else a) for a in block])


def test_sigkilled_run_then_cluster_down_removes_the_accept_rule(docker_ns, tmp_path, kafka_version):
    """Harness and watchdog SIGKILLed: the rule stays until `cluster down --id` deletes it."""
    before = docker_ns.rules()
    with background_run(tmp_path, kafka_version, "--duration", "300", "--seed", "3",
                        prefix=docker_ns.ip_netns_exec) as proc:
        history = history_once_it_shows(proc, tmp_path, '"type":"ok","f":"send"', 240)
        run_dir = history.parent
        state = cluster_states(run_dir)[0]
        recorded = state.data["forward_rules"]
        assert recorded and "kipcheck" in docker_ns.forward_rules()
        os.kill(state.data["helpers"]["reaper"]["pid"], signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert "kipcheck" in docker_ns.forward_rules(), "with the watchdog dead too, the rule should still be there"
        down = subprocess.run([*docker_ns.ip_netns_exec, sys.executable, "-m", "harness.cli", "cluster", "down",
                               "--id", state.data["cluster_id"]], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        assert docker_ns.rules() == before
        assert leftovers(run_dir) == []
        assert not [ns for ns in list_namespaces() if state.data["cluster_id"] in ns]
