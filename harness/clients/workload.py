"""Client workloads: pipelined producers of unique values and consumers in several modes,
recorded as history (docs/history.md).

Jepsen's process rule holds per *logical* process: a producer worker owns one Kafka
producer shared by `in_flight` slots, each slot a process with at most one send
outstanding; after an indeterminate (`info`) outcome the slot continues under a new
process id. A consumer worker is one process at a time.

Client failures are history, not harness errors: a fatal client error (a fatal
KafkaError such as PRODUCER_FENCED or OUT_OF_ORDER_SEQUENCE_NUMBER, or any exception
from the client library) is recorded on the operation it ended with
`"error": "<name>: <message>", "fatal": true`, the client is closed and replaced under
new process ids, and the worker goes on. Only a failure to write the history ends it.
"""
from __future__ import annotations

import functools
import json
import logging
import random
import threading
import time
import warnings
from collections import deque

from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_LOG_APPEND_TIME, Consumer, KafkaError, KafkaException,
                             Producer, TopicPartition)

from kipcheck.harness.clients import values
from kipcheck.harness.clients.client_errors import error_text
from kipcheck.harness.clients.commits import Committer
from kipcheck.harness.clients.admin import quiet_logger
from kipcheck.harness.clients.workload_options import PRODUCER_REQUEST_TIMEOUT_MS, WorkloadOptions  # noqa: F401 (imported from here too)
from kipcheck.rundir.records import INVOKE
from kipcheck.rundir.writer import History, Operation

log = logging.getLogger("kipcheck.workload")
logging.getLogger("kipcheck").addHandler(logging.NullHandler())  # tracebacks go to the run's log, not the terminal

# Delivery errors after which the record was certainly not written. Anything else
# (timeouts, lost connections, NOT_LEADER after the request left, a purge of an
# in-flight request) is indeterminate.
DEFINITE_SEND_ERRORS = {
    KafkaError._QUEUE_FULL, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC,
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS, KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError._PURGE_QUEUE,  # purged before it was ever sent
}
# After the stop: how long the sends still open may take to be acknowledged before they
# are purged (`info`); well under the run's 30 s join, even while a fault is still on.
STOP_WAIT = 5.0
# How long a produce refused with `_FATAL` waits for the error callback that names the cause
# (CI 2026-11-29: the refusal came before the callback was served and `_FATAL` was recorded).
FATAL_CAUSE_WAIT = 1.0


def _is_fatal(error: BaseException) -> bool:
    """A client-library exception that leaves the client unusable (anything but a non-fatal KafkaError)."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        return error.args[0].fatal() or error.args[0].code() == KafkaError._FATAL
    return True


class Worker(threading.Thread):
    """A stoppable workload thread. Client failures are recorded in the history and the
    worker carries on; `error` keeps only what ends it (a history that cannot be written,
    a harness bug), for the run to report."""

    def __init__(self, name: str, history: History, stop: threading.Event):
        super().__init__(name=name, daemon=True)
        self.history, self.stop_event = history, stop
        self.error: BaseException | None = None
        self.crashes = 0  # clients replaced after a fatal error

    def run(self):
        try:
            self.work()
        except BaseException as e:  # reported by the run, with the history kept
            log.error("%s failed", self.name, exc_info=True)
            self.error = e

    def work(self):
        raise NotImplementedError

    def _backoff(self, consecutive: int) -> None:
        """Wait before replacing a client again: a client that crashes at once must not spin."""
        self.stop_event.wait(min(5.0, 0.1 * 2 ** max(0, consecutive - 1)))


class _Slot:
    """One logical process of a producer: at most one send outstanding."""
    __slots__ = ("process", "n", "op")

    def __init__(self, process: int):
        self.process, self.n, self.op = process, 0, None


class _Pacer:
    """A token bucket: `take()` says whether a send may start now; `wait()` how long until one may."""

    def __init__(self, rate: float):
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()

    def take(self) -> bool:
        if not self.interval:
            return True
        now = time.monotonic()
        if now < self.next:
            return False
        self.next = max(self.next, now - 0.05) + self.interval  # at most 50 ms of catching up
        return True

    def wait(self) -> float:
        return max(0.0, self.next - time.monotonic())


class ProducerWorker(Worker):
    """One Kafka producer, `options.in_flight` slots sending through it concurrently."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event, seq: int):
        super().__init__(f"producer-{seq}", history, stop)
        self.options = options
        self.acks, self.idempotence = options.producer_mode(seq)
        self.config = {
            "bootstrap.servers": bootstrap, "acks": self.acks, "enable.idempotence": self.idempotence,
            "delivery.timeout.ms": int(options.send_timeout * 1000), "request.timeout.ms": PRODUCER_REQUEST_TIMEOUT_MS,
            "linger.ms": options.linger_ms, "compression.type": options.producer_compression(seq),
            "max.in.flight.requests.per.connection": max(1, min(5, options.max_in_flight_requests)),
            "logger": quiet_logger(), "error_cb": self._client_error,
        }
        if options.transactional_id:
            self.config["transactional.id"] = options.transactional_id
        self.producer = None
        self.producer = self._open()
        self.rate = options.rate / max(1, options.producers)
        self.slots: list[_Slot] = []
        self._free: deque[_Slot] = deque()
        self.sent = self._sent_at_open = 0
        self._crash: str | None = None  # the fatal error of the current client, once known
        self._crash_recorded = False  # an operation carries it (`"fatal": true`, once per client)
        self._done: list[tuple[_Slot, Operation, str, dict]] = []  # completions not yet recorded

    def _open(self) -> Producer:
        producer = Producer(self.config)
        if self.options.transactional_id:
            try:
                producer.init_transactions(self.options.send_timeout)
                producer.begin_transaction()
            except BaseException:
                producer.close()  # left open, its pending InitProducerId would fence the next one
                raise
        return producer

    def _client_error(self, err: KafkaError) -> None:
        """librdkafka's error callback (served inside poll, on this thread)."""
        if err.fatal() and self._crash is None:
            self._crash = error_text(err)

    def _await_fatal_cause(self, timeout: float = FATAL_CAUSE_WAIT) -> None:
        """A produce refused with librdkafka's generic `_FATAL` says only that the client is
        broken; the cause (PRODUCER_FENCED, ...) reaches the error callback, queued by the same
        step that set the fatal state (a transactional producer's poll raises it instead).
        Serve it, within a bound, so the history names the cause."""
        deadline = time.monotonic() + timeout
        while self._crash is None and time.monotonic() < deadline:
            try:
                self.producer.poll(0.05)
            except Exception as e:
                self._crash = error_text(e)
            self._record_done()

    # --- one send -----------------------------------------------------------------------

    def _issue(self, slot: _Slot, partition: int) -> bool:
        """Invoke and enqueue the slot's next send; False when it completed at once (not enqueued)."""
        return self._issue_round([slot], partition)

    def _issue_round(self, slots: list[_Slot], n: int) -> bool:
        """Invoke the slots' next sends (partitions round-robin from `n`), then hand each to the
        client; False when one completed at once (not enqueued). The invokes are one
        `append_batch`, stamped before the first send is handed over: a lock and a clock read
        for all of them. Every invoked send is then tried, even after a refusal."""
        history, topic, partitions = self.history, self.options.topic, self.options.partitions
        entries = []
        for slot in slots:
            value = f"{slot.process}-{slot.n}"
            slot.n += 1
            entries.append((slot.process, INVOKE, "send", {
                "topic": topic, "partition": n % partitions, "key": value, "value": value,
                "acks": self.acks, "idempotent": self.idempotence, "producer": self.name}))
            n += 1
        history.append_batch(entries)
        enqueued = True
        for slot, (process, _, f, value) in zip(slots, entries):
            slot.op = Operation(history, process, f, value)
            encoded = value["value"].encode()
            try:
                self.producer.produce(topic, value=encoded, key=encoded, partition=value["partition"],
                                      on_delivery=functools.partial(self._delivered, slot))
                continue
            except BufferError:
                self._complete(slot, "fail", {"error": "_QUEUE_FULL"})
            except Exception as e:  # not enqueued: certainly not written
                if _is_fatal(e):
                    self._await_fatal_cause()
                    self._crash = self._crash or error_text(e)
                    log.info("%s: produce failed", self.name, exc_info=True)
                kafka_error = e.args[0] if isinstance(e, KafkaException) and e.args else None
                self._complete(slot, "fail", {"error": kafka_error.name() if isinstance(kafka_error, KafkaError)
                                              else type(e).__name__})
            self._record_done()
            enqueued = False
        return enqueued

    def _delivered(self, slot: _Slot, err, msg) -> None:
        """Delivery report callback (served inside poll, on this thread)."""
        if slot.op is None:  # already completed (a replaced client's late report)
            return
        if err is None:
            self.sent += 1
            self._complete(slot, "ok", {"offset": msg.offset()})
            return
        if err.fatal():
            self._crash = self._crash or error_text(err)
        self._complete(slot, "fail" if err.code() in DEFINITE_SEND_ERRORS else "info", {"error": err.name()})

    def _complete(self, slot: _Slot, type_: str, extra: dict) -> None:
        """End the slot's send: its completion waits in `_done` for `_record_done` (the first
        completion after a fatal error carries it, once per client, decided here, in the order
        the outcomes were learnt)."""
        if self._crash is not None and not self._crash_recorded:
            extra = {**extra, "error": self._crash, "fatal": True}
            self._crash_recorded = True
        self._done.append((slot, slot.op, type_, extra))
        slot.op = None

    def _record_done(self) -> None:
        """Record the completions learnt so far (one poll's delivery reports, typically
        hundreds) in one `append_batch`, then free their slots: one lock and one clock read
        for all of them, and every completion's time is after its report was served. A slot
        is reused only once its completion is recorded; after `info` it is a new process."""
        done = self._done
        if not done:
            return
        self._done = []
        self.history.append_batch([op.completion(type_, extra) for _, op, type_, extra in done])
        free = self._free
        for slot, _, type_, _ in done:
            if type_ == "info":
                slot.process, slot.n = self.history.new_process(), 0
            free.append(slot)

    # --- the loop -----------------------------------------------------------------------

    def work(self):
        self._new_slots()
        pacer, n, consecutive = _Pacer(self.rate), 0, 0
        while not self.stop_event.is_set():
            if self._crash is not None:
                consecutive = consecutive + 1 if self.sent == self._sent_at_open else 1
                self._replace()
                self._backoff(consecutive)
                continue
            batch = []
            while self._free and pacer.take():
                batch.append(self._free.popleft())
            refused = bool(batch) and not self._issue_round(batch, n)  # then wait a little rather than spin
            n += len(batch)
            try:
                self.producer.poll(0.01 if refused else min(0.1, pacer.wait()) if self._free else 0.1)
            except Exception as e:  # a callback or the client failed: the client is done for
                self._crash = self._crash or error_text(e)
                log.info("%s: poll failed", self.name, exc_info=True)
            self._record_done()
        self._finish_outstanding(STOP_WAIT, None)
        self._close()

    def _new_slots(self) -> None:
        self.slots = [_Slot(self.history.new_process()) for _ in range(max(1, self.options.in_flight))]
        self._free = deque(self.slots)
        self._sent_at_open = self.sent

    def _outstanding(self) -> list[_Slot]:
        return [s for s in self.slots if s.op is not None]

    def _finish_outstanding(self, wait: float, reason: str | None) -> None:
        """Serve delivery reports for up to `wait` s, then purge (queued sends become `fail`
        with _PURGE_QUEUE, sent ones `info` with _PURGE_INFLIGHT); any send still open is `info`."""
        deadline = time.monotonic() + wait
        try:
            while self._outstanding() and time.monotonic() < deadline:
                self.producer.poll(0.05)
                self._record_done()
            if self._outstanding():
                self.producer.purge(in_queue=True, in_flight=True, blocking=False)
                deadline = time.monotonic() + 2
                while self._outstanding() and time.monotonic() < deadline:
                    self.producer.poll(0.05)
                    self._record_done()
        except Exception:
            log.info("%s: serving delivery reports failed", self.name, exc_info=True)
        for slot in self._outstanding():
            self._complete(slot, "info", {"error": reason or "no delivery report"})
        self._record_done()

    def _close(self) -> None:
        try:
            # a transactional producer aborts its open transaction here; a fenced one cannot, and
            # confluent-kafka says so in a RuntimeWarning: the fencing is already history
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "Producer abort_transaction failed", RuntimeWarning)
                self.producer.close()
        except Exception:
            log.info("%s: close failed", self.name, exc_info=True)

    def _replace(self) -> None:
        """The client hit a fatal error: end its sends, close it, open a new one with new processes.

        When the error ended no send (none was outstanding), one more send is tried on the
        broken client, so that the crash is recorded on the operation it ended."""
        if not self._outstanding() and not self._crash_recorded:
            self._issue(self._free.popleft(), 0)
        log.warning("%s: client replaced after %s", self.name, self._crash)
        self._finish_outstanding(2.0, self._crash)
        self._close()
        self.crashes += 1
        while not self.stop_event.is_set():
            try:
                self.producer = self._open()
                break
            except Exception as e:
                log.info("%s: reopening failed: %s", self.name, error_text(e))
                self._backoff(self.crashes)
        self._new_slots()
        self._crash, self._crash_recorded = None, False


class ConsumerWorker(Worker):
    """Polls until stopped, after either assigning every partition from the beginning or
    subscribing with the run's shared group (`options.consumer_mode(seq)`).

    A subscriber's rebalance happens inside a poll: its new assignment is recorded as an
    `assign` (with `"rebalance": true`) between that poll's invoke and completion, so the
    checker restarts read continuity before the records the poll returns."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event,
                 seq: int, rack: str | None, group: str | None = None, isolation: str | None = None,
                 topics: tuple[str, ...] | None = None):
        """`isolation` and `topics` override the options' (a copier reads one topic read_committed
        from its group's committed offsets)."""
        super().__init__(f"consumer-{seq}", history, stop)
        self.options = options
        self.mode = options.consumer_mode(seq)
        self.rack = rack if options.consumer_has_rack(seq) else None
        self.isolation = isolation or options.isolation(seq)
        self.topics = topics or options.topics
        self.from_committed = topics is not None and group is not None
        self.group = group or f"kipcheck-subscribers-{options.topic}"
        self.process: int | None = None
        self.config = {"bootstrap.servers": bootstrap,
                       "group.id": self.group if self.mode == "subscribe" or self.from_committed else f"kipcheck-{seq}-{time.time_ns()}",
                       "enable.auto.commit": False, "auto.offset.reset": "earliest", "enable.partition.eof": False,
                       "isolation.level": self.isolation, "logger": quiet_logger(),
                       "topic.metadata.refresh.interval.ms": 2000, "error_cb": self._client_error,
                       "statistics.interval.ms": 1000, "stats_cb": self._stats}
        if self.rack:
            self.config["client.rack"] = self.rack
        # the copier keeps the classic protocol: its transactions commit offsets with its group's metadata
        self.protocol = options.group_protocol if self.mode == "subscribe" and not self.from_committed else "classic"
        if self.protocol != "classic":
            self.config["group.protocol"] = self.protocol
        # a subscriber commits its position after its polls and resumes from the group's commits
        self.committer = Committer(history, self.group, self.protocol, seq) \
            if self.mode == "subscribe" and not self.from_committed else None
        if self.committer:
            self.config["on_commit"] = self.committer.answered
        self.consumer = Consumer(self.config)
        self.read = 0
        self.fetch_sources: dict[int, dict] = {}
        self._crash: str | None = None
        self._stays = random.Random(seq)  # how long each membership lasts (`rejoin_after_s`)
        self.leave_at = float("inf")  # when the membership ends (monotonic s), `_start_stay`

    def _client_error(self, err: KafkaError) -> None:
        if err.fatal() and self._crash is None:
            self._crash = error_text(err)

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

    def _client_call(self, op: Operation, call):
        """Run a client call for `op`; a client failure completes it (`fail`: these calls
        write nothing) with the error, marked fatal, and raises _Crashed."""
        try:
            return call()
        except Exception as e:
            if not op.done:
                op.fail(error=error_text(e), fatal=True)
            self._crash = None
            raise _Crashed(error_text(e)) from e

    def assign_all(self, process: int) -> None:
        parts = [TopicPartition(t, p, OFFSET_BEGINNING) for t in self.topics for p in range(self.options.partitions)]
        op = self.history.invoke(process, "assign", {"partitions": [[t, p] for t in self.topics
                                                                    for p in range(self.options.partitions)],
                                                     "seek_to_beginning": True, "isolation": self.isolation})
        self._client_call(op, lambda: self.consumer.assign(parts))
        op.ok()

    def poll_once(self, process: int) -> list:
        op = self.history.invoke(process, "poll", {"topic": self.options.topic, "isolation": self.isolation})
        msgs = self._client_call(op, lambda: self.consumer.consume(num_messages=self.options.poll_batch,
                                                                   timeout=0.5))
        records, stamps, fatal = [], [], self._crash
        offset = self.history.wall_minus_history_ms()  # once: every stamp of the poll mapped alike
        for m in msgs:
            err = m.error()
            if err is None:
                records.append([m.topic(), m.partition(), m.offset(), values.text(m.value())])
                kind, unix_ms = m.timestamp()
                stamps.append(self.history.since_start_ms(unix_ms, offset) if kind == TIMESTAMP_LOG_APPEND_TIME
                              else None)
            elif err.fatal():
                fatal = fatal or error_text(err)
        # the leader's LogAppendTime of each record (a topic with message.timestamp.type LogAppendTime)
        # and the wall clock less the history's time at that mapping: stamps as the broker compares
        # them (Unix ms), for ListOffsets by timestamp (checks/rules/timestamp_rules.py)
        stamped = ({"append_ms": stamps, "wall_minus_history_ms": round(offset)}
                   if any(s is not None for s in stamps) else {})
        if fatal:  # the records came before the error: real observations, kept (`ok`) when there are any
            (op.ok if records else op.fail)(records=records, error=fatal, fatal=True, **stamped)
            self._crash = None
            raise _Crashed(fatal)
        op.ok(records=records, **stamped)
        self.read += len(records)
        return records

    def subscribe(self, process: int) -> None:
        op = self.history.invoke(process, "subscribe", {"topics": list(self.topics), "group": self.group,
                                                        "isolation": self.isolation})
        self._client_call(op, lambda: self.consumer.subscribe(
            list(self.topics), on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost))
        op.ok()

    def _member(self, consumer) -> dict:
        """Who the callback's change is for: the group, this member's id, the protocol."""
        return {"group": self.group, "member": consumer.memberid(), "protocol": self.protocol}

    def _assigned(self, consumer, partitions) -> None:
        """Rebalance callback (runs inside a poll): a subscriber's new partitions resume at the
        group's committed offsets it asks first (`Committer.resume`; none: from the earliest), a
        copier's at its group's committed offsets (librdkafka's own OffsetFetch). Under the consumer
        protocol the partitions are added to those owned (incremental), under the classic one they
        replace them."""
        self._start_stay()
        start = ({"committed": True} if self.from_committed
                 else {"resume": self.committer.resume(self.process, consumer, partitions, self._member(consumer))})
        op = self.history.invoke(self.process, "assign", {
            "partitions": [[tp.topic, tp.partition] for tp in partitions], **start, "rebalance": True,
            **self._member(consumer)})
        self._complete(op, lambda: (consumer.incremental_assign if self.protocol == "consumer"
                                    else consumer.assign)(partitions))

    def _revoked(self, consumer, partitions, lost: bool = False) -> None:
        """Rebalance callback: partitions taken away (`lost`: the member was fenced and gives up
        all of them at once, KIP-848). Recorded before they are let go (KIP-848: the owner
        revokes, then the coordinator may give them to another member)."""
        op = self.history.invoke(self.process, "revoke", {
            "partitions": [[tp.topic, tp.partition] for tp in partitions], **self._member(consumer), "lost": lost})
        self._complete(op, lambda: consumer.incremental_unassign(partitions) if self.protocol == "consumer"
                       else consumer.unassign())

    def _lost(self, consumer, partitions) -> None:
        self._revoked(consumer, partitions, lost=True)

    @staticmethod
    def _complete(op: Operation, call) -> None:
        """A rebalance callback's client call: `ok`, or `fail` with the error, raised on (the poll ends)."""
        try:
            call()
        except Exception as e:
            op.fail(error=error_text(e))
            raise
        op.ok()

    def work(self):
        consecutive = 0
        while not self.stop_event.is_set():
            self.process = process = self.history.new_process()
            read_before = self.read
            try:
                if self.mode == "subscribe":
                    self.subscribe(process)
                else:
                    self.assign_all(process)
                self.leave_at = float("inf")  # set by the membership's first assignment (`_assigned`)
                while not self.stop_event.is_set() and time.monotonic() < self.leave_at:
                    records = self.poll_once(process)
                    if self.committer:
                        self.committer.commit(process, self.consumer, records, self._member(self.consumer))
                if not self.stop_event.is_set():  # leaves the group (its close revokes) and joins anew
                    self._replace(0, pause=self.options.rejoin_gap_s)
            except _Crashed as crash:
                log.warning("%s: client replaced after %s", self.name, crash)
                consecutive = 0 if self.read > read_before else consecutive + 1
                self.crashes += 1
                self._replace(consecutive)
        self._close()

    def _start_stay(self) -> None:
        """A subscriber's membership lasts a seeded stay from its first assignment: one that left
        before the coordinator answered it would only add a member that never fetched (it stays
        in the group until its session times out) and hold the group's assignment back."""
        stay = self.options.rejoin_after_s
        if self.mode == "subscribe" and not self.from_committed and stay and self.leave_at == float("inf"):
            self.leave_at = time.monotonic() + self._stays.uniform(*stay)

    def _close(self) -> None:
        try:
            self.consumer.close()
        except Exception:
            log.info("%s: close failed", self.name, exc_info=True)
        if self.committer:  # an async commit its close did not answer may still be applied
            self.committer.unanswered("no commit answer before the client closed")

    def _replace(self, consecutive: int, pause: float = 0.0) -> None:
        """A new client after the old one closed: after the crash backoff, and `pause` more seconds
        out of the group (`WorkloadOptions.rejoin_gap_s`), both cut short by the stop event."""
        self._close()
        self._backoff(consecutive)
        if pause > 0:
            self.stop_event.wait(pause)
        while not self.stop_event.is_set():
            try:
                self.consumer = Consumer(self.config)
                return
            except Exception as e:
                log.info("%s: reopening failed: %s", self.name, error_text(e))
                self._backoff(self.crashes)


class _Crashed(Exception):
    """A consumer's client failed fatally; its operation is already recorded."""


def final_read(bootstrap: str, options: WorkloadOptions, history: History, timeout: float = 60.0) -> bool:
    """Read every partition of every workload topic from the beginning up to its high
    watermark (with a new process; read_committed, which stops at the last stable offset and
    passes transaction markers and aborted records by, so the end is reached when the
    consumer's position is there).

    This is what makes `lost-write` complete: an acknowledged offset below the end of
    the log that no read returned is lost. Returns whether the ends were reached."""
    worker = ConsumerWorker(bootstrap, options, history, threading.Event(), seq=999, rack=None)
    process = history.new_process()
    consumer = worker.consumer
    parts = [(t, p) for t in worker.topics for p in range(options.partitions)]
    try:
        ends = {}
        deadline = time.monotonic() + timeout
        for tp in parts:
            while tp not in ends and time.monotonic() < deadline:
                try:
                    ends[tp] = consumer.get_watermark_offsets(TopicPartition(*tp), timeout=5)[1]
                except Exception:
                    time.sleep(0.5)
        worker.assign_all(process)
        seen = {tp: -1 for tp in parts}
        while time.monotonic() < deadline:
            if all(seen[tp] + 1 >= ends.get(tp, 0) for tp in seen):
                return len(ends) == len(parts)
            for t, p, off, _ in worker.poll_once(process):
                seen[(t, p)] = max(seen[(t, p)], off)
            if options.workload == "txn":  # markers and aborted records are never returned
                for tp in consumer.position([TopicPartition(*tp) for tp in parts]):
                    if tp.offset >= 0:
                        seen[(tp.topic, tp.partition)] = max(seen[(tp.topic, tp.partition)], tp.offset - 1)
        return False
    finally:
        consumer.close()
