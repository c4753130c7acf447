"""Tiered storage on the shared cluster: KIP-1023 ListOffsets answers (-4, -5, -6) on a
tiered topic, and a wiped follower that bootstraps from the last tiered offset (Kafka >= 4.3)."""
from __future__ import annotations

import threading
import time
import uuid

import pytest

from harness.backends import releases, tiered
from harness.clients.admin import Admin, wait_known_by_each
from harness.clients.prober import Prober
from tests.integration.probe_support import Traffic, completions

pytestmark = pytest.mark.cluster


LOCAL_RETENTION_MS = 30_000


@pytest.fixture
def tiered_topic(cluster):
    """A tiered topic whose segments roll every second; uploaded segments stay local for
    30 s, so the leader's local log starts well below the last tiered offset."""
    name = f"tiered-{uuid.uuid4().hex[:8]}"
    admin = Admin(cluster.bootstrap_servers())
    admin.create_topic(name, partitions=1, replication_factor=3,
                       config=tiered.topic_config(segment_ms=1000, local_retention_ms=LOCAL_RETENTION_MS))
    admin.wait_full_isr(name, 60)
    wait_known_by_each([n.spec.client_endpoint for n in cluster.brokers], name, 60)
    return name


def _tiered_offsets(prober: Prober, key, local_deleted: bool = False, timeout: float = 90.0) -> dict[int, int]:
    """ListOffsets -2, -4, -5, -6 on the leader until something is tiered (-5 >= 0) and,
    with `local_deleted`, local retention has removed the first segments (-4 > 0)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        prober.refresh()
        state = prober._view.partitions.get(key)
        if state is None or state.leader < 0:  # the answering broker does not know the topic yet
            time.sleep(1)
            continue
        answers = {ts: prober.list_offset(state.leader, key, ts, 0, state.leader_epoch) for ts in (-2, -4, -5, -6)}
        if all(a and a["error"] == "NONE" for a in answers.values()) and answers[-5]["offset"] >= 0 and (
                answers[-4]["offset"] > 0 or not local_deleted):
            return {ts: a["offset"] for ts, a in answers.items()}
        time.sleep(1)
    pytest.fail(f"no tiered offsets within {timeout:.0f} s")


def _local_log_start(node, topic: str, partition: int) -> int | None:
    """The base offset of the oldest local segment of a replica (from the segment file names)."""
    logs = sorted(int(p.stem) for p in (node.data_dir / f"{topic}-{partition}").glob("*.log"))
    return logs[0] if logs else None


def test_list_offsets_on_a_tiered_topic(cluster, tiered_topic, history):
    traffic = Traffic(cluster.bootstrap_servers(), tiered_topic, partitions=1)
    traffic.start()
    prober = Prober(cluster.bootstrap_servers(), [tiered_topic], history, threading.Event())
    try:
        offsets = _tiered_offsets(prober, (tiered_topic, 0))
        prober.list_offsets((tiered_topic, 0))
    finally:
        prober.close()
        traffic.stop()
    answers = completions(history, "list_offsets")
    pending = [v for v in answers if v["timestamp"] == -6]
    assert pending and all(v["error"] == "NONE" for v in pending), "ListOffsets -6 not answered on a tiered topic"
    # KIP-1023: log start <= last tiered; earliest pending upload is after the last tiered offset
    assert offsets[-2] <= offsets[-5]
    assert offsets[-6] == -1 or offsets[-6] > offsets[-5]


def test_wiped_follower_bootstraps_from_the_last_tiered_offset(cluster, kafka_dist, tiered_topic, history):
    if not releases.has(kafka_dist.version, "kip-1023"):
        pytest.skip(f"{tiered.FOLLOWER_FROM_TIERED} needs Kafka >= 4.3 (KIP-1023)")
    key = (tiered_topic, 0)
    traffic = Traffic(cluster.bootstrap_servers(), tiered_topic, partitions=1)
    traffic.start()
    prober = Prober(cluster.bootstrap_servers(), [tiered_topic], history, threading.Event())
    admin = Admin(cluster.bootstrap_servers())
    try:
        # Kafka's empty follower fetches from 0; the leader answers OFFSET_MOVED_TO_TIERED_STORAGE
        # only once its local log no longer starts at 0, so wait for local retention first
        offsets = _tiered_offsets(prober, key, local_deleted=True)
        assert offsets[-4] < offsets[-5], "the leader's local log should still hold tiered segments"
        state = prober._view.partitions[key]
        follower = cluster.node(next(b for b in state.replicas if b != state.leader))
        op = history.invoke("nemesis", "fault", {"fault": "wipe", "targets": [follower.spec.node_id],
                                                 "phase": "start"})
        follower.stop_node()
        follower.clean_node()
        follower.start_node()
        op.ok()
        admin.wait_full_isr(tiered_topic, 120)
        history.invoke("nemesis", "fault", {"fault": "wipe", "targets": [follower.spec.node_id],
                                            "phase": "stop"}).ok()
        admin.wait_full_isr("__kipcheck_ready", 60)
    finally:
        prober.close()
        traffic.stop()
    start = _local_log_start(follower, *key)
    assert start is not None
    # KIP-1023: the empty follower skipped what was already tiered instead of copying the
    # leader's local log from its start; the restart takes far less than the 30 s of data
    # between the two, so a follower starting at the earliest local offset stays below
    assert start > offsets[-5] > offsets[-4]
