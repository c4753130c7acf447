"""The observer against a live cluster: metadata snapshots and KIP-1166 propagation timings."""
from __future__ import annotations

import threading

import pytest

from harness.observer import Observer
from tests.integration.probe_support import completions

pytestmark = pytest.mark.cluster


def test_snapshots_cover_every_broker_and_partition(cluster, topic, history):
    observer = Observer(cluster.bootstrap_servers(), [topic], history, threading.Event())
    try:
        observer.snapshot()
    finally:
        observer.close()
    answers = completions(history, "metadata")
    brokers = {n.spec.node_id for n in cluster.brokers}
    assert {(v["broker"], v["partition"]) for v in answers} == {(b, p) for b in brokers for p in range(3)}
    for v in answers:
        assert v["leader"] in v["isr"] and v["leader_epoch"] >= 0 and sorted(v["replicas"]) == sorted(brokers)
        assert v["racks"] == {str(b): r for b, r in cluster.racks().items()}


def test_propagation_timings_for_create_alter_delete(cluster, topic, history):
    observer = Observer(cluster.bootstrap_servers(), [topic], history, threading.Event())
    try:
        for _ in range(3):  # create, alter config, delete
            observer.propagate(next(observer._changes))
    finally:
        observer.close()
    timings = completions(history, "metadata_propagation")
    assert [v["change"].split()[0] for v in timings] == ["create_topic", "alter_config", "delete_topic"]
    brokers = {str(n.spec.node_id) for n in cluster.brokers}
    for v in timings:
        assert set(v["seen_by"]) == brokers and v["complete"]
        assert all(t > 0 for t in v["seen_by"].values())
