"""Share consumers (KIP-932) in one share group per run, recorded (docs/history.md, "Share groups").

Each worker owns one `confluent_kafka.ShareConsumer` in explicit acknowledgement mode: it polls
(`share_poll`: the records acquired, with their delivery counts and LogAppendTime stamps),
acknowledges every record of the poll with a seeded type (mostly accept, some release, a few
reject), and commits them (`share_ack`, seeded `commit_sync` or `commit_async` whose answer comes
through the acknowledgement commit callback inside a later call). A few polls (seeded) hold their
records past the lock duration first, so locks expire under the checker's eyes.

A client failure (an exception of the client library) ends the client: its open operation
completes, the client is closed and a new one joins as a new process.
"""
from __future__ import annotations

import logging
import random
import secrets
import threading
import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
                                   ResourceType)

from kipcheck.harness.clients import values
from kipcheck.harness.clients.admin import quiet_logger
from kipcheck.harness.clients.client_errors import error_text
from kipcheck.harness.clients.workload import Worker
from kipcheck.harness.clients.workload_options import WorkloadOptions, share_group_name
from kipcheck.rundir.writer import History, Operation

log = logging.getLogger("kipcheck.workload")

ACK_TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE, "reject": AcknowledgeType.REJECT}
#: how long a synchronous acknowledgement commit may take (s)
COMMIT_TIMEOUT_S = 10.0
POLL_TIMEOUT_S = 0.5


def stall_seconds(rng: random.Random, options: WorkloadOptions, counts: list, lock_ms: int) -> float | None:
    """How long a consumer holds a poll's records before acknowledging them (None: it does not stall).
    One draw decides (`share_stall`); with `share_stall_fresh_only` only a poll holding a first delivery
    (count 1) stalls; its length is drawn from `share_stall_ms`, or is one second past the lock."""
    if not (rng.random() < options.share_stall):
        return None
    if options.share_stall_fresh_only and 1 not in counts:
        return None
    return (rng.choice(options.share_stall_ms) if options.share_stall_ms else lock_ms + 1000) / 1000


def start_from_earliest(bootstrap: str, group: str) -> str | None:
    """Set the group's share.auto.offset.reset to earliest (KIP-932: `latest` by default, which
    would skip what the producers wrote before the first fetch). None, or why it failed."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    try:
        for future in admin.incremental_alter_configs([resource], request_timeout=15).values():
            future.result(timeout=20)
    except Exception as e:
        return error_text(e)
    return None


def warm_up(bootstrap: str, topic: str, timeout: float) -> bool:
    """Make the cluster's share coordinators ready before the clock starts: a throwaway share group
    reads one record of a throwaway topic (True once it did, at most `timeout` s). The first share
    group makes the brokers create __share_group_state and load its partitions; a 4.3.1 run whose
    group initialized its share-partitions meanwhile got NotCoordinatorException, and its members
    stayed without partitions for the rest of the 30 s run: Kafka retries such an initialization only
    after `group.share.initialize.retry.interval.ms` (30 s), longer than the run (docs/history.md)."""
    name, group = f"{topic}-share-warmup", share_group_name(f"{topic}-warmup", secrets.token_hex(3))
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    deadline = time.monotonic() + timeout
    try:
        admin.create_topics([NewTopic(name, num_partitions=1)])[name].result(timeout=30)
    except Exception as e:
        if "TOPIC_ALREADY_EXISTS" not in error_text(e):
            log.warning("share warm-up: cannot create %s: %s", name, error_text(e))
            return False
    producer = Producer({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    producer.produce(name, value=b"warm-up")
    producer.flush(10)
    start_from_earliest(bootstrap, group)
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "logger": quiet_logger()})
    try:
        consumer.subscribe([name])
        while time.monotonic() < deadline:
            if any(m.error() is None for m in consumer.poll(timeout=1.0) or ()):
                return True
        return False
    finally:
        consumer.close()
        try:
            admin.delete_topics([name])[name].result(timeout=30)
        except Exception as e:
            log.info("share warm-up: %s not deleted: %s", name, error_text(e))


def broker_settings(bootstrap: str, lock_ms: int, limit: int) -> tuple[int, int]:
    """The lock duration and delivery-count limit a broker runs with (DescribeConfigs), so the
    history records the bounds the cluster has, not the ones asked for (a shared cluster, an
    external one); `lock_ms`, `limit` when it does not say."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": quiet_logger()})
    try:
        broker = next(iter(admin.list_topics(timeout=10).brokers))
        resource = ConfigResource(ResourceType.BROKER, str(broker))
        entries = admin.describe_configs([resource], request_timeout=10)[resource].result(timeout=15)
        return (int(entries["group.share.record.lock.duration.ms"].value),
                int(entries["group.share.delivery.count.limit"].value))
    except Exception as e:
        log.warning("share settings of the brokers unknown (%s): recording the asked ones", error_text(e))
        return lock_ms, limit


class _Crashed(Exception):
    """The share consumer failed; its operation is recorded."""


class ShareConsumerWorker(Worker):
    """One share consumer at a time, polling and acknowledging until stopped."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event,
                 seq: int, group: str):
        """The lock duration and limit recorded are the options' until the service sets the brokers'
        own (`broker_settings`) before it starts the worker."""
        super().__init__(f"share-consumer-{seq}", history, stop)
        self.options, self.group = options, group
        self.lock_ms, self.limit = options.share_lock_ms, options.share_delivery_limit
        self.config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
                       "logger": quiet_logger()}
        self._choice = random.Random(f"share-{seq}")  # ack types, sync/async, stalls
        self.consumer = None
        # the group's share.auto.offset.reset as the service set it (None: not known): the checker judges
        # lost records only from where the group starts (checks/rules/share_rules.py)
        self.offset_reset: str | None = None
        self.process: int | None = None
        self.async_process: int | None = None  # the client's asynchronous acknowledgements' process
        self.read = 0
        self.pending: list[list] = []  # the async ack open: [op, {(topic, partition): {offsets}}, {"t/p": error}]
        self._in_sync = False

    # --- one client ------------------------------------------------------------------------

    def _open(self) -> None:
        self.process = self.history.new_process()
        op = self.history.invoke(self.process, "share_subscribe", {
            "group": self.group, "topics": [self.options.topic], "offset_reset": self.offset_reset})
        try:
            self.consumer = ShareConsumer(self.config)
            self.consumer.set_acknowledgement_commit_callback(self._answered)
            self.consumer.subscribe([self.options.topic])
        except Exception as e:
            op.fail(error=error_text(e))
            raise _Crashed(error_text(e)) from e
        op.ok()

    def _poll(self) -> list:
        op = self.history.invoke(self.process, "share_poll", {
            "group": self.group, "lock_duration_ms": self.lock_ms, "delivery_count_limit": self.limit})
        try:
            msgs = self.consumer.poll(timeout=POLL_TIMEOUT_S)
        except Exception as e:
            op.fail(error=error_text(e))
            raise _Crashed(error_text(e)) from e
        got, records, counts, stamps, errors = [], [], [], [], []
        offset = self.history.wall_minus_history_ms()
        for m in msgs or ():
            if m.error() is not None:
                errors.append(error_text(m.error()))
                continue
            got.append(m)
            records.append([m.topic(), m.partition(), m.offset(), values.text(m.value())])
            counts.append(m.delivery_count())
            kind, unix_ms = m.timestamp()
            stamps.append(self.history.since_start_ms(unix_ms, offset) if kind == TIMESTAMP_LOG_APPEND_TIME else None)
        stamped = ({"append_ms": stamps, "wall_minus_history_ms": round(offset)}
                   if any(s is not None for s in stamps) else {})
        op.ok(records=records, delivery_counts=counts, **stamped, **({"errors": errors[:5]} if errors else {}))
        self.read += len(records)
        return got

    def _acknowledge(self, msgs: list) -> None:
        """Acknowledge every record of a poll with a seeded type, then commit (sync or async)."""
        stall = stall_seconds(self._choice, self.options, [m.delivery_count() for m in msgs], self.lock_ms)
        stalled = stall is not None
        if stalled:  # hold the records (past their lock by default: the broker makes them available again)
            self.stop_event.wait(stall)
        acks = []
        for m in msgs:
            kind = self._choice.choices(list(ACK_TYPES), weights=self.options.share_ack_weights)[0]
            try:
                self.consumer.acknowledge(m, ACK_TYPES[kind])
            except Exception as e:  # no longer in flight: not acknowledged (the next poll tells)
                log.info("%s: acknowledge refused: %s", self.name, error_text(e))
                continue
            acks.append([m.topic(), m.partition(), m.offset(), kind])
        if not acks:
            return
        mode = "async" if self._choice.random() < 0.3 else "sync"
        if mode == "async" and self.pending:  # its lane has one open at most (a process: one operation at a time)
            mode = "sync"
        if mode == "async" and self.async_process is None:
            self.async_process = self.history.new_process()
        # an async acknowledgement is answered inside a later call of the client, maybe a sync commit: it is
        # recorded under the client's second process, naming the consumer's (docs/history.md, "Share groups")
        process, lane = (self.async_process, {"consumer": self.process}) if mode == "async" else (self.process, {})
        op = self.history.invoke(process, "share_ack", {"group": self.group, "mode": mode, "acks": acks, **lane,
                                                        **({"stalled": True} if stalled else {})})
        if mode == "async":
            asked: dict = {}
            for t, p, o, _ in acks:
                asked.setdefault((t, p), set()).add(o)
            self.pending.append([op, asked, {}])
            try:
                self.consumer.commit_async()
            except Exception as e:
                self.pending.pop()
                op.info(error=error_text(e))
                raise _Crashed(error_text(e)) from e
            return
        self._in_sync = True
        try:
            answer = self.consumer.commit_sync(timeout=COMMIT_TIMEOUT_S)
        except Exception as e:
            op.info(error=error_text(e))
            raise _Crashed(error_text(e)) from e
        finally:
            self._in_sync = False
        refused = {f"{tp.topic}/{tp.partition}": error_text(err).split(":", 1)[0]
                   for tp, err in (answer or {}).items() if err is not None}
        op.ok(**({"partition_errors": refused} if refused else {}))

    def _answered(self, offsets, exception) -> None:
        """The acknowledgement commit callback (inside a poll or commit): completes the async
        acks whose offsets it answers; answers no pending ack matches are a sync commit's own."""
        err = error_text(exception).split(":", 1)[0] if exception is not None else None
        for tp, answered in (offsets or {}).items():
            key = (tp.topic, tp.partition)
            answered = set(answered or ())
            entry = next((e for e in self.pending if key in e[1] and answered <= e[1][key]), None)
            if entry is None or not answered:
                continue
            del entry[1][key]
            if err is not None:
                entry[2][f"{tp.topic}/{tp.partition}"] = err
            if not entry[1]:
                self.pending.remove(entry)
                entry[0].ok(**({"partition_errors": entry[2]} if entry[2] else {}))

    def _close(self, reason: str) -> None:
        if self.consumer is not None:
            try:
                self.consumer.close()
            except Exception:
                log.info("%s: close failed", self.name, exc_info=True)
        for op, _, refused in self.pending:  # no answer came: the acks may or may not have been applied
            op.info(error=reason, **({"partition_errors": refused} if refused else {}))
        self.pending, self.consumer, self.async_process = [], None, None

    # --- the loop --------------------------------------------------------------------------

    def work(self):
        consecutive = 0
        while not self.stop_event.is_set():
            read_before = self.read
            try:
                self._open()
                while not self.stop_event.is_set():
                    msgs = self._poll()
                    if msgs:
                        self._acknowledge(msgs)
            except _Crashed as crash:
                log.warning("%s: client replaced after %s", self.name, crash)
                consecutive = 0 if self.read > read_before else consecutive + 1
                self.crashes += 1
                self._close(f"client replaced after {crash}")
                self._backoff(consecutive)
        self._close("no acknowledgement answer before the client closed")
