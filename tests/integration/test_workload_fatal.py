"""A real fatal client error on a live cluster: the workload records it, replaces the client
and goes on (issue 11 §1).

The workload's producer is given a transactional.id (WorkloadOptions.transactional_id,
a test hook) so that a second producer with the same id can fence it: InitProducerId
bumps the epoch (Kafka's TransactionCoordinator.handleInitProducerId), the broker then
rejects the first producer's next Produce with PRODUCER_FENCED / INVALID_PRODUCER_EPOCH,
which librdkafka raises as a fatal error.
"""
from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from kipcheck.rundir.history import read_history
from kipcheck.harness.clients.workload import ProducerWorker, WorkloadOptions

pytestmark = pytest.mark.cluster


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_fenced_producer_is_recorded_replaced_and_the_workload_goes_on(cluster, topic, history):
    txn_id = f"kipcheck-fence-{uuid.uuid4().hex[:8]}"
    options = WorkloadOptions(topic=topic, partitions=3, producers=1, in_flight=8, rate=200,
                              transactional_id=txn_id, send_timeout=10)
    stop = threading.Event()
    worker = ProducerWorker(cluster.bootstrap_servers(), options, history, stop, seq=0)
    worker.start()
    fencer = None
    try:
        assert _wait(lambda: worker.sent >= 50, 30), "the transactional producer never got going"
        fencer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "transactional.id": txn_id})
        fencer.init_transactions(30)  # the epoch bump: the worker's producer is now a zombie
        assert _wait(lambda: worker.crashes >= 1, 30), "the fenced producer was never replaced"
        sent_after_replacement = worker.sent
        assert _wait(lambda: worker.sent >= sent_after_replacement + 50, 30), "the replacement does not send"
    finally:
        stop.set()
        worker.join(60)
        if fencer is not None:
            fencer.close()
    assert not worker.is_alive() and worker.error is None
    history.flush()
    records = read_history(history.path)
    crashed = [r for r in records if r["f"] == "send" and r["value"].get("fatal")]
    assert len(crashed) == worker.crashes >= 1
    first = crashed[0]
    # the first completion after the fence carries it: a send that failed, or one acknowledged before
    # the fence whose delivery report came after the error callback (CI 2026-11-28: an `ok`)
    assert first["type"] in ("info", "fail") or first["type"] == "ok" and isinstance(first["value"].get("offset"), int)
    assert first["value"]["error"].split(":")[0] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED"), \
        first["value"]["error"]
    before = {r["process"] for r in records if r["index"] <= first["index"]}
    later_ok = [r for r in records if r["index"] > first["index"] and r["type"] == "ok"
                and r["process"] not in before]
    assert len(later_ok) >= 50  # new processes, acknowledged by the replacement client
    # Jepsen's rule survives the crash: every invoke has one completion by the same process
    open_ops: dict = {}
    for r in records:
        if r["type"] == "invoke":
            assert r["process"] not in open_ops
            open_ops[r["process"]] = r
        else:
            assert open_ops.pop(r["process"])["value"]["value"] == r["value"]["value"]
    assert not open_ops


def test_a_send_refused_before_the_error_callback_records_the_cause_not_fatal(cluster, topic, history):
    """CI 2026-11-29: a produce refused with librdkafka's generic `_FATAL` before the error
    callback was served recorded `_FATAL`. The worker's loop is not run here, so nothing polls
    between the fence and the refusal: exactly that order, every time."""
    txn_id = f"kipcheck-fence-{uuid.uuid4().hex[:8]}"
    options = WorkloadOptions(topic=topic, partitions=3, producers=1, in_flight=8, rate=200,
                              transactional_id=txn_id, send_timeout=10)
    worker = ProducerWorker(cluster.bootstrap_servers(), options, history, threading.Event(), seq=0)
    worker._new_slots()
    fencer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "transactional.id": txn_id})
    try:
        fencer.init_transactions(30)
        refused = False
        deadline = time.monotonic() + 20
        while not refused and worker._free and time.monotonic() < deadline:
            refused = not worker._issue(worker._free.popleft(), 0)  # enqueued sends are never polled
            time.sleep(1.0)
        assert refused, "the fenced producer never refused a send"
    finally:
        fencer.close()
        worker._close()
    history.flush()
    fatal = [r for r in read_history(history.path) if r["f"] == "send" and r["value"].get("fatal")]
    assert len(fatal) == 1
    assert fatal[0]["value"]["error"].split(":")[0] in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED"), \
        fatal[0]["value"]["error"]
