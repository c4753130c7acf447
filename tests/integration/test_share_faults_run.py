"""A whole `kipcheck run --workload share` under faults aimed at the share group's coordinators
(issue 31 §3-4): valid on a healthy Kafka, every KIP-932 rule observed, every fault healed.

Seed 30's 30 s schedule (faults.schedule, pure) isolates the share coordinator of one
share-partition from 4.6 s for 11.5 s and pauses the share group's coordinator from 19.4 s:
both targets are drawn from the seed, whatever the run's group is named."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.harness.backends import releases

pytestmark = pytest.mark.cluster

SEED, KINDS, DURATION = 30, "kill,pause,partition,latency", 30


def test_a_share_run_under_coordinator_faults_is_valid(tmp_path, pytestconfig, kafka_dist):
    if not releases.has(kafka_dist.version, "share-groups"):
        pytest.skip(f"Kafka {kafka_dist.version} has no share groups")
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--workload", "share",
                           "--faults", KINDS, "--seed", str(SEED), "--duration", str(DURATION),
                           "--runs-dir", str(tmp_path), "--quiet", "--kafka-version", kafka_dist.version],
                          capture_output=True, text=True, timeout=900)
    run_dir = next(tmp_path.iterdir())
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True
    records = [json.loads(l) for l in (run_dir / "history.jsonl").read_text().splitlines()]
    faults = [r["value"] for r in records if r["f"] == "fault" and r["type"] == "ok"]
    hit = {(f["fault"], f.get("target")): f.get("targets") for f in faults if f["phase"] == "start"}
    assert set(hit) == {("partition", "share-coordinator"), ("pause", "group-coordinator")}, hit
    assert all(targets for targets in hit.values()), hit  # each resolved to a broker
    config = json.loads((run_dir / "config.json").read_text())
    group = config["workload"]["share_group"]
    assert all(f.get("group") == group for f in faults if f["phase"] == "start")
    assert f"--share-group {group}" in config["reproduce"]
    starts = sorted(f["fault"] for f in faults if f["phase"] == "start")
    assert starts == sorted(f["fault"] for f in faults if f["phase"] == "stop" and f["fault"] != "heal-all")
    assert verdict["share_groups"]["records_acquired"] > 0
    for rule, row in verdict["conformance"]["KIP-932"].items():
        assert row["status"] == "holds" and row["observations"] > 0, (rule, row)
