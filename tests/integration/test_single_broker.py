"""A native run on one broker: the workload topic has replication factor 1, so there is no
follower to fetch from. The run must go on without it, say so, and exit by its verdict
(it once died of a StopIteration looking for partition 0's follower)."""
from __future__ import annotations

import pytest

from tests.integration.run_support import run_to_verdict

pytestmark = pytest.mark.cluster  # a live broker (Kafka or Tansu), slow


def test_one_broker_runs_and_names_what_it_skipped(tmp_path, kafka_version):
    version = ["--kafka-version", kafka_version] if kafka_version else []
    run = run_to_verdict(tmp_path / "runs", "--brokers", "1", "--faults", "none", "--duration", "15", *version)
    assert run.config["consumer_rack"] is None
    assert [s["key"] for s in run.config["skipped"]] == ["consumer.follower_fetching"]  # Kafka lacks no API
    assert "replication factor 1" in " ".join(run.terminal.split())
