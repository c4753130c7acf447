"""Broker membership on a real cluster: a broker decommissioned (its replicas moved off, shut
down, unregistered) and added back (registered anew, its replicas reassigned onto it).

Everything is read back from the cluster's own metadata, never from what the fault returned."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.faults.base import FaultSpec
from kipcheck.harness.clients.admin import Admin
from tests.integration.faults_support import native_cluster, new_topic, produce

pytestmark = pytest.mark.cluster


def _assignment(cluster) -> dict[tuple[str, int], list[int]]:
    meta = Admin(cluster.bootstrap_servers()).client.list_topics(timeout=30)
    return {(t, p): list(pm.replicas) for t, tm in meta.topics.items() for p, pm in tm.partitions.items()}


@pytest.fixture(scope="module")
def four(kafka_dist, tmp_path_factory):
    with native_cluster(kafka_dist, tmp_path_factory.mktemp("four"), brokers=4) as c:
        yield c


def test_a_decommissioned_broker_holds_no_replica_and_the_heal_puts_them_back(four, history):
    from kipcheck.harness.pytest_plugin import NemesisHandle
    topic = new_topic(four, "m", 4, {})
    produce(four, topic, 50)
    before = _assignment(four)
    handle = NemesisHandle(four, topic, history)
    spec = FaultSpec("broker-decommission", 0, 0, {"target": "leader", "topic": topic, "partition": 0})
    injected = handle.inject(spec)
    [victim] = injected["targets"]
    try:
        during = _assignment(four)
        assert not [tp for tp, r in during.items() if victim in r], "a replica is left on the decommissioned broker"
        assert all(len(during[tp]) == len(before[tp]) for tp in before)
        assert not four.node(victim).alive()
        assert victim not in Admin(four.bootstrap_servers()).broker_ids()
        assert len(produce(four, topic, 20)) == 20  # acks=all on the three brokers left
    finally:
        handle.heal(spec, injected)
    after = _assignment(four)
    moved = [tp for tp, r in before.items() if victim in r]
    assert moved and all(after[tp] == before[tp] for tp in moved), "the heal did not reassign onto the broker"
    assert victim in Admin(four.bootstrap_servers()).broker_ids()
    Admin(four.bootstrap_servers()).wait_full_isr(topic, 60)


@pytest.mark.long
def test_a_run_with_a_decommission_is_valid(tmp_path, pytestconfig):
    """`kipcheck run --brokers 4 --faults broker-decommission,kill`: VALID, every broker registered at the end.
    Long: 3 min 21 s here (four nodes, a 26 s inject and a 49 s heal under load, 2026-11-27)."""
    v = pytestconfig.getoption("--kafka-version")
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--brokers", "4",
                           "--faults", "broker-decommission,kill", "--seed", "2", "--duration", "60",
                           # a decommission's window with its inject and heal held 75-100 s of the run here,
                           # and a metadata change that depends on a node in a fault window is no KIP-1166
                           # sample: one run of two counted 13 of the 20 the statistic needs (2026-11-27)
                           "--allow-uncovered", "--runs-dir", str(tmp_path), "--quiet", *(["--kafka-version", v] if v else [])],
                          capture_output=True, text=True, timeout=900)
    run_dir = next(tmp_path.iterdir())
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    records = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    faults = [r["value"] for r in records if r["f"] == "fault" and r["type"] == "ok"]
    decommissioned = [v for v in faults if v["fault"] == "broker-decommission" and v["phase"] == "start"]
    healed = [v for v in faults if v["fault"] == "broker-decommission" and v["phase"] == "stop"]
    assert decommissioned and len(healed) == len(decommissioned)
    assert all(v["targets"][0] not in v["brokers_after"] and v["moved"] for v in decommissioned)
    # the observer saw the broker leave the registered brokers and come back
    victim = decommissioned[0]["targets"][0]
    seen = [v["brokers"] for v in (r["value"] for r in records if r["f"] == "membership" and r["type"] == "ok")]
    gone = next(i for i, b in enumerate(seen) if victim not in b)
    assert victim in seen[0] and any(victim in b for b in seen[gone:]), seen
    assert json.loads((run_dir / "verdict.json").read_text())["valid"] is True
