"""The transactional workload (`kipcheck run --workload txn`, docs/history.md "Transactions").

`TxnProducerWorker`: a transactional producer running transactions one after another, each
with a few sends to partitions of the workload's first two topics and a seeded ending:
commit, abort once every send was acknowledged, abort with sends still in flight, or a
commit whose outcome is left unknown (the call is given 1 ms, the producer is then dropped
and a new one with the same transactional.id fences it, KIP-98 "InitProducerId": the
coordinator completes or aborts the transaction itself). `CopierWorker`: a
consume-transform-produce loop that reads the first topic read_committed in a group and
copies each record to the `-copy` topic inside a transaction that also commits the input
offsets (KIP-447 `sendOffsetsToTransaction` with the consumer's group metadata).

Processes follow the workload's rules (harness.clients.workload): the transaction calls are
one process; each send of a transaction is its own slot process, so the sends may be in
flight together; after an `info` the process goes on under a new id. Every loop is bounded
by the stop event and per-call timeouts.
"""
from __future__ import annotations

import functools
import logging
import random
import threading
import time
import warnings

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from kipcheck.harness.clients.admin import quiet_logger
from kipcheck.harness.clients.workload import (DEFINITE_SEND_ERRORS, PRODUCER_REQUEST_TIMEOUT_MS, Worker,
                                               WorkloadOptions, error_text)
from kipcheck.rundir.writer import History

log = logging.getLogger("kipcheck.workload")

#: the endings a transaction may get, with their seeded weights
ENDINGS = (("commit", 6), ("abort", 2), ("abort-in-flight", 1), ("unknown", 1))
#: seconds a commit or abort may take before it is indeterminate
END_TIMEOUT = 20.0


def _kafka_error(e: BaseException) -> KafkaError | None:
    return e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else None


class _TxnClient:
    """One transactional producer and what it is doing: the helpers both workers share."""

    def __init__(self, worker: Worker, bootstrap: str, options: WorkloadOptions, transactional_id: str):
        self.worker, self.options, self.history = worker, options, worker.history
        self.transactional_id = transactional_id
        self.config = {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "acks": "all",
                       "enable.idempotence": True, "linger.ms": options.linger_ms,
                       "transaction.timeout.ms": options.transaction_timeout_ms,
                       "delivery.timeout.ms": min(int(options.send_timeout * 1000), options.transaction_timeout_ms),
                       "request.timeout.ms": PRODUCER_REQUEST_TIMEOUT_MS,
                       "logger": quiet_logger()}
        self.producer: Producer | None = None
        self.session = 0  # how many producers this id had (librdkafka does not expose the epoch)
        self.n = 0
        self.process = self.history.new_process()
        self.slots: list[int] = []
        self.open: dict[int, object] = {}  # slot process -> its open send operation
        self.counts = {"committed": 0, "aborted": 0, "unknown": 0}
        self.failed = False  # an end did not answer: the producer's state is unknown, replace it

    def start(self) -> bool:
        """A new producer, initialised (fencing the previous one of this id). False: stopped."""
        self.close()
        consecutive = 0
        while not self.worker.stop_event.is_set():
            producer = Producer(self.config)
            try:
                producer.init_transactions(END_TIMEOUT)
                self.producer, self.session, self.n, self.failed = producer, self.session + 1, 0, False
                return True
            except Exception as e:
                log.info("%s: init_transactions failed: %s", self.worker.name, error_text(e))
                self._close(producer)
                consecutive += 1
                self.worker._backoff(consecutive)
        return False

    def close(self) -> None:
        if self.producer is not None:
            self._serve(0.5)
            self._close(self.producer)
            self.producer = None
            for process, op in list(self.open.items()):  # no report came: may or may not be written
                op.info(error="no delivery report")
                self._retire(process)

    def _close(self, producer: Producer) -> None:
        try:
            with warnings.catch_warnings():  # an open transaction is aborted, a fenced one cannot be
                warnings.filterwarnings("ignore", "Producer abort_transaction failed", RuntimeWarning)
                producer.close()
        except Exception:
            log.info("%s: close failed", self.worker.name, exc_info=True)

    def _retire(self, process: int) -> None:
        self.open.pop(process, None)
        self.slots = [s for s in self.slots if s != process]

    def label(self) -> str:
        self.n += 1
        return f"{self.transactional_id}#{self.session}.{self.n}"

    def fields(self, txn: str) -> dict:
        return {"transactional_id": self.transactional_id, "txn": txn, "producer_session": self.session}

    def begin(self, txn: str) -> bool:
        op = self.history.invoke(self.process, "txn-begin", {**self.fields(txn),
                                                             "transaction_timeout_ms": self.options.transaction_timeout_ms})
        try:
            self.producer.begin_transaction()
        except Exception as e:  # local state only: nothing was sent
            op.fail(error=error_text(e))
            return False
        op.ok()
        return True

    def send(self, txn: str, topic: str, partition: int, value: str) -> None:
        free = [s for s in self.slots if s not in self.open]
        process = free[0] if free else self.history.new_process()
        if not free:
            self.slots.append(process)
        op = self.history.invoke(process, "send", {"topic": topic, "partition": partition, "key": value,
                                                   "value": value, "acks": "all", "idempotent": True,
                                                   "producer": self.worker.name, **self.fields(txn)})
        self.open[process] = op
        try:
            self.producer.produce(topic, value=value.encode(), key=value.encode(), partition=partition,
                                  on_delivery=functools.partial(self._delivered, process, op))
        except Exception as e:  # not enqueued: certainly not written
            self.open.pop(process, None)
            op.fail(error=error_text(e))

    def _delivered(self, process: int, op, err, msg) -> None:
        if self.open.get(process) is not op:
            return
        del self.open[process]
        if err is None:
            self.worker.sent += 1
            op.ok(offset=msg.offset())
        elif err.code() in DEFINITE_SEND_ERRORS:
            op.fail(error=err.name())
        else:
            op.info(error=err.name())
            self._retire(process)

    def _serve(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while self.open and time.monotonic() < deadline:
                self.producer.poll(0.05)
        except Exception:
            log.info("%s: serving delivery reports failed", self.worker.name, exc_info=True)

    def end(self, txn: str, commit: bool, partitions: list, timeout: float = END_TIMEOUT, extra: dict | None = None,
            offsets=None, group=None) -> str:
        """Commit or abort; returns the outcome recorded ("ok", "fail", "info"). After `info`
        the calls go on as a new process."""
        f = "txn-commit" if commit else "txn-abort"
        op = self.history.invoke(self.process, f, {**self.fields(txn), "partitions": sorted(partitions),
                                                   **(extra or {})})
        try:
            if offsets is not None:
                self.producer.send_offsets_to_transaction(offsets, group, timeout)
            (self.producer.commit_transaction if commit else self.producer.abort_transaction)(timeout)
        except Exception as e:
            # an EndTxn that may have reached the coordinator: the outcome is unknown
            op.info(error=error_text(e), **({"fatal": True} if (_kafka_error(e) and _kafka_error(e).fatal()) else {}))
            self.process = self.history.new_process()
            self.failed = True
            self._serve(1.0)
            return "info"
        op.ok()
        self._serve(1.0)  # purged sends of an abort report now
        return "ok"

    def count(self, outcome: str, what: str) -> None:
        self.counts[what if outcome == "ok" else "unknown"] += 1


class TxnProducerWorker(Worker):
    """Transactions one after another through one transactional id (module docstring)."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event,
                 seq: int, seed: int = 0):
        super().__init__(f"txn-producer-{seq}", history, stop)
        self.options = options
        self.rng = random.Random(f"{seed}/txn/{seq}")
        self.sent = 0
        self.client = _TxnClient(self, bootstrap, options, options.transactional_ids[seq])

    @property
    def counts(self) -> dict:
        return self.client.counts

    def work(self):
        c, o = self.client, self.options
        topics = o.topics[:2]
        if not c.start():
            return
        while not self.stop_event.is_set():
            txn = c.label()
            if not c.begin(txn):
                c.start()
                continue
            ending = self.rng.choices([e for e, _ in ENDINGS], [w for _, w in ENDINGS])[0]
            parts = set()
            for k in range(self.rng.randint(*o.txn_sends)):
                topic, partition = self.rng.choice(topics), self.rng.randrange(o.partitions)
                parts.add((topic, partition))
                c.send(txn, topic, partition, f"{txn}/{k}")
            partitions = [list(tp) for tp in parts]
            if ending != "abort-in-flight":
                c._serve(o.send_timeout)
                if c.open:  # not every send was acknowledged in time: abort
                    ending = "abort"
            if ending.startswith("abort"):
                c.count(c.end(txn, False, partitions), "aborted")
            elif ending == "unknown":  # a commit given 1 ms, then the producer is replaced
                c.count(c.end(txn, True, partitions, timeout=0.001, extra={"unknown": True}), "committed")
            else:
                c.count(c.end(txn, True, partitions), "committed")
            if c.failed:
                c.start()
        c.close()


class CopierWorker(Worker):
    """Consume-transform-produce: the first topic read_committed in a group, each record copied
    to the `-copy` topic in a transaction that commits the input offsets (KIP-447)."""

    def __init__(self, bootstrap: str, options: WorkloadOptions, history: History, stop: threading.Event,
                 seq: int = 0):
        super().__init__(f"copier-{seq}", history, stop)
        self.options = options
        self.bootstrap = bootstrap
        self.sent = self.read = 0
        self.group = f"kipcheck-copier-{options.topic}"
        self.client = _TxnClient(self, bootstrap, options, options.transactional_ids[options.producers + seq])
        self.consumer: Consumer | None = None
        self.reader = None

    @property
    def counts(self) -> dict:
        return self.client.counts

    def _open_consumer(self):
        from kipcheck.harness.clients.workload import ConsumerWorker
        if self.reader is not None:
            self.reader._close()
        self.reader = ConsumerWorker(self.bootstrap, self.options, self.history, self.stop_event, seq=0, rack=None,
                                     group=self.group, isolation="read_committed", topics=(self.options.topic,))
        self.reader.config["enable.auto.commit"] = False
        self.reader.process = self.history.new_process()
        self.reader.subscribe(self.reader.process)

    def work(self):
        c, o = self.client, self.options
        out_topic = o.topics[2]
        if not c.start():
            return
        self._open_consumer()
        while not self.stop_event.is_set():
            try:
                records = self.reader.poll_once(self.reader.process)
            except Exception as e:  # the consumer crashed (recorded): a new one from the committed offsets
                log.info("%s: consumer replaced: %s", self.name, error_text(e))
                self._open_consumer()
                continue
            if not records:
                continue
            self.read += len(records)
            txn = c.label()
            if not c.begin(txn):
                c.start()
                self._open_consumer()
                continue
            parts = set()
            for topic, partition, offset, value in records:
                parts.add((out_topic, partition))
                c.send(txn, out_topic, partition, f"{value}>{txn}")
            consumer = self.reader.consumer
            try:
                positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
                group = consumer.consumer_group_metadata()
            except Exception as e:
                log.info("%s: no position: %s", self.name, error_text(e))
                positions, group = None, None
            extra = {"offsets": {f"{tp.topic}/{tp.partition}": tp.offset for tp in positions or ()}}
            if positions is None:
                c.count(c.end(txn, False, [list(tp) for tp in parts]), "aborted")
            else:
                outcome = c.end(txn, True, [list(tp) for tp in parts], extra=extra, offsets=positions, group=group)
                c.count(outcome, "committed")
                if outcome == "ok":
                    continue
            # not committed: start again from the group's committed offsets, with a new producer
            c.start()
            self._open_consumer()
        if self.reader is not None:
            self.reader._close()
        c.close()
