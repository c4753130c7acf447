"""Client workloads: producers of unique values and rack-aware consumers, recorded as history.

Each worker is a thread that behaves like one Jepsen process at a time: one
operation in flight, and after an indeterminate (`info`) outcome it continues
under a new process id. Sends are synchronous for that reason.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from harness.admin import _quiet_logger
from harness.history import History

# Delivery errors after which the record was certainly not written. Anything else
# (timeouts, lost connections, NOT_LEADER after the request left) is indeterminate.
DEFINITE_SEND_ERRORS = {
    KafkaError._QUEUE_FULL, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS, KafkaError.RECORD_LIST_TOO_LARGE,
}


@dataclass(frozen=True)
class WorkloadOptions:
    topic: str = "kipcheck"
    partitions: int = 3
    producers: int = 2
    acks: str = "all"
    idempotence: bool = True
    # (acks, idempotence) per producer, cycled; empty: every producer uses `acks`/`idempotence`.
    # acks=1 may lose acknowledged writes on failover and non-idempotent retries may duplicate:
    # real Kafka behaviour that the checker then reports as lost-write / duplicate.
    producer_modes: tuple[tuple[str, bool], ...] = ()
    consumers: int = 1
    consumer_rack: str | None = None  # KIP-392: a follower's rack makes the consumer read from it
    consumer_modes: tuple[str, ...] = ("assign",)  # "assign" or "subscribe" (one shared group), cycled
    rackless_consumers: int = 0  # the last N consumers send no client.rack (they read from leaders)
    send_timeout: float = 10.0
    poll_batch: int = 500

    def producer_mode(self, seq: int) -> tuple[str, bool]:
        modes = self.producer_modes or ((self.acks, self.idempotence),)
        acks, idempotence = modes[seq % len(modes)]
        return str(acks), bool(idempotence)

    def consumer_mode(self, seq: int) -> str:
        return self.consumer_modes[seq % len(self.consumer_modes)] if self.consumer_modes else "assign"

    def consumer_has_rack(self, seq: int) -> bool:
        return seq < self.consumers - self.rackless_consumers


class Worker(threading.Thread):
    """A stoppable workload thread; exceptions are kept to be re-raised by the run."""

    def __init__(self, name: str, history: History, stop: threading.Event):
        super().__init__(name=name, daemon=True)
        self.history, self.stop_event = history, stop
        self.error: BaseException | None = None

    def run(self):
        try:
            self.work()
        except BaseException as e:  # reported by the run, with the history kept
            self.error = e

    def work(self):
        raise NotImplementedError


class ProducerWorker(Worker):
    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event, seq: int):
        super().__init__(f"producer-{seq}", history, stop)
        self.options = options
        self.acks, self.idempotence = options.producer_mode(seq)
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "acks": self.acks, "enable.idempotence": self.idempotence,
            "delivery.timeout.ms": int(options.send_timeout * 1000), "request.timeout.ms": 5000,
            "linger.ms": 0, "logger": _quiet_logger(),
        })
        self.sent = 0

    def work(self):
        process = self.history.new_process()
        n = 0
        while not self.stop_event.is_set():
            partition = n % self.options.partitions
            value = f"{process}-{n}"
            n += 1
            outcome = self.send(process, partition, value)
            if outcome == "info":
                process = self.history.new_process()
        self.producer.flush(self.options.send_timeout)

    def send(self, process: int, partition: int, value: str) -> str:
        op = self.history.invoke(process, "send", {"topic": self.options.topic, "partition": partition,
                                                   "key": value, "value": value, "acks": self.acks,
                                                   "idempotent": self.idempotence})
        result: dict = {}

        def delivered(err, msg):
            result["err"], result["offset"] = err, (msg.offset() if err is None else None)

        try:
            self.producer.produce(self.options.topic, value=value.encode(), key=value.encode(),
                                  partition=partition, on_delivery=delivered)
        except BufferError:
            op.fail(error="_QUEUE_FULL")
            return "fail"
        deadline = time.monotonic() + self.options.send_timeout + 5
        while "err" not in result and time.monotonic() < deadline:
            self.producer.poll(0.05)
        if "err" not in result:
            op.info(error="no delivery report")
            return "info"
        err = result["err"]
        if err is None:
            op.ok(offset=result["offset"])
            self.sent += 1
            return "ok"
        if err.code() in DEFINITE_SEND_ERRORS:
            op.fail(error=err.name())
            return "fail"
        op.info(error=err.name())
        return "info"


class ConsumerWorker(Worker):
    """Polls until stopped, after either assigning every partition from the beginning or
    subscribing with the run's shared group (`options.consumer_mode(seq)`).

    A subscriber's rebalance happens inside a poll: its new assignment is recorded as an
    `assign` (with `"rebalance": true`) between that poll's invoke and completion, so the
    checker restarts read continuity before the records the poll returns."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event,
                 seq: int, rack: str | None, group: str | None = None):
        super().__init__(f"consumer-{seq}", history, stop)
        self.options = options
        self.mode = options.consumer_mode(seq)
        self.rack = rack if options.consumer_has_rack(seq) else None
        self.group = group or f"kipcheck-subscribers-{options.topic}"
        self.process: int | None = None
        config = {"bootstrap.servers": bootstrap,
                  "group.id": self.group if self.mode == "subscribe" else f"kipcheck-{seq}-{time.time_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
                  "isolation.level": "read_committed", "logger": _quiet_logger(),
                  "topic.metadata.refresh.interval.ms": 2000}
        if self.rack:
            config["client.rack"] = self.rack
        config.update({"statistics.interval.ms": 1000, "stats_cb": self._stats})
        self.consumer = Consumer(config)
        self.read = 0
        self.fetch_sources: dict[int, dict] = {}

    def _stats(self, text: str) -> None:
        """Which broker librdkafka fetches each partition from, against the leader (KIP-392 in action)."""
        try:
            parts = json.loads(text)["topics"][self.options.topic]["partitions"]
        except (ValueError, KeyError):
            return
        for p, v in parts.items():
            if int(p) >= 0 and v.get("broker", -1) >= 0:
                self.fetch_sources[int(p)] = {"leader": v.get("leader"), "fetching_from": v.get("broker"),
                                              "rack": self.rack}

    def assign_all(self, process: int) -> None:
        parts = [TopicPartition(self.options.topic, p, OFFSET_BEGINNING) for p in range(self.options.partitions)]
        op = self.history.invoke(process, "assign", {"partitions": [[self.options.topic, p] for p in
                                                                     range(self.options.partitions)],
                                                     "seek_to_beginning": True})
        self.consumer.assign(parts)
        op.ok()

    def poll_once(self, process: int) -> list:
        op = self.history.invoke(process, "poll", {"topic": self.options.topic})
        msgs = self.consumer.consume(num_messages=self.options.poll_batch, timeout=0.5)
        records = [[m.topic(), m.partition(), m.offset(), m.value().decode()] for m in msgs if m.error() is None]
        op.ok(records=records)
        self.read += len(records)
        return records

    def subscribe(self, process: int) -> None:
        op = self.history.invoke(process, "subscribe", {"topics": [self.options.topic], "group": self.group})
        self.consumer.subscribe([self.options.topic], on_assign=self._assigned)
        op.ok()

    def _assigned(self, consumer, partitions) -> None:
        """Rebalance callback (runs inside a poll): new partitions read from the start."""
        for tp in partitions:
            tp.offset = OFFSET_BEGINNING
        op = self.history.invoke(self.process, "assign", {
            "partitions": [[tp.topic, tp.partition] for tp in partitions], "seek_to_beginning": True,
            "rebalance": True})
        consumer.assign(partitions)
        op.ok()

    def work(self):
        self.process = process = self.history.new_process()
        try:
            if self.mode == "subscribe":
                self.subscribe(process)
            else:
                self.assign_all(process)
            while not self.stop_event.is_set():
                self.poll_once(process)
        finally:
            self.consumer.close()


def final_read(bootstrap: str, options: WorkloadOptions, history: History, timeout: float = 60.0) -> bool:
    """Read every partition from the beginning up to its high watermark (with a new process).

    This is what makes `lost-write` complete: an acknowledged offset below the end of
    the log that no read returned is lost. Returns whether the ends were reached."""
    worker = ConsumerWorker(bootstrap, options, history, threading.Event(), seq=999, rack=None)
    process = history.new_process()
    consumer = worker.consumer
    try:
        ends = {}
        deadline = time.monotonic() + timeout
        for p in range(options.partitions):
            while p not in ends and time.monotonic() < deadline:
                try:
                    ends[p] = consumer.get_watermark_offsets(TopicPartition(options.topic, p), timeout=5)[1]
                except Exception:
                    time.sleep(0.5)
        worker.assign_all(process)
        seen = {p: -1 for p in range(options.partitions)}
        while time.monotonic() < deadline:
            if all(seen[p] + 1 >= ends.get(p, 0) for p in seen):
                return len(ends) == options.partitions
            for _, p, off, _ in worker.poll_once(process):
                seen[p] = max(seen[p], off)
        return False
    finally:
        consumer.close()
