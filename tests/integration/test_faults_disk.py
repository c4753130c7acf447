"""Disk faults on a live cluster: a wiped or truncated replica re-replicates and rejoins the ISR, nothing is lost."""
from __future__ import annotations

import time

import pytest

from kipcheck.faults.base import FaultSpec
from tests.integration.faults_support import full_isr, produce_bulk, read_all, wait_for, wait_partition

pytestmark = pytest.mark.cluster

RECORDS = 3000  # ~3 MB on partition 0: enough for the rejoin to be a real catch-up


def _spec(kind, topic, **params):
    return FaultSpec(kind, 0, 0, {"topic": topic, "partition": 0, **params})


def _replica_bytes(node, topic: str) -> int:
    return sum(f.stat().st_size for f in (node.data_dir / f"{topic}-0").glob("*.log"))


def _rejoin(cluster, nemesis, topic, spec, injected) -> float:
    t0 = time.monotonic()
    nemesis.heal(spec, injected)
    wait_for(lambda: full_isr(cluster, topic), 180, f"node {injected['targets'][0]} back in the ISR")
    return time.monotonic() - t0


def test_wiped_follower_catches_up_and_rejoins_the_isr(cluster, topic, nemesis, record_property):
    produce_bulk(cluster, topic, RECORDS)
    spec = _spec("wipe", topic, target="follower")
    injected = nemesis.inject(spec)
    node = cluster.node(injected["targets"][0])
    assert not node.alive() and not (node.data_dir / f"{topic}-0").exists()
    assert (node.data_dir / "meta.properties").exists()  # reformatted with the cluster's id
    seconds = _rejoin(cluster, nemesis, topic, spec, injected)
    record_property("wiped_follower_rejoin_seconds", round(seconds, 1))
    print(f"wiped follower {node.spec.node_id} rejoined the ISR {seconds:.1f} s after its restart began")
    leader = cluster.node(full_isr(cluster, topic).leader)
    wait_for(lambda: _replica_bytes(node, topic) == _replica_bytes(leader, topic) > 0, 60, "the same log bytes")


def test_wiped_leader_hands_over_and_loses_no_acknowledged_record(cluster, topic, nemesis):
    produce_bulk(cluster, topic, RECORDS)
    spec = _spec("wipe", topic, target="leader")
    injected = nemesis.inject(spec)
    old = injected["targets"][0]
    wait_partition(cluster, topic, lambda p: p.leader not in (-1, old), 60, "a new leader", exclude=[old])
    _rejoin(cluster, nemesis, topic, spec, injected)
    assert len(read_all(cluster, topic)) == RECORDS


def test_truncated_segment_is_recovered_and_refetched(cluster, topic, nemesis):
    produce_bulk(cluster, topic, RECORDS)
    spec = _spec("truncate", topic, target="follower", bytes=4096)
    injected = nemesis.inject(spec)
    assert injected["size_before"] - injected["size_after"] == 4096
    node = cluster.node(injected["targets"][0])
    _rejoin(cluster, nemesis, topic, spec, injected)
    leader = cluster.node(full_isr(cluster, topic).leader)
    wait_for(lambda: _replica_bytes(node, topic) == _replica_bytes(leader, topic), 60, "the torn tail fetched again")
    assert len(read_all(cluster, topic)) == RECORDS


def test_wiped_metadata_log_is_rebuilt_from_the_quorum(cluster, topic, nemesis):
    spec = _spec("wipe-metadata", topic, target="follower")
    injected = nemesis.inject(spec)
    node = cluster.node(injected["targets"][0])
    assert not list(node.metadata_dir.glob("__cluster_metadata-0/*.log"))
    _rejoin(cluster, nemesis, topic, spec, injected)
    assert list(node.metadata_dir.glob("__cluster_metadata-0/*.log"))
