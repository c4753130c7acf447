"""A native run on one broker: the workload topic has replication factor 1, so there is no
follower to fetch from. The run must go on without it, say so, and exit by its verdict
(it once died of a StopIteration looking for partition 0's follower)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.cluster  # a live broker (Kafka or Tansu), slow


def test_one_broker_runs_and_names_what_it_skipped(tmp_path, kafka_version):
    runs = tmp_path / "runs"
    args = ["--kafka-version", kafka_version] if kafka_version else []
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--brokers", "1", "--faults", "none",
                           "--duration", "15", "--runs-dir", str(runs), *args],
                          capture_output=True, text=True, timeout=600)
    terminal = proc.stdout + proc.stderr
    assert "Traceback" not in terminal, terminal
    [run_dir] = runs.iterdir()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert proc.returncode == {True: 0, False: 1}.get(verdict["valid"], 3), terminal
    config = json.loads((run_dir / "config.json").read_text())
    assert config["consumer_rack"] is None
    assert [s["key"] for s in config["skipped"]] == ["consumer.follower_fetching"]  # Kafka lacks no API
    assert "replication factor 1" in " ".join(terminal.split())
