"""Workload outcomes without a broker: every send/poll/assign is recorded with the right type."""
from __future__ import annotations

import dataclasses
import threading
import time
import types

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kipcheck.rundir.history import read_history
from kipcheck.rundir.writer import History
from kipcheck.harness.clients.wire import error_name
from kipcheck.harness.clients.workload import ConsumerWorker, ProducerWorker, WorkloadOptions


class FakeProducer:
    """Delivers produce() calls with scripted outcomes, in order: ("offset", n), a KafkaError
    (code or instance), "silence" (never reported), "queue-full" or an exception to raise.

    Outcomes are told apart by type first: `KafkaError == str` leaves a TypeError set
    inside confluent-kafka 2.16 that surfaces later as a SystemError."""

    def __init__(self, outcomes, error_cb=None):
        self.outcomes = list(outcomes)
        self.pending = []
        self.closed = self.purged = False
        self.error_cb = error_cb

    def produce(self, topic, value, key, partition, on_delivery):
        outcome = self.outcomes.pop(0) if self.outcomes else "silence"
        if isinstance(outcome, str) and outcome == "queue-full":
            raise BufferError("queue full")
        if isinstance(outcome, BaseException):
            raise outcome
        self.pending.append((outcome, on_delivery))

    def poll(self, timeout):
        keep = []
        for outcome, cb in self.pending:
            silent = isinstance(outcome, str) and outcome == "silence"
            if silent and not self.purged:
                keep.append((outcome, cb))
            elif silent:
                cb(KafkaError(KafkaError._PURGE_INFLIGHT), None)
            elif isinstance(outcome, tuple):
                cb(None, types.SimpleNamespace(offset=lambda o=outcome[1]: o))
            else:
                cb(outcome if isinstance(outcome, KafkaError) else KafkaError(outcome), None)
        self.pending = keep
        return 0

    def purge(self, in_queue=True, in_flight=True, blocking=True):
        self.purged = True

    def close(self):
        self.closed = True



def _pairs(records: list[dict]) -> list[tuple[dict, dict]]:
    """(invoke, completion) of each operation; fails if a process invokes twice before its completion
    or completes what it never invoked."""
    open_by_process: dict = {}
    pairs = []
    for r in records:
        if r["type"] == "invoke":
            assert r["process"] not in open_by_process, r
            open_by_process[r["process"]] = r
        else:
            assert r["process"] in open_by_process, r
            pairs.append((open_by_process.pop(r["process"]), r))
    return pairs

def run_producer(tmp_path, scripts, sends, **options):
    """Drive a ProducerWorker whose successive clients follow `scripts`; stop after `sends` invokes."""
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(send_timeout=0.05, rate=0, **{"in_flight": 1, **options})
    clients = [FakeProducer(s) for s in scripts]
    with pytest.MonkeyPatch.context() as m:
        m.setattr("kipcheck.harness.clients.workload.Producer", lambda config, fakes=iter(clients): next(fakes))
        worker = ProducerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=0)
    worker._open = iter(clients[1:]).__next__
    worker._backoff = lambda consecutive: None
    append_batch = history.append_batch

    def counted(entries):  # the producer's invokes come in batches
        for process, type_, _, _ in entries:
            if type_ == "invoke":
                if sum(v for k, v in counted.n.items()) + 1 >= sends:
                    worker.stop_event.set()
                counted.n[process] = counted.n.get(process, 0) + 1
        return append_batch(entries)

    counted.n = {}
    history.append_batch = counted
    worker.work()
    history.close()
    return worker, clients, read_history(tmp_path / "history.jsonl")


def test_send_outcomes_map_to_ok_fail_info(tmp_path):
    _, _, records = run_producer(tmp_path, [[("offset", 7), KafkaError.MSG_SIZE_TOO_LARGE, KafkaError._MSG_TIMED_OUT,
                                             "queue-full", "silence"]], sends=5)
    done = [r for r in records if r["type"] != "invoke"]
    assert [r["type"] for r in done] == ["ok", "fail", "info", "fail", "info"]
    assert done[0]["value"]["offset"] == 7
    assert done[2]["value"]["error"] == "_MSG_TIMED_OUT"  # a timeout is indeterminate, never fail
    assert done[4]["value"]["error"] == "_PURGE_INFLIGHT"  # still open at the end: purged, indeterminate
    assert not any(r["value"].get("fatal") for r in records)


def test_process_continues_under_new_id_after_info(tmp_path):
    _, _, records = run_producer(tmp_path, [[("offset", 1), KafkaError._MSG_TIMED_OUT, ("offset", 2), ("offset", 3)]],
                                 sends=4)
    sends = [r["process"] for r in records if r["type"] == "invoke"]
    assert sends[0] == sends[1] and sends[2] == sends[3] and sends[2] != sends[1]
    info = next(r for r in records if r["type"] == "info")
    assert all(r["process"] != info["process"] for r in records if r["index"] > info["index"])


def test_in_flight_slots_are_processes_with_one_send_each(tmp_path):
    """Eight slots share one client: each process has at most one send outstanding."""
    _, _, records = run_producer(tmp_path, [[("offset", i) for i in range(64)]], sends=64, in_flight=8)
    for invoke, completion in _pairs(records):
        assert invoke["value"]["value"] == completion["value"]["value"]
    assert len({r["process"] for r in records}) == 8
    assert max(len([1 for r in records[:i] if r["type"] == "invoke"]) - len([1 for r in records[:i]
               if r["type"] != "invoke"]) for i in range(len(records))) == 8  # really eight in flight


@pytest.mark.parametrize("fatal, expected", [
    (KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "seq 5 out of order", fatal=True), "info"),
    (KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied", fatal=True), "fail"),
    (KafkaException(KafkaError(KafkaError._FATAL, "fenced", fatal=True)), "fail"),  # refused by produce()
    (RuntimeError("library bug"), "fail"),
])
def test_fatal_error_is_recorded_client_replaced_and_run_goes_on(tmp_path, fatal, expected):
    first = [("offset", 0), fatal, "silence"]
    worker, clients, records = run_producer(tmp_path, [first, [("offset", 1), ("offset", 2)]], sends=5, in_flight=2)
    crashed = [r for r in records if r["value"].get("fatal")]
    assert len(crashed) == 1 and crashed[0]["type"] == expected  # one per crash: the op it ended
    name = fatal.args[0].name() if isinstance(fatal, KafkaException) else \
        fatal.name() if isinstance(fatal, KafkaError) else "RuntimeError"
    assert crashed[0]["value"]["error"].startswith(name + ": ")
    assert clients[0].closed and worker.crashes == 1 and worker.error is None
    after = [r for r in records if r["index"] > crashed[0]["index"]]
    old = {r["process"] for r in records if r["index"] <= crashed[0]["index"]}
    new_sends = [r for r in after if r["type"] == "invoke"]
    assert new_sends and not old & {r["process"] for r in new_sends}  # the new client: new processes
    assert [r["value"]["offset"] for r in after if r["type"] == "ok" and r["process"] not in old][:1] == [1]


def test_producer_modes_cycle_and_are_recorded(tmp_path):
    opts = WorkloadOptions(producers=3, producer_modes=(("all", True), ("1", False)))
    assert [opts.producer_mode(i) for i in range(3)] == [("all", True), ("1", False), ("all", True)]
    assert WorkloadOptions(acks="1", idempotence=False).producer_mode(5) == ("1", False)
    _, _, records = run_producer(tmp_path, [[("offset", 3)]], sends=1, producer_modes=(("1", False),))
    invoke = records[0]["value"]
    assert (invoke["acks"], invoke["idempotent"]) == ("1", False)


def test_consumer_modes_and_racks():
    opts = WorkloadOptions(consumers=4, consumer_modes=("assign", "subscribe"), rackless_consumers=1)
    assert [opts.consumer_mode(i) for i in range(4)] == ["assign", "subscribe", "assign", "subscribe"]
    assert [opts.consumer_has_rack(i) for i in range(4)] == [True, True, True, False]


def _committed_answer(**offsets):
    """A fake `Consumer.committed`: the group's committed offset per partition (absent: none, -1001)."""
    return lambda parts, timeout: [TopicPartition(tp.topic, tp.partition, offsets.get(f"p{tp.partition}", -1001))
                                   for tp in parts]


def test_rebalance_inside_a_poll_is_recorded_between_invoke_and_ok(tmp_path):
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(consumers=1, consumer_modes=("subscribe",), rackless_consumers=0)
    worker = ConsumerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=0, rack="rack-2")
    assert worker.mode == "subscribe" and worker.rack == "rack-2"
    worker.process = 5
    assigned = []
    fake = types.SimpleNamespace(assign=assigned.append, memberid=lambda: "m-1", committed=_committed_answer(p2=40))

    def consume(num_messages, timeout):
        worker._assigned(fake, [TopicPartition(opts.topic, 1), TopicPartition(opts.topic, 2)])
        return []

    worker.consumer = types.SimpleNamespace(consume=consume, close=lambda: None)
    worker.poll_once(5)
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    fs = [(r["f"], r["type"]) for r in records]
    assert fs == [("poll", "invoke"), ("committed", "invoke"), ("committed", "ok"), ("assign", "invoke"),
                  ("assign", "ok"), ("poll", "ok")]
    assert [tp.offset for tp in assigned[0]] == [-2, 40]  # OFFSET_BEGINNING: the group had none for partition 1
    assert records[2]["value"]["offsets"] == {f"{opts.topic}/1": None, f"{opts.topic}/2": 40}
    given = [r["value"] for r in records if r["f"] == "assign"]
    assert all(v["group"] == worker.group and v["member"] == "m-1" and v["protocol"] == "classic" for v in given)
    assert given[0]["resume"] == {f"{opts.topic}/1": "earliest", f"{opts.topic}/2": 40}


def test_a_failed_offset_fetch_leaves_the_resume_to_librdkafka(tmp_path):
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(consumers=1, consumer_modes=("subscribe",))
    worker = ConsumerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=0, rack=None)
    worker.process = 5

    def refused(parts, timeout):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer"))

    parts = [TopicPartition(opts.topic, 0)]
    worker._assigned(types.SimpleNamespace(assign=lambda p: None, memberid=lambda: "m", committed=refused), parts)
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    assert [(r["f"], r["type"]) for r in records][:2] == [("committed", "invoke"), ("committed", "fail")]
    assert records[1]["value"]["error"].startswith("_TIMED_OUT")
    assert parts[0].offset == -1001 and records[2]["value"]["resume"] == {f"{opts.topic}/0": None}


class CommittingConsumer:
    """commit() records what it was asked; async answers wait for `answer()` (the callback)."""

    def __init__(self, committer, sync_error=None):
        self.committer, self.sync_error, self.asked, self.open = committer, sync_error, [], []

    def commit(self, offsets, asynchronous):
        self.asked.append(([(tp.topic, tp.partition, tp.offset) for tp in offsets], asynchronous))
        if asynchronous:
            self.open.append(offsets)
            return None
        if self.sync_error:
            raise KafkaException(self.sync_error)
        return offsets

    def answer(self, err=None):
        self.committer.answered(err, self.open.pop(0))


def test_commits_after_polls_one_open_at_a_time_sync_or_async(tmp_path):
    from kipcheck.harness.clients.commits import Committer
    history = History(tmp_path / "history.jsonl")
    committer = Committer(history, "g", "consumer", seq=3)
    consumer = CommittingConsumer(committer)
    member = {"group": "g", "member": "m", "protocol": "consumer"}
    for n in range(12):
        committer.commit(7, consumer, [["t", 0, 10 * n, "v"], ["t", 0, 10 * n + 1, "v"], ["t", 2, n, "v"]], member)
        if consumer.open and n % 3 == 2:
            consumer.answer()
    committer.commit(7, consumer, [], member)  # a poll with nothing: no commit
    committer.unanswered("closed")
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    modes = [r["value"]["mode"] for r in records if r["type"] == "invoke"]
    assert set(modes) == {"sync", "async"}  # the seeded choice makes both
    assert modes == [r["value"]["mode"] for r in read_history(tmp_path / "history.jsonl") if r["type"] == "invoke"]
    open_ = 0
    for r in records:  # never two commits open at once
        open_ += 1 if r["type"] == "invoke" else -1
        assert 0 <= open_ <= 1
    first = records[0]["value"]
    assert first["offsets"] == {"t/0": 2, "t/2": 1} and first["group"] == "g" and first["member"] == "m"
    assert consumer.asked[0][0] == [("t", 0, 2), ("t", 2, 1)]
    assert all(r["process"] == 7 for r in records)
    assert records[-1]["type"] in ("ok", "info")


@pytest.mark.parametrize("error, expected", [
    (KafkaError(KafkaError.STALE_MEMBER_EPOCH, "stale"), "fail"),  # validation refused it: nothing written
    (KafkaError(KafkaError.REQUEST_TIMED_OUT, "slow"), "info"),  # appended, then timed out: may be applied
    (KafkaError(KafkaError._TRANSPORT, "lost"), "info"),
])
def test_a_commit_error_is_fail_only_when_nothing_was_written(tmp_path, error, expected):
    from kipcheck.harness.clients.commits import Committer
    history = History(tmp_path / "history.jsonl")
    committer = Committer(history, "g", "classic", seq=0)
    consumer = CommittingConsumer(committer, sync_error=error)
    committer.commit(1, consumer, [["t", 0, 5, "v"]], {"group": "g", "member": "m", "protocol": "classic"})
    if consumer.open:  # async: the answer comes through the callback
        consumer.answer(error)
    history.close()
    done = [r for r in read_history(tmp_path / "history.jsonl") if r["type"] != "invoke"]
    assert done[0]["type"] == expected and done[0]["value"]["error"].startswith(error.name())


class FakeConsumer:
    """consume() follows a script: a list of messages, or an exception to raise."""

    def __init__(self, script, on_empty=None):
        self.script, self.on_empty, self.closed = list(script), on_empty, False

    def assign(self, parts):
        pass

    def consume(self, num_messages, timeout):
        if not self.script:
            self.on_empty()
            return []
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise step
        return step

    def close(self):
        self.closed = True


def message(offset, error=None):
    return types.SimpleNamespace(error=lambda: error, topic=lambda: "kipcheck", partition=lambda: 0,
                                 offset=lambda: offset, value=lambda: f"0-{offset}".encode(),
                                 timestamp=lambda: (1, 1_800_000_000_000))  # confluent_kafka.TIMESTAMP_CREATE_TIME


@pytest.mark.parametrize("crash, expected", [
    (KafkaException(KafkaError(KafkaError.FENCED_INSTANCE_ID, "fenced", fatal=True)), "fail"),
    ([message(5), message(-1, KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied", fatal=True))], "ok"),
])
def test_consumer_fatal_error_recorded_and_consumer_replaced(tmp_path, monkeypatch, crash, expected):
    history = History(tmp_path / "history.jsonl")
    stop = threading.Event()
    first = FakeConsumer([[message(4)], crash])
    clients = iter([first, FakeConsumer([[message(6)]], on_empty=stop.set)])
    monkeypatch.setattr("kipcheck.harness.clients.workload.Consumer", lambda config: next(clients))
    worker = ConsumerWorker("127.0.0.1:1", WorkloadOptions(consumers=1), history, stop, seq=0, rack=None)
    monkeypatch.setattr(worker, "_backoff", lambda consecutive: None)
    worker.work()
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    crashed = [r for r in records if r["value"].get("fatal")]
    assert len(crashed) == 1 and crashed[0]["type"] == expected and crashed[0]["f"] == "poll"
    assert crashed[0]["value"]["error"].split(":")[0] in ("FENCED_INSTANCE_ID", "GROUP_AUTHORIZATION_FAILED")
    assert first.closed and worker.crashes == 1 and worker.error is None
    later = [r for r in records if r["index"] > crashed[0]["index"]]
    assert later[0]["f"] == "assign" and later[0]["process"] != crashed[0]["process"]  # a new process
    assert [5, 6][expected == "fail":] == [rec[2] for r in records if r["f"] == "poll" and r["type"] == "ok"
                                           for rec in r["value"]["records"]][1:]


@pytest.mark.parametrize("code,name", [(0, "NONE"), (1, "OFFSET_OUT_OF_RANGE"), (6, "NOT_LEADER_OR_FOLLOWER"),
                                       (70, "FETCH_SESSION_ID_NOT_FOUND"), (71, "INVALID_FETCH_SESSION_EPOCH"),
                                       (78, "OFFSET_NOT_AVAILABLE")])
def test_error_names_are_kafkas(code, name):
    assert error_name(code) == name


def test_a_subscriber_leaves_a_seeded_stay_after_its_first_assignment_an_assigning_consumer_stays(tmp_path):
    history = History(tmp_path / "history.jsonl")
    opts = WorkloadOptions(consumers=2, consumer_modes=("assign", "subscribe"), rejoin_after_s=(10.0, 20.0))
    assigning, subscriber = (ConsumerWorker("127.0.0.1:1", opts, history, threading.Event(), seq=s, rack=None)
                             for s in (0, 1))
    still = ConsumerWorker("127.0.0.1:1", dataclasses.replace(opts, rejoin_after_s=None), history,
                           threading.Event(), seq=1, rack=None)
    try:
        assert subscriber.leave_at == float("inf")  # not before the coordinator gave it anything
        stays = []
        for _ in range(20):
            subscriber.leave_at = float("inf")  # a new membership
            now = time.monotonic()
            subscriber._start_stay()
            first = subscriber.leave_at
            subscriber._start_stay()  # a later assignment of the same membership does not extend it
            assert subscriber.leave_at == first
            stays.append(first - now)
        assert all(10.0 <= s <= 20.5 for s in stays) and len(set(stays)) > 1
        for never in (assigning, still):
            never._start_stay()
            assert never.leave_at == float("inf")
    finally:
        for c in (assigning, subscriber, still):
            c._close()
        history.close()


def test_a_subscriber_that_left_pauses_before_its_new_client_and_a_stop_cuts_the_pause_short(tmp_path):
    """`rejoin_gap_s`: the next membership's client comes only after the pause (the members still there
    take the freed partitions meanwhile); a stop during the pause ends it at once, with no new client."""
    history = History(tmp_path / "history.jsonl")
    stop = threading.Event()
    worker = ConsumerWorker("127.0.0.1:1", WorkloadOptions(rejoin_gap_s=0.8), history, stop, seq=1, rack=None)
    try:
        old = worker.consumer
        started = time.monotonic()
        worker._replace(0, pause=worker.options.rejoin_gap_s)
        assert time.monotonic() - started >= 0.8 and worker.consumer is not old
        old = worker.consumer
        threading.Timer(0.2, stop.set).start()
        started = time.monotonic()
        worker._replace(0, pause=30.0)
        assert time.monotonic() - started < 5.0 and worker.consumer is old  # stopped: no new client
    finally:
        stop.set()
        history.close()


def test_an_answer_for_other_offsets_does_not_complete_the_open_commit(tmp_path):
    """A synchronous commit's callback served in a later poll is not the open async commit's answer."""
    from kipcheck.harness.clients.commits import Committer
    history = History(tmp_path / "history.jsonl")
    committer = Committer(history, "g", "consumer", seq=0)
    consumer = CommittingConsumer(committer)
    while not consumer.open:  # until the seeded choice makes an async commit
        committer.commit(1, consumer, [["t", 0, len(consumer.asked), "v"]], {"group": "g"})
    committer.answered(None, [TopicPartition("t", 0, 10_000)])
    assert committer.pending is not None
    consumer.answer()
    assert committer.pending is None
    history.close()


def test_an_empty_assignment_asks_no_committed_offsets(tmp_path):
    from kipcheck.harness.clients.commits import Committer
    history = History(tmp_path / "history.jsonl")
    assert Committer(history, "g", "consumer", seq=0).resume(1, None, [], {"group": "g"}) == {}
    history.close()
    assert read_history(tmp_path / "history.jsonl") == []


def test_share_workload_sets_the_brokers_lock_and_limit_only_for_itself():
    """The brokers' share settings (docs/history.md, "Share groups"): the lock and its floor, the limit
    and its floor, only for --workload share; share groups are GA from 4.2."""
    from kipcheck.harness.backends import releases
    assert WorkloadOptions().share_broker_config() == ()
    assert dict(WorkloadOptions(workload="share").share_broker_config()) == {
        "group.share.record.lock.duration.ms": "5000", "group.share.min.record.lock.duration.ms": "5000",
        "group.share.delivery.count.limit": "3", "group.share.min.delivery.count.limit": "2"}
    assert not releases.has("4.1.2", "share-groups") and releases.has("4.2.0", "share-groups")


def test_a_polls_delivery_reports_are_recorded_together_each_after_it_was_served(tmp_path):
    """Many in flight: each poll's completions are one batch (consecutive indices, one time),
    each stamped no earlier than its report was served; every invoke has exactly one
    completion, from its process, and a slot issues again only after it."""
    history = History(tmp_path / "history.jsonl")
    served: dict[str, int] = {}
    polls: list[list[str]] = []

    class Stamping(FakeProducer):
        def produce(self, topic, value, key, partition, on_delivery):
            def stamp(err, msg, v=value.decode()):
                served[v] = history.now()
                polls[-1].append(v)
                on_delivery(err, msg)
            super().produce(topic, value, key, partition, stamp)

        def poll(self, timeout):
            polls.append([])
            return super().poll(timeout)

    outcomes = [("offset", i) if i % 5 else KafkaError._MSG_TIMED_OUT for i in range(200)]
    client = Stamping(outcomes)
    with pytest.MonkeyPatch.context() as m:
        m.setattr("kipcheck.harness.clients.workload.Producer", lambda config: client)
        worker = ProducerWorker("127.0.0.1:1", WorkloadOptions(send_timeout=0.05, rate=0, in_flight=16),
                                history, threading.Event(), seq=0)
    real_poll = client.poll

    def poll(timeout):
        if len(served) >= 150:
            worker.stop_event.set()
        return real_poll(timeout)

    client.poll = poll
    worker.work()
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    done = {r["value"]["value"]: r for r in records if r["type"] != "invoke"}
    invokes = [r for r in records if r["type"] == "invoke"]
    assert len(done) == len(invokes) == len(records) / 2 and set(done) == {r["value"]["value"] for r in invokes}
    for r in invokes:
        assert done[r["value"]["value"]]["process"] == r["process"]
    for v, at in served.items():
        assert done[v]["time"] >= at
    for batch in (p for p in polls if len(p) > 1):
        recs = [done[v] for v in batch]
        assert [r["index"] for r in recs] == list(range(recs[0]["index"], recs[0]["index"] + len(recs)))
        assert len({r["time"] for r in recs}) == 1
    _pairs(records)
    assert max(len(p) for p in polls) > 1 and len(served) >= 150


def test_a_history_that_cannot_take_the_completions_ends_the_worker_not_the_client(tmp_path):
    """A write error while recording a poll's completions is the worker's error, not a client
    crash recorded in the history it cannot write."""
    history = History(tmp_path / "history.jsonl")
    client = FakeProducer([("offset", i) for i in range(8)])
    with pytest.MonkeyPatch.context() as m:
        m.setattr("kipcheck.harness.clients.workload.Producer", lambda config: client)
        worker = ProducerWorker("127.0.0.1:1", WorkloadOptions(send_timeout=0.05, rate=0, in_flight=4),
                                history, threading.Event(), seq=0)

    def broken(entries):
        raise OSError(28, "No space left on device")

    history.append_batch = broken
    real_poll, polls = client.poll, []

    def poll(timeout):
        polls.append(timeout)
        if len(polls) >= 20:  # a worker that goes on regardless stops here, and the test fails
            worker.stop_event.set()
        return real_poll(timeout)

    client.poll = poll
    worker.run()
    history.close()
    assert isinstance(worker.error, OSError) and worker.crashes == 0


def test_invokes_are_recorded_before_their_sends_are_handed_over_and_a_refusal_skips_none(tmp_path):
    """One issue round's invokes are stamped no later than their produce() calls; a send refused
    mid-round (queue full) is `fail` and the sends invoked after it are still tried."""
    history = History(tmp_path / "history.jsonl")
    handed: dict[str, int] = {}

    class Stamping(FakeProducer):
        def produce(self, topic, value, key, partition, on_delivery):
            handed[value.decode()] = history.now()
            super().produce(topic, value, key, partition, on_delivery)

    client = Stamping([("offset", 0), ("offset", 1), "queue-full", ("offset", 3), ("offset", 4)])
    with pytest.MonkeyPatch.context() as m:
        m.setattr("kipcheck.harness.clients.workload.Producer", lambda config: client)
        worker = ProducerWorker("127.0.0.1:1", WorkloadOptions(send_timeout=0.05, rate=0, in_flight=5),
                                history, threading.Event(), seq=0)
    client.poll = lambda timeout, real=client.poll: (worker.stop_event.set(), real(timeout))[1]
    worker.work()
    history.close()
    records = read_history(tmp_path / "history.jsonl")
    invokes = [r for r in records if r["type"] == "invoke"]
    assert len(invokes) == 5 and [r["index"] for r in invokes] == list(range(5))
    for r in invokes:
        assert r["time"] <= handed[r["value"]["value"]]
    outcome = {r["value"]["value"]: (r["type"], r["value"].get("offset", r["value"].get("error")))
               for r in records if r["type"] != "invoke"}
    assert [outcome[r["value"]["value"]] for r in invokes] == [("ok", 0), ("ok", 1), ("fail", "_QUEUE_FULL"),
                                                               ("ok", 3), ("ok", 4)]
