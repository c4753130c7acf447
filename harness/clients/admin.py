"""A thin Admin API wrapper (confluent-kafka) for readiness checks, topics and elections."""
from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from kipcheck.faults.targets import kafka_uuid_string
from kipcheck.harness.errors import HarnessError


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class Admin:
    def __init__(self, bootstrap: str, timeout: float = 10.0):
        self.timeout = timeout
        self.client = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000),
                                   "logger": quiet_logger()})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def broker_ids(self) -> list[int]:
        """Registered (unfenced) brokers, from a Metadata request.

        Not the admin DescribeCluster call: against Kafka 3.3.2 during start-up, librdkafka
        2.16's admin response parser aborts the process (`rd_kafka_admin_response_parse:
        Assertion rko_result failed`, seen in a run); plain Metadata takes another path."""
        return sorted(self.client.list_topics(timeout=self.timeout).brokers)

    def wait_brokers(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                ids = self.broker_ids()
                if len(ids) >= count:
                    return
                last = f"{len(ids)} of {count} brokers registered"
            except KafkaException as e:
                last = str(e)
            time.sleep(0.5)
        raise HarnessError(f"cluster not ready within {timeout:.0f} s: {last}")

    def create_topic(self, topic: str, partitions: int, replication_factor: int, config: dict | None = None,
                     assignment: list[list[int]] | None = None) -> None:
        """Create `topic` (already there: fine); `assignment` places each partition's replicas, in
        order (the first is the preferred leader), instead of `partitions` x `replication_factor`."""
        # librdkafka wants the partition count beside an assignment (and refuses a replication factor)
        new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=config or {}) if assignment else \
            NewTopic(topic, partitions, replication_factor, config=config or {})
        for attempt in (1, 2):
            fut = self.client.create_topics([new], request_timeout=self.timeout)[topic]
            try:
                fut.result(timeout=self.timeout + 5)
                return
            except KafkaException as e:
                if e.args[0].code() == KafkaError._DESTROY_BROKER and attempt == 1:
                    # librdkafka drops the bootstrap broker's handle once it learns the real
                    # brokers, failing a request in flight on it ("Broker handle destroyed
                    # without termination", seen starting Kafka 3.6.2): nothing was decided, ask again
                    continue
                if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                    raise HarnessError(f"cannot create topic {topic}: {e.args[0].str()}") from e
                return

    def partitions(self, topic: str) -> list[PartitionView]:
        fut = self.client.describe_topics(TopicCollection([topic]), request_timeout=self.timeout)[topic]
        desc = fut.result(timeout=self.timeout + 5)
        return [PartitionView(topic, p.id, p.leader.id if p.leader else -1,
                              tuple(r.id for r in p.replicas), tuple(r.id for r in p.isr))
                for p in desc.partitions]

    def topic_id(self, topic: str) -> str:
        """The topic's id as Kafka's Uuid.toString writes it (the share coordinators' keys hold it)."""
        fut = self.client.describe_topics(TopicCollection([topic]), request_timeout=self.timeout)[topic]
        uuid = fut.result(timeout=self.timeout + 5).topic_id
        return kafka_uuid_string(uuid.get_most_significant_bits(), uuid.get_least_significant_bits())

    def leader(self, topic: str, partition: int) -> int:
        for p in self.partitions(topic):
            if p.partition == partition:
                return p.leader
        raise HarnessError(f"{topic}-{partition} does not exist")

    def wait_full_isr(self, topic: str, timeout: float) -> list[PartitionView]:
        """Wait until every partition has a leader and all its replicas in sync."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            try:
                parts = self.partitions(topic)
                if parts and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts):
                    return parts
                last = "; ".join(f"p{p.partition} leader={p.leader} isr={list(p.isr)}" for p in parts)
            except KafkaException as e:
                last = str(e.args[0].str() if e.args else e)
            time.sleep(0.5)
        raise HarnessError(f"{topic} has no full ISR within {timeout:.0f} s ({last})")


def answered_partitions(endpoint: str, topic: str) -> list[PartitionView]:
    """`topic`'s partitions as the broker at `endpoint` itself answers Metadata, asked over the
    wire: an admin client sends its request to any broker it has learnt of."""
    from kipcheck.harness.clients.wire import BrokerConnection, metadata
    with BrokerConnection(endpoint, timeout=5) as conn:
        view = metadata(conn, [topic])
    return [PartitionView(topic, p.partition, p.leader if p.error == "NONE" else -1, tuple(p.replicas), tuple(p.isr))
            for (t, _), p in sorted(view.partitions.items()) if t == topic]


def wait_known_by_each(endpoints: list[str], topic: str, timeout: float) -> None:
    """Wait until each broker itself answers Metadata for `topic` with leaders and full ISRs.

    Each broker learns a new topic from its own replay of the metadata log, so one broker's
    answer says nothing of another's."""
    deadline = time.monotonic() + timeout
    pending, last = list(endpoints), "no answer"
    while pending and time.monotonic() < deadline:
        try:
            parts = answered_partitions(pending[0], topic)
            if parts and all(p.leader >= 0 and set(p.isr) == set(p.replicas) for p in parts):
                pending.pop(0)
                continue
            last = f"{pending[0]}: {[(p.partition, p.leader, list(p.isr)) for p in parts] or 'no partitions'}"
        except OSError as e:
            last = f"{pending[0]}: {e}"
        time.sleep(0.2)
    if pending:
        raise HarnessError(f"{topic} not known with full ISR by every broker within {timeout:.0f} s ({last})")


def wait_group_coordinator(bootstrap: str, group: str, topic: str, timeout: float) -> bool:
    """Wait until `group`'s coordinator answers an OffsetFetch (True), at most `timeout` s (False).

    The first group of a cluster makes it create __consumer_offsets and load the group's
    partition: on a loaded machine that took 11 s of a 40 s run before any member could join.
    Done before the workload's clock starts, so the run's churn begins on a ready coordinator.
    A plain consumer asks (no subscription: it joins nothing)."""
    from confluent_kafka import Consumer, TopicPartition
    deadline = time.monotonic() + timeout
    asker = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                      "logger": quiet_logger()})
    try:
        while time.monotonic() < deadline:
            try:
                answer = asker.committed([TopicPartition(topic, 0)], timeout=max(1.0, min(5.0, deadline - time.monotonic())))
            except KafkaException:
                answer = None
            if answer is not None and all(tp.error is None for tp in answer):
                return True
            time.sleep(0.2)
        return False
    finally:
        asker.close()


def quiet_logger():
    """librdkafka logs every refused connection; faults make many. Keep them out of the terminal."""
    import logging
    log = logging.getLogger("kipcheck.librdkafka")
    log.propagate = False
    log.addHandler(logging.NullHandler())
    return log
