"""What the fault tests observe from outside the cluster: ISR and leaders as other brokers see them, produce latency."""
from __future__ import annotations

import contextlib
import json
import os
import time
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kipcheck.harness.clients.admin import Admin, PartitionView, quiet_logger, answered_partitions


@contextlib.contextmanager
def native_cluster(kafka_dist, root, **options):
    """A module's own cluster (`ClusterOptions(**options)`): up for the block, down after."""
    from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
    c = NativeCluster(kafka_dist, root, ClusterOptions(**options), owner_pid=os.getpid())
    try:
        c.up()
        yield c
    finally:
        c.down()


def new_topic(cluster, prefix: str, partitions: int, config: dict, timeout: float = 180) -> str:
    """A fresh topic of replication factor 3 with these settings, its ISR full.

    Asked again while the cluster times the request out: a module's cluster may still be
    recovering from the previous test's fault (seen in CI: CreateTopics timed out right after the
    clock-skew test, whose heal moves a broker's wall clock back 120 s). Creating a topic that
    exists is fine, so asking again is safe."""
    from kipcheck.harness.errors import HarnessError
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = Admin(cluster.bootstrap_servers())
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.create_topic(name, partitions, 3, config=config)
            break
        except HarnessError as e:
            if "Timed out" not in str(e) or time.monotonic() > deadline:
                raise
    admin.wait_full_isr(name, 60)
    return name


def wait_for(cond, timeout: float, what: str, poll: float = 0.5):
    """Poll `cond` until it returns something truthy; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except Exception as e:  # an admin call during a fault may time out; ask again
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(poll)
    raise AssertionError(f"not within {timeout:.0f} s: {what} (last: {last!r})")


def partition_seen_by(cluster, topic: str, partition: int, exclude=()):
    """The partition as brokers outside `exclude` report it (an isolated broker's own view is stale)."""
    bootstrap = ",".join(n.spec.client_endpoint for n in cluster.brokers if n.spec.node_id not in exclude)
    return next(p for p in Admin(bootstrap).partitions(topic) if p.partition == partition)


def partition_answered_by(cluster, topic: str, partition: int, node_id: int) -> PartitionView:
    """The partition as one broker's own Metadata answer shows it (`answered_partitions`)."""
    return next(p for p in answered_partitions(cluster.node(node_id).spec.client_endpoint, topic)
                if p.partition == partition)


def produce(cluster, topic: str, count: int, partition: int = 0, size: int = 100, prefix: str = "v") -> list[float]:
    """acks=all sends, one at a time; returns each send's latency in seconds."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "linger.ms": 0,
                  "message.timeout.ms": 60000, "logger": quiet_logger()})
    latencies, errors = [], []
    pad = "x" * max(0, size - 12)
    for i in range(count):
        t0 = time.monotonic()
        p.produce(topic, value=f"{prefix}{i}:{pad}".encode(), partition=partition,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        p.flush(60)
        latencies.append(time.monotonic() - t0)
    assert not errors, errors[:3]
    return latencies


def _send_bulk(cluster, topic: str, count: int, partition: int, size: int, acks: str,
               timeout: float) -> tuple[int, list]:
    """Send `count` records of about `size` bytes; return (still undelivered after `timeout`, errors)."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": acks, "linger.ms": 20,
                  "message.timeout.ms": int(timeout * 1000), "logger": quiet_logger()})
    errors = []
    payload = b"x" * size
    for i in range(count):
        p.produce(topic, value=b"%d:" % i + payload, partition=partition,
                  on_delivery=lambda err, msg: errors.append(err) if err else None)
        if i % 1000 == 0:
            p.poll(0)
    return p.flush(timeout + 5), errors


def produce_bulk(cluster, topic: str, count: int, partition: int = 0, size: int = 1000) -> None:
    """acks=all sends, many in flight; each must be acknowledged."""
    undelivered, errors = _send_bulk(cluster, topic, count, partition, size, "all", 120)
    assert undelivered == 0 and not errors, errors[:3]


def produce_during_fault(cluster, topic: str, count: int, partition: int = 0, timeout: float = 15) -> int:
    """acks=1 writes that move a partition's log end on, whoever answers; returns how many were acknowledged.

    During a cut, acks=all can wait on a leader that is already fenced but does not know it yet:
    it keeps an ISR it cannot shrink, so the send never completes. acks=1 answers at once."""
    undelivered, errors = _send_bulk(cluster, topic, count, partition, 1000, "1", timeout)
    return count - undelivered - len(errors)


def read_all(cluster, topic: str, partition: int = 0, timeout: float = 60) -> list[bytes]:
    """Every value of the partition from the beginning up to its current end."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": f"kipcheck-read-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "logger": quiet_logger()})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        values, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(500, timeout=1):
                if not m.error():
                    values.append(m.value())
                    if m.offset() >= high - 1:
                        return values
            if high == 0:
                return values
        raise AssertionError(f"read {len(values)} of {high} records of {topic}-{partition} in {timeout:.0f} s")
    finally:
        c.close()


def full_isr(cluster, topic: str, partition: int = 0):
    p = partition_seen_by(cluster, topic, partition)
    return p if p.leader >= 0 and set(p.isr) == set(p.replicas) else None


def wait_partition(cluster, topic: str, pred, timeout: float, what: str, partition: int = 0, exclude=()):
    """Wait until partition `partition` as seen by brokers outside `exclude` satisfies `pred`; return that view."""
    def seen():
        p = partition_seen_by(cluster, topic, partition, exclude)
        return p if pred(p) else None
    return wait_for(seen, timeout, what)


def history_records(history) -> list[dict]:
    """The records of a history the workload is still writing: flushed, and only whole lines (a
    worker thread may be half-way through the last one when the file is read)."""
    history.flush()
    text = history.path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line]
