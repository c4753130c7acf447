"""The raw-protocol prober against a live cluster: KIP-392 follower fetches and cases,
KIP-227 session errors, OffsetsForLeaderEpoch, all as contract-valid history records."""
from __future__ import annotations

import threading
import time

import pytest

from kipcheck.harness.clients.prober import FAR_ABOVE, Prober
from tests.integration.probe_support import Traffic, completions

pytestmark = pytest.mark.cluster


@pytest.fixture
def probed(cluster, topic, history):
    """At least three rounds of every probe on every partition of `topic`, under steady traffic."""
    traffic = Traffic(cluster.bootstrap_servers(), topic)
    traffic.start()
    prober = Prober(cluster.bootstrap_servers(), [topic], history, threading.Event(), seed=1)
    try:
        # three rounds, and more (up to eight) until some leader has redirected a rack-aware fetch
        # and some follower has served records: on a loaded machine a follower may be out of the
        # ISR for a round, and then no leader names it (KIP-392: only in-sync replicas are
        # preferred), or its HWM may not yet cover the offset asked (CI, stop 25: none served)
        for round_ in range(8):
            if round_ >= 3 and _redirected_and_served(cluster, history):
                break
            keys = []
            deadline = time.monotonic() + 30  # the broker asked may learn of the new topic a little later
            while not keys and time.monotonic() < deadline:
                prober.refresh()
                keys = sorted(k for k in prober._view.partitions if k[0] == topic)
                time.sleep(0 if keys else 0.2)
            assert keys, f"the prober's metadata never showed {topic}"
            for key in keys:
                for probe in prober.rounds():
                    probe(key)
    finally:
        prober.close()
        traffic.stop()
    return cluster, topic, history


def _consumer_fetches(history):
    return [v for v in completions(history, "fetch") if "partitions" not in v]


def _follower_reads(racks, fetches):
    """Fetches a follower in the client's rack answered with records itself."""
    return [v for v in fetches if v["records"] and racks[v["broker"]] == v["rack"]
            and v["preferred_read_replica"] == -1]


def _redirected_and_served(cluster, history) -> bool:
    fetches = _consumer_fetches(history)
    return (any(v.get("preferred_read_replica", -1) >= 0 for v in fetches)
            and bool(_follower_reads(cluster.racks(), fetches)))


def test_leader_names_a_preferred_follower_and_followers_serve(probed):
    cluster, topic, history = probed
    racks = cluster.racks()
    fetches = _consumer_fetches(history)
    redirected = [v for v in fetches if v["preferred_read_replica"] >= 0]
    assert redirected, "no leader answered a rack-aware consumer fetch with a preferred read replica"
    for v in redirected:  # KIP-392: the preferred replica is in the client's rack
        assert racks[v["preferred_read_replica"]] == v["rack"]
        assert v["records"] == []
    follower_reads = _follower_reads(racks, fetches)
    assert follower_reads, "no follower served a consumer fetch"
    # committed data only: every served offset is below the partition's HWM once traffic stopped.
    # (Not below the HWM the response reports: Kafka samples that before the read, a known
    # deviation, `response-hwm-sampled-before-read` in reference_model/profiles.py.)
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": "hwm-check"})
    try:
        final = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(3)}
    finally:
        c.close()
    for v in follower_reads:
        assert all(offset < final[v["partition"]] for offset, _ in v["records"]), (v, final)


def test_fetch_far_above_the_log_is_out_of_range(probed):
    _, _, history = probed
    far = [v for v in completions(history, "fetch") if v.get("fetch_offset") == FAR_ABOVE]
    assert far and all(v["error"] == "OFFSET_OUT_OF_RANGE" and v["records"] == [] for v in far)


def test_sessions_see_both_session_errors_and_survive_a_wrong_epoch(probed):
    _, _, history = probed
    sessions = [v for v in completions(history, "fetch") if "partitions" in v]
    errors = {v["top_error"] for v in sessions}
    assert {"FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"} <= errors
    for i, v in enumerate(sessions[:-1]):
        if v["top_error"] == "INVALID_FETCH_SESSION_EPOCH":
            after = sessions[i + 1]  # the same session at the right epoch (KIP-227 keeps the session)
            assert after["session_id"] == v["session_id"] and after["top_error"] == "NONE"
            assert all(e["error"] == "INVALID_FETCH_SESSION_EPOCH" and e["records"] == []
                       for e in v["partitions"])
    created = [v for v in sessions if v["session_id"] == 0 and v["session_epoch"] == 0]
    assert created and all(v["response_session_id"] > 0 for v in created)
    closed = [v for v in sessions if v["session_id"] > 0 and v["session_epoch"] == -1]
    assert closed and all(v["response_session_id"] == 0 for v in closed)
    assert any(e.get("omitted") for v in sessions for e in v["partitions"]), "no incremental response omitted a partition"
    assert any(v.get("forgotten") for v in sessions)


def test_offsets_for_leader_epoch_as_a_consumer(probed):
    _, _, history = probed
    answers = completions(history, "offsets_for_leader_epoch")
    assert answers and all(v["replica_id"] == -1 for v in answers)
    assert any(v["error"] == "NONE" and v["end_offset"] >= 0 for v in answers)


def test_list_offsets_every_special_timestamp(probed):
    _, _, history = probed
    answered = {v["timestamp"] for v in completions(history, "list_offsets") if v["error"] == "NONE"}
    assert {t for t in answered if t < 0} == {-1, -2, -3, -4, -5, -6}
    # and real times, a few seconds before each ask (Unix ms): KIP-32's by-time judgement
    real = [t for t in answered if t >= 0]
    assert real and all(abs(t / 1000 - time.time()) < 3600 for t in real), real


def test_the_settled_round_names_the_largest_timestamp_on_every_partition(cluster, topic, history):
    """The settled round begins while writes still flow, so its first ListOffsets -3 answers are
    mostly withheld (the newest record is above the HWM); it asks again until each partition's
    answer names an acknowledged record (KIP-734), which one ask per partition did not."""
    traffic = Traffic(cluster.bootstrap_servers(), topic)
    traffic.start()
    time.sleep(3)
    prober = Prober(cluster.bootstrap_servers(), [topic], history, threading.Event(), seed=1)
    settled = threading.Thread(target=prober.settled_round)
    settled.start()
    time.sleep(1.5)
    traffic.stop()
    traffic.join(20)
    settled.join(60)
    asked = [v for v in completions(history, "list_offsets") if v["timestamp"] == -3]
    last = {v["partition"]: v for v in asked}
    withheld = [v for v in asked if v["error"] == "NONE" and v["offset"] < 0]
    print(f"-3 asked {len(asked)} times, {len(withheld)} withheld")
    assert sorted(last) == [0, 1, 2], last
    for partition, v in last.items():
        assert v["error"] == "NONE" and (partition, v["offset"]) in traffic.acknowledged, v
        assert v["found_timestamp"] > 0, v
