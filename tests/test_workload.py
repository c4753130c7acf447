"""Workload outcomes without a broker: every send/poll/assign is recorded with the right type."""
from __future__ import annotations

import threading
import types

import pytest
from confluent_kafka import KafkaError, TopicPartition

from checks.history import read_history
from harness.history import History
from harness.wire import error_name
from harness.workload import ConsumerWorker, ProducerWorker, WorkloadOptions


class FakeProducer:
    """Delivers each produce() with a scripted outcome: ("offset", n), a KafkaError code, or silence."""

    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.pending = []

    def produce(self, topic, value, key, partition, on_delivery):
        outcome = self.outcomes.pop(0)
        if outcome == "queue-full":
            raise BufferError("queue full")
        self.pending.append((outcome, on_delivery))

    def poll(self, timeout):
        while self.pending:
            outcome, cb = self.pending.pop(0)
            if outcome == "silence":
                continue
            if isinstance(outcome, tuple):
                cb(None, types.SimpleNamespace(offset=lambda o=outcome[1]: o))
            else:
                cb(KafkaError(outcome), None)

    def flush(self, timeout=None):
        return 0


def producer(tmp_path, outcomes, **options):
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(send_timeout=0.05, **options)
    worker = ProducerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=0)
    worker.producer = FakeProducer(outcomes)
    return worker, history


def test_send_outcomes_map_to_ok_fail_info(tmp_path):
    worker, history = producer(tmp_path, [("offset", 7), KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._MSG_TIMED_OUT, "silence",
                                          "queue-full"])
    got = [worker.send(0, 0, f"v{i}") for i in range(5)]
    history.close()
    assert got == ["ok", "fail", "info", "info", "fail"]
    done = [r for r in read_history(tmp_path / "history.jsonl") if r["type"] != "invoke"]
    assert [r["type"] for r in done] == got
    assert done[0]["value"]["offset"] == 7
    assert done[2]["value"]["error"] == "_MSG_TIMED_OUT"  # a timeout is indeterminate, never fail


def test_process_continues_under_new_id_after_info(tmp_path):
    worker, history = producer(tmp_path, [("offset", 1), KafkaError._MSG_TIMED_OUT, ("offset", 2), ("offset", 3)])
    stop = worker.stop_event
    sends = []
    original = worker.send

    def send(process, partition, value):
        sends.append(process)
        if len(sends) == 4:
            stop.set()
        return original(process, partition, value)

    worker.send = send
    worker.work()
    history.close()
    assert sends[0] == sends[1] and sends[2] == sends[3] and sends[2] != sends[1]
    records = read_history(tmp_path / "history.jsonl")
    info = next(r for r in records if r["type"] == "info")
    assert all(r["process"] != info["process"] for r in records if r["index"] > info["index"])


def test_producer_modes_cycle_and_are_recorded(tmp_path):
    opts = WorkloadOptions(producers=3, producer_modes=(("all", True), ("1", False)))
    assert [opts.producer_mode(i) for i in range(3)] == [("all", True), ("1", False), ("all", True)]
    assert WorkloadOptions(acks="1", idempotence=False).producer_mode(5) == ("1", False)
    worker, history = producer(tmp_path, [("offset", 3)], producer_modes=(("1", False),))
    worker.send(0, 0, "v")
    history.close()
    invoke = read_history(tmp_path / "history.jsonl")[0]["value"]
    assert (invoke["acks"], invoke["idempotent"]) == ("1", False)


def test_consumer_modes_and_racks():
    opts = WorkloadOptions(consumers=4, consumer_modes=("assign", "subscribe"), rackless_consumers=1)
    assert [opts.consumer_mode(i) for i in range(4)] == ["assign", "subscribe", "assign", "subscribe"]
    assert [opts.consumer_has_rack(i) for i in range(4)] == [True, True, True, False]


def test_rebalance_inside_a_poll_is_recorded_between_invoke_and_ok(tmp_path):
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(consumers=1, consumer_modes=("subscribe",))
    worker = ConsumerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=0, rack="rack-2")
    assert worker.mode == "subscribe" and worker.rack == "rack-2"
    worker.process = 5
    assigned = []
    fake = types.SimpleNamespace(assign=assigned.append)

    def consume(num_messages, timeout):
        worker._assigned(fake, [TopicPartition(opts.topic, 1)])
        return []

    worker.consumer = types.SimpleNamespace(consume=consume, close=lambda: None)
    worker.poll_once(5)
    history.close()
    fs = [(r["f"], r["type"]) for r in read_history(tmp_path / "history.jsonl")]
    assert fs == [("poll", "invoke"), ("assign", "invoke"), ("assign", "ok"), ("poll", "ok")]
    assert assigned[0][0].offset == -2  # OFFSET_BEGINNING


@pytest.mark.parametrize("code,name", [(0, "NONE"), (1, "OFFSET_OUT_OF_RANGE"), (6, "NOT_LEADER_OR_FOLLOWER"),
                                       (70, "FETCH_SESSION_ID_NOT_FOUND"), (71, "INVALID_FETCH_SESSION_EPOCH"),
                                       (78, "OFFSET_NOT_AVAILABLE")])
def test_error_names_are_kafkas(code, name):
    assert error_name(code) == name
