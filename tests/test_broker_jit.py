"""The Kafka JVMs' JIT compilers (`--broker-jit`, KIPCHECK_BROKER_JIT, harness.backends.node.JIT_FLAGS): on the
brokers' and the tools' command lines, in the reproduce command, and a wrong value refused before anything starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_the_jit_flag_reaches_brokers_and_tools_and_a_typo_fails_before_anything_starts(tmp_path, monkeypatch):
    from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
    from kipcheck.harness.backends.kafka_dist import KafkaDistribution
    from kipcheck.harness.backends.network import Host
    from kipcheck.harness.backends.node import KafkaNode, NodeSpec
    from kipcheck.harness.errors import HarnessError
    spec = NodeSpec(1, ("broker", "controller"), "rack-1", Host("n1", "127.0.0.1", None), 1, 2, 3)
    dist = KafkaDistribution("4.3.1", (), "java")

    def node(jit):
        return KafkaNode(spec, tmp_path, dist, None, "u", "1@127.0.0.1:2", jit=jit)
    assert "-XX:TieredStopAtLevel=1" in node("c1")._jvm_opts()
    assert not any("TieredStopAtLevel" in o for o in node("full")._jvm_opts())
    # the format tool runs C1 alone whatever the brokers do: it runs for a second
    assert "-XX:TieredStopAtLevel=1" in node("full").format_command(tmp_path / "server.properties")
    monkeypatch.setenv("KIPCHECK_BROKER_JIT", "c2")
    with pytest.raises(HarnessError, match="expected one of full, c1"):
        NativeCluster(dist, tmp_path / "c", ClusterOptions())
    assert not (tmp_path / "c").exists()  # refused before anything was made
    monkeypatch.setenv("KIPCHECK_BROKER_JIT", "c1")
    assert ClusterOptions().jit == "c1"


def test_broker_jit_is_on_the_command_line_and_in_the_reproduce_command(monkeypatch):
    from kipcheck.harness.cli import build_parser
    from kipcheck.harness.reproduce import reproduce_command
    from kipcheck.harness.run import RunOptions
    assert build_parser().parse_args(["run", "--broker-jit", "c1"]).broker_jit == "c1"
    monkeypatch.delenv("KIPCHECK_BROKER_JIT", raising=False)
    assert "--broker-jit" not in reproduce_command(RunOptions(), "4.3.1")
    # set by the environment, it is still named: the command repeats the run anywhere
    monkeypatch.setenv("KIPCHECK_BROKER_JIT", "c1")
    assert "--broker-jit=c1" in reproduce_command(RunOptions(), "4.3.1")


def test_a_wrong_broker_jit_is_one_line_and_exit_2(tmp_path):
    for env, args in (({}, ["--broker-jit", "c3"]), ({"KIPCHECK_BROKER_JIT": "c3"}, [])):
        proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--runs-dir", str(tmp_path), *args],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **env},
                              cwd=Path(__file__).resolve().parent.parent)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip().count("\n") == 0 and "'c3'" in proc.stderr
        assert not any(tmp_path.iterdir())
