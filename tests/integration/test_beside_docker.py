"""The main job beside Debian's dockerd: Docker's FORWARD policy DROP with br_netfilter on.

dockerd runs in a network namespace of its own, never in the host's: there it would set the
host's FORWARD policy to DROP under every other cluster on the machine. kipcheck runs in that
same namespace (`ip netns exec`), so its bridge and its firewall rule live beside Docker's.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kipcheck.harness.backends.network import list_namespaces
from tests.integration.docker_support import BRIDGE_NF, DockerNamespace, dockerd_namespace
from tests.integration.run_support import (background_run, cluster_states, history_once_it_shows, kafka_args,
                                           kipcheck, leftovers, verdict_of)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def docker_ns():
    """A network namespace with dockerd running (tests.integration.docker_support); gone afterwards."""
    with dockerd_namespace("vfs") as ns:  # no container runs here; vfs needs no kernel support
        yield ns


def _docker_conditions(ns: DockerNamespace) -> None:
    """What made the run fail before kipcheck added its own rule: both must hold here."""
    assert "-P FORWARD DROP" in ns.forward_rules()
    assert ns.sh("cat", BRIDGE_NF).strip() == "1", "br_netfilter is off: bridged traffic would skip iptables"


@pytest.mark.long  # a whole main job (130 s); the two below start kipcheck beside Docker in the default suite
def test_main_job_is_valid_beside_docker_and_leaves_its_rules_as_found(docker_ns, tmp_path, kafka_version):
    _docker_conditions(docker_ns)
    before = docker_ns.rules()
    proc = kipcheck("run", "--duration", "20", "--seed", "1", "--runs-dir", str(tmp_path), "--quiet",
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
        down = subprocess.run([*docker_ns.ip_netns_exec, sys.executable, "-m", "kipcheck.harness.cli", "cluster", "down",
                               "--id", state.data["cluster_id"]], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        assert docker_ns.rules() == before
        assert leftovers(run_dir) == []
        assert not [ns for ns in list_namespaces() if state.data["cluster_id"] in ns]
