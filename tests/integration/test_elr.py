"""Eligible leader replicas (KIP-966) on a live cluster, with ELR on and off (`--elr`).

Three brokers and a dedicated controller (the quorum survives every broker stopping); a
topic of replication factor 3 with min.insync.replicas 2. Under min-ISR pressure: follower A
shuts down (ISR {L, B}), follower B shuts down (the ISR would fall below 2: with ELR on B
moves to the ELR), the leader L is killed (no leader; with ELR on L joins the ELR). B shuts
down cleanly because KIP-966 drops a broker that comes back from an unclean shutdown from
the ELR. Then B alone comes back:
with ELR on it is elected from the ELR (the KIP's point: a clean election without waiting
for the last leader); with ELR off it is not, the partition waits for L. Either way every
acknowledged write survives, the controller's metadata log (read through the node's file
verbs, harness/metadata_log.py) shows exactly that, and the KIP-966 rule finds every leader
change eligible.
"""
from __future__ import annotations

import pytest

from kipcheck.checks.rules.election_rules import ElectionRule
from kipcheck.harness import metadata_log
from kipcheck.harness.run import ELR_FEATURE
from tests.integration.faults_support import (full_isr, native_cluster, new_topic, partition_answered_by, produce,
                                              read_all, wait_for, wait_partition)

pytestmark = pytest.mark.cluster


def _partition_log(cluster, topic: str) -> tuple[list[dict], list[dict]]:
    decoded = metadata_log.decode(metadata_log.longest_log(cluster.nodes))
    return [c for c in decoded.changes if c["topic"] == topic], decoded.features


@pytest.mark.parametrize("elr", [pytest.param(1, id="elr-on"), pytest.param(0, id="elr-off", marks=pytest.mark.long)])
def test_a_replica_that_left_the_isr_under_min_isr_pressure_leads_only_with_elr(kafka_dist, tmp_path, elr):
    with native_cluster(kafka_dist, tmp_path / "c", brokers=3, dedicated_controllers=1,
                        features=((ELR_FEATURE, elr),)) as cluster:
        topic = new_topic(cluster, "elr", 1, {"min.insync.replicas": "2"})
        first = cluster.brokers[0].spec.node_id  # its own answer may lag the topic's creation a moment
        p = wait_for(lambda: partition_answered_by(cluster, topic, 0, first), 30, f"{topic} known to broker {first}")
        leader = p.leader
        a, b = [r for r in p.replicas if r != leader]
        produce(cluster, topic, 20)
        cluster.node(a).stop_node(clean_shutdown=True)
        wait_partition(cluster, topic, lambda p: a not in p.isr, 60, f"{a} out of the ISR", exclude=[a])
        produce(cluster, topic, 20, prefix="w")  # acks=all with ISR {L, B}: still at min.insync.replicas
        cluster.node(b).stop_node(clean_shutdown=True)  # clean: a broker back from a crash leaves the ELR
        wait_partition(cluster, topic, lambda p: b not in p.isr, 60, f"{b} out of the ISR", exclude=[a, b])
        cluster.node(leader).stop_node(clean_shutdown=False)
        wait_for(lambda: any(c.get("leader") == -1 for c in _partition_log(cluster, topic)[0]), 60,
                 "the partition without a leader in the metadata log")

        cluster.node(b).start_node()
        cluster.node(b).wait_listening(60)
        if elr:
            elected = wait_for(lambda: (v := partition_answered_by(cluster, topic, 0, b)).leader == b and v, 60,
                               f"{b} elected from the ELR")
            assert tuple(elected.isr) == (b,)
        else:
            wait_for(lambda: partition_answered_by(cluster, topic, 0, b).leader == -1, 30, "no leader without ELR")
        for n in (leader, a):
            cluster.node(n).start_node()
        wait_for(lambda: full_isr(cluster, topic), 120, "every replica back in the ISR")
        assert len(read_all(cluster, topic)) == 40  # every acknowledged write, ELR or not

        changes, features = _partition_log(cluster, topic)
        # a feature at level 0 is not written: absent is off
        assert {f["feature"]: f["level"] for f in features}.get(ELR_FEATURE, 0) == elr
        with_elr = [c for c in changes if c.get("elr")]
        leaders = [c["leader"] for c in changes if "leader" in c]
        if elr:
            assert any(b in c["elr"] for c in with_elr), changes  # B moved to the ELR, not out of every list
            assert b in leaders and leaders.index(b) > leaders.index(-1), leaders  # elected after the outage
        else:
            assert with_elr == [] and leaders[leaders.index(-1) + 1] == leader, leaders  # L again, not B
        records = [{"index": i, "time": 0, "process": "metadata-log", "type": "ok", "f": "partition_change",
                    "value": c} for i, c in enumerate(changes)]
        assert ElectionRule().check(records, "kip") == []


def test_the_outsider_election_provocation_alone_elects_from_the_isr(kafka_dist, tmp_path):
    """The selftest's provocation for the `ineligible-leader` slip (harness/provocations.py) on a
    healthy cluster: the cut-off follower leaves the ISR, the leader's controlled shutdown elects
    the ISR's other member (the active controller's broker), never the follower, and the KIP-966
    rule finds nothing. So a flagged window is the slip's doing, not the provocation's."""
    import threading
    from kipcheck.harness.provocations import outsider_election
    with native_cluster(kafka_dist, tmp_path / "c", brokers=3) as cluster:
        done = outsider_election(cluster, "calm", threading.Event())
        leader, follower, controller = done["replicas"]
        assert done["elected"] == controller, done
        assert all(n.alive() for n in cluster.nodes)  # healed: the leader runs again
        changes, _ = _partition_log(cluster, done["topic"])
        assert any(c.get("isr") is not None and follower not in c["isr"] for c in changes), changes  # it left
        assert follower not in [c.get("leader") for c in changes]
        records = [{"index": i, "time": 0, "process": "metadata-log", "type": "ok", "f": "partition_change",
                    "value": c} for i, c in enumerate(changes)]
        assert ElectionRule().check(records, "kip") == []
