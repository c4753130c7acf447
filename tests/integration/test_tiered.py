"""Tiered storage on the shared cluster: KIP-1023 ListOffsets answers (-4, -5, -6) on a
tiered topic, and a wiped follower that bootstraps from the last tiered offset (Kafka >= 4.3);
and on a release that publishes no Kafka test jars (4.4.0), kipcheck's own remote storage
manager uploading segments and serving a consumer's read from offset 0 once local retention
has removed them."""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from kipcheck.harness.backends import releases, tiered
from kipcheck.harness.clients.admin import Admin, wait_known_by_each
from kipcheck.harness.clients.prober import Prober
from tests.integration.probe_support import Traffic, completions

pytestmark = pytest.mark.cluster


LOCAL_RETENTION_MS = 30_000


#: a release whose kafka-storage test jar (Kafka's LocalTieredStorage) was never published:
#: remote storage there is only kipcheck's own (harness/backends/remote_storage)
WITHOUT_TEST_JARS = "4.4.0"


def _tiered_topic(cluster, local_retention_ms: int) -> str:
    name = f"tiered-{uuid.uuid4().hex[:8]}"
    admin = Admin(cluster.bootstrap_servers())
    admin.create_topic(name, partitions=1, replication_factor=3,
                       config=tiered.topic_config(segment_ms=1000, local_retention_ms=local_retention_ms))
    admin.wait_full_isr(name, 60)
    wait_known_by_each([n.spec.client_endpoint for n in cluster.brokers], name, 60)
    return name


@pytest.fixture
def tiered_topic(cluster):
    """A tiered topic whose segments roll every second; uploaded segments stay local for
    30 s, so the leader's local log starts well below the last tiered offset."""
    return _tiered_topic(cluster, LOCAL_RETENTION_MS)


@pytest.fixture
def release_cluster(request, tmp_path):
    """A tiered cluster of its own on the release named by the test's parameter (pinned)."""
    from kipcheck.harness.backends.kafka_dist import resolve
    from kipcheck.harness.pytest_plugin import _start
    c = _start(resolve(request.param), tmp_path / "cluster", 3)
    yield c
    c.down()


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


@pytest.mark.parametrize("release_cluster", [WITHOUT_TEST_JARS], indirect=True)
def test_remote_storage_serves_reads_after_local_retention(release_cluster, history):
    """Segments really go to kipcheck's remote storage manager and come back from it: with
    local retention of 1 s the leader's local log soon starts above 0, yet a consumer reading
    from offset 0 gets every record up to the last tiered offset, in order."""
    cluster = release_cluster
    assert cluster.dist.version == WITHOUT_TEST_JARS
    assert not [p.name for p in cluster.dist.classpath if p.name.endswith("-test.jar")]
    topic = _tiered_topic(cluster, local_retention_ms=1000)
    key = (topic, 0)
    traffic = Traffic(cluster.bootstrap_servers(), topic, partitions=1)
    traffic.start()
    prober = Prober(cluster.bootstrap_servers(), [topic], history, threading.Event())
    try:
        offsets = _tiered_offsets(prober, key, local_deleted=True)
    finally:
        prober.close()
        traffic.stop()
    assert 0 < offsets[-4] and offsets[-5] >= 0, offsets
    # every uploaded segment is in the directory the brokers share, each with its indexes
    segments = sorted((cluster.root / "remote-storage").glob(f"{topic}-0-*/*.log"))
    assert segments, "no segment in the shared remote storage directory"
    for log in segments:
        for suffix in (".index", ".timeindex", ".snapshot", ".leader-epoch-checkpoint"):
            assert log.with_suffix(suffix).exists(), f"{log.name} without its {suffix}"
    assert not list((cluster.root / "remote-storage").rglob("*.tmp-*")), "a temporary file left behind"

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": f"rb-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    read = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while (not read or read[-1][0] < offsets[-5]) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            read.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    assert read and read[-1][0] >= offsets[-5], f"read {len(read)} records, last tiered offset {offsets[-5]}"
    got = [o for o, _ in read]
    assert got == list(range(len(got))), "the remote read skipped or repeated offsets"
    # each value is the one acknowledged at its offset; offset 0's is long gone from every local log
    wrong = [(o, v, traffic.acknowledged.get((0, o))) for o, v in read if v != traffic.acknowledged.get((0, o))]
    assert not wrong, f"{len(wrong)} reads returned another value than acknowledged, first (offset, read, acked): {wrong[0]}"
