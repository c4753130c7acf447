"""The observer against a live cluster: metadata snapshots and KIP-1166 propagation timings."""
from __future__ import annotations

import threading
import time

import pytest

from kipcheck.rundir.history import read_history
from kipcheck.checks.rules.kip1166_rules import PropagationRule
from kipcheck.harness.clients.observer import ALTERS_PER_TOPIC, Observer
from kipcheck.reference_model import kip1166
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
    kraft = cluster.kraft_settings()
    observer = Observer(cluster.bootstrap_servers(), [topic], history, threading.Event(), kraft=kraft)
    try:
        for _ in range(ALTERS_PER_TOPIC + 2):  # create, alter config, ..., delete
            observer.propagate(next(observer._changes))
    finally:
        observer.close()
    timings = completions(history, "metadata_propagation")
    assert [v["change"].split()[0] for v in timings] == (
        ["create_topic"] + ["alter_config"] * ALTERS_PER_TOPIC + ["delete_topic"])
    brokers = {str(n.spec.node_id) for n in cluster.brokers}
    assert kraft["controllers"] == sorted(n.spec.node_id for n in cluster.controllers)
    for v in timings:
        assert set(v["seen_by"]) == brokers and v["complete"]
        assert all(t > 0 for t in v["seen_by"].values())
        assert 0 < v["acknowledged"] and set(v["unseen_until"]) == brokers
        assert {k: v[k] for k in kraft} == kraft  # the history alone carries the bound's inputs


def test_kip1166_brokers_meet_the_propagation_bound(cluster, topic, history):
    """The live conformance check: enough changes for the statistic, judged by the rule."""
    stop = threading.Event()
    observer = Observer(cluster.bootstrap_servers(), [topic], history, stop, interval=30.0, warmup=0.0,
                        kraft=cluster.kraft_settings(), seed=1166)
    observer.start()
    try:
        deadline = time.monotonic() + 90
        while len(observer.propagations) < kip1166.MIN_CHANGES + 5 and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        observer.join(30)
    assert len(observer.propagations) >= kip1166.MIN_CHANGES
    history.flush()
    records = [r for r in read_history(history.path) if list(PropagationRule().group_keys(r))]
    assert PropagationRule().check(records, "kip") == []
