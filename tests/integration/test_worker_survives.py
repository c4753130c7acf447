"""kipcheck's own workers survive the cluster failing under them (issue 11): with a broker
killed mid-run, the prober's requests to it end `info`, the prober carries on as new
processes, and the run exits by its verdict — not with `prober failed` and exit 2."""
from __future__ import annotations

import pytest

from checks.history import read_history
from tests.integration.run_support import run_to_verdict

pytestmark = pytest.mark.cluster  # a live broker (Kafka or Tansu), slow


def test_a_killed_broker_is_history_not_a_harness_error(tmp_path, kafka_version):
    version = ["--kafka-version", kafka_version] if kafka_version else []
    run = run_to_verdict(tmp_path / "runs", "--faults", "kill", "--seed", "1", "--duration", "40", "--quiet",
                         *version)
    assert [w for w in run.config["schedule"] if w["kind"] == "kill"], "the seeded schedule has a kill window"
    records = list(read_history(run.run_dir / "history.jsonl"))
    probes = [r for r in records if r["f"] in ("fetch", "list_offsets", "offsets_for_leader_epoch")]
    lost = [r for r in probes if r["type"] == "info"]
    assert lost, "some probe met the killed broker"
    assert all(r["value"].get("error") for r in lost)
    first = min(lost, key=lambda r: r["index"])
    assert [r for r in probes if r["type"] == "ok" and r["index"] > first["index"]
            and r["process"] != first["process"]], "the prober went on, as a new process"
    for info in lost:  # a process that saw `info` issues nothing more
        assert not [r for r in records if r["process"] == info["process"] and r["index"] > info["index"]]
    assert (run.run_dir / "harness.log").exists()
