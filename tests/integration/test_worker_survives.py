"""kipcheck's own workers survive the cluster failing under them (issue 11): with a broker
killed mid-run, the prober's requests to it end `info`, the prober carries on as new
processes, and the run exits by its verdict — not with `prober failed` and exit 2."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from checks.history import read_history

pytestmark = pytest.mark.cluster  # a live broker (Kafka or Tansu), slow


def test_a_killed_broker_is_history_not_a_harness_error(tmp_path, kafka_version):
    runs = tmp_path / "runs"
    args = ["--kafka-version", kafka_version] if kafka_version else []
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--faults", "kill", "--seed", "1",
                           "--duration", "40", "--runs-dir", str(runs), "--quiet", *args],
                          capture_output=True, text=True, timeout=600)
    terminal = proc.stdout + proc.stderr
    assert "Traceback" not in terminal, terminal
    [run_dir] = runs.iterdir()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert proc.returncode == {True: 0, False: 1}.get(verdict["valid"], 3), terminal
    killed = [w for w in json.loads((run_dir / "config.json").read_text())["schedule"] if w["kind"] == "kill"]
    assert killed, "the seeded schedule has a kill window"
    records = list(read_history(run_dir / "history.jsonl"))
    probes = [r for r in records if r["f"] in ("fetch", "list_offsets", "offsets_for_leader_epoch")]
    lost = [r for r in probes if r["type"] == "info"]
    assert lost, "some probe met the killed broker"
    assert all(r["value"].get("error") for r in lost)
    first = min(lost, key=lambda r: r["index"])
    assert [r for r in probes if r["type"] == "ok" and r["index"] > first["index"]
            and r["process"] != first["process"]], "the prober went on, as a new process"
    for info in lost:  # a process that saw `info` issues nothing more
        assert not [r for r in records if r["process"] == info["process"] and r["index"] > info["index"]]
    assert (run_dir / "harness.log").exists()
