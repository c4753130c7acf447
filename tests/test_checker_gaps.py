"""Checks that close issue 10's section 3 (and the model-stepped session rule of section
2): for each, a hand-made history the checker must flag under `kip` and under the
release profile, and a nearby one it must accept. Histories go through the local engine
(`check_records`) unless a rule is named."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.history import write_jsonl
from kipcheck.checks.rules.history_rules import PartitionHistoryRule

PROFILES = ("kip", "kafka-4.3")
S = 1_000_000_000  # ns


class H:
    """A history builder with explicit times (ns): `op` adds an invoke and its ok."""

    def __init__(self):
        self.records = []

    def add(self, process, type_, f, value, t):
        self.records.append({"index": len(self.records), "time": t, "process": process, "type": type_, "f": f,
                             "value": value})
        return self

    def op(self, process, f, inv, done, t, dt=1_000_000):
        return self.add(process, "invoke", f, inv, t).add(process, "ok", f, {**inv, **done}, t + dt)

    def send(self, value, offset, t, p=0):
        return self.op(0, "send", {"topic": "t", "partition": p, "value": value}, {"offset": offset}, t)

    def poll(self, proc, t, *recs, p=0):
        return self.op(proc, "poll", {"topic": "t"}, {"records": [["t", p, o, v] for o, v in recs]}, t)

    def fetch(self, t, offset, recs, broker=2, hwm=100, pref=-1, rack="r2", proc=7, p=0, error="NONE", epoch=5):
        inv = {"broker": broker, "replica_id": -1, "rack": rack, "session_id": 0, "session_epoch": -1,
               "current_leader_epoch": epoch, "topic": "t", "partition": p, "fetch_offset": offset, "version": 18}
        return self.op(proc, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "error": error,
                                            "high_watermark": hwm, "last_stable_offset": hwm, "log_start_offset": 0,
                                            "preferred_read_replica": pref, "records": [list(r) for r in recs]}, t)

    def meta(self, t, broker=1, leader=1, epoch=5, isr=(1, 2, 3), offline=(), p=0):
        return self.op("observer", "metadata", {"broker": broker, "topic": "t", "partition": p},
                       {"error": "NONE", "leader": leader, "leader_epoch": epoch, "isr": list(isr),
                        "replicas": [1, 2, 3], "offline": list(offline),
                        "racks": {"1": "r1", "2": "r2", "3": "r3"}}, t)

    def fault(self, t, kind, targets, phase="start"):
        return self.add("nemesis", "info", "fault", {"fault": kind, "targets": list(targets), "phase": phase}, t)

    def list_offsets(self, t, ts, offset, iso="read_uncommitted", epoch=5, broker=1, proc=8):
        inv = {"broker": broker, "replica_id": -1, "isolation_level": iso, "topic": "t", "partition": 0,
               "timestamp": ts, "current_leader_epoch": epoch, "version": 11}
        return self.op(proc, "list_offsets", inv, {"error": "NONE", "offset": offset, "leader_epoch": epoch}, t)


def found(h: H, profile: str, known: bool = False) -> dict:
    v = check_records(h.records, profile=profile)
    return {n: ex for n, ex in v["known" if known else "anomalies"].items() if ex}


# --- raw fetch records in the log checks -------------------------------------------------

def written() -> H:
    return H().send("a", 0, 0).send("b", 1, 10 * S // 1000).send("c", 2, 20 * S // 1000)


@pytest.mark.parametrize("profile", PROFILES)
def test_a_fetch_serving_another_value_is_inconsistent(profile):
    bad = written().fetch(S, 0, [(0, "a"), (1, "x")], hwm=3).poll(9, 2 * S, (0, "a"), (1, "b"), (2, "c"))
    assert set(found(bad, profile)) == {"inconsistent-offset"}
    ex = found(bad, profile)["inconsistent-offset"][0]
    assert ex["offset"] == 1 and sorted(ex["values"]) == ["b", "x"]
    rule = PartitionHistoryRule()  # whole records through plain `check` (no `split`) too
    assert [a.name for a in rule.check([r for r in bad.records if "t/0" in rule.group_keys(r)], profile)] == [
        "inconsistent-offset"]
    good = written().fetch(S, 0, [(0, "a"), (1, "b")], hwm=3).poll(9, 2 * S, (0, "a"), (1, "b"), (2, "c"))
    assert found(good, profile) == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_a_follower_serving_a_shifted_log_is_a_duplicate(profile):
    # a divergent follower: "b" one offset further on, in a session fetch's `partitions`
    def session(h, recs):
        inv = {"broker": 3, "replica_id": -1, "rack": "r3", "session_id": 0, "session_epoch": 0, "version": 18,
               "partitions": [{"topic": "t", "partition": 0, "fetch_offset": 1}]}
        return h.op(7, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "partitions": [
            {"topic": "t", "partition": 0, "fetch_offset": 1, "error": "NONE", "high_watermark": 3,
             "log_start_offset": 0, "preferred_read_replica": -1, "records": [list(r) for r in recs]}]}, S)
    h = H().send("a", 0, 0).send("b", 1, 10)
    assert set(found(session(h, [(2, "b")]).poll(9, 2 * S, (0, "a"), (1, "b")), profile)) == {"duplicate"}
    h = H().send("a", 0, 0).send("b", 1, 10)
    assert found(session(h, [(1, "b")]).poll(9, 2 * S, (0, "a"), (1, "b")), profile) == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_fetch_records_are_not_consumer_reads(profile):
    # a point read far ahead proves no consumer passed offset 1: no lost-write, no poll-skip, no nonmonotonic-poll
    h = written().poll(9, S, (0, "a")).fetch(2 * S, 2, [(2, "c")], hwm=3).poll(9, 3 * S, (1, "b"))
    assert found(h, profile) == {}
    # ... but a consumer that did pass offset 1 lost the write, and the fetch proves offset 1 existed
    lost = H().send("a", 0, 0).fetch(S, 1, [(1, "b")], hwm=3).poll(9, 2 * S, (0, "a"), (2, "c"))
    assert set(found(lost, profile)) == {"poll-skip"}
    assert found(lost, profile)["poll-skip"][0]["skipped"] == 1
    assert found(H().send("a", 0, 0).poll(9, 2 * S, (0, "a"), (2, "c")), profile) == {}


# --- preferred read replica -----------------------------------------------------------------

def prr(pref=2, rack="r2", isr=((1, 2, 3), (1, 2, 3), (1, 2, 3)), leader=1, offline=(), fault=None, late=2 * S,
        epoch=5):
    """Broker 1's metadata before the fetch, right after it and `late` after it; the
    fetch to broker 1 at 1 s names `pref`."""
    h = H().meta(0, leader=leader, isr=isr[0], offline=offline)
    h.fetch(S, 0, [], broker=1, pref=pref, rack=rack, epoch=epoch)
    h.meta(S + S // 10, leader=leader, isr=isr[1], offline=offline)
    if fault:
        h.fault(S + S // 5, fault, [2])
    h.meta(S + late, leader=leader, isr=isr[2], offline=offline)
    return h


@pytest.mark.parametrize("profile", PROFILES)
def test_preferred_replica_from_a_follower_is_flagged(profile):
    assert set(found(prr(leader=3), profile)) == {"preferred-replica-violation"}
    assert found(prr(leader=1), profile) == {}
    assert found(prr(leader=3, pref=-1), profile) == {}
    # the broker accepted epoch 4: its partition was still in epoch 4, where it may have led
    assert found(prr(leader=3, epoch=4), profile) == {}


@pytest.mark.parametrize("profile", PROFILES)
def test_preferred_replica_out_of_the_isr_is_flagged(profile):
    out = ((1, 3),) * 3
    assert set(found(prr(isr=out), profile)) == {"preferred-replica-violation"}
    assert set(found(prr(offline=(2,)), profile)) == {"preferred-replica-violation"}
    # in the ISR in any answer of the span (the leader's cache may lag its partition state): fine
    assert found(prr(isr=((1, 3), (1, 3), (1, 2, 3))), profile) == {}
    # a fault in between, or a span as long as replica.lag.time.max.ms: it may have rejoined and left
    assert found(prr(isr=out, fault="kill"), profile) == {}
    assert found(prr(isr=out, late=5 * S), profile) == {}  # a span of 6.001 s
    # just inside the bound: a span of 5.701 s is still judged
    assert set(found(prr(isr=out, late=47 * S // 10), profile)) == {"preferred-replica-violation"}


@pytest.mark.parametrize("profile", PROFILES)
def test_an_isr_of_the_leaders_epoch_shown_by_another_broker_may_be_the_leaders(profile):
    """The leader's own metadata shows 2 out of the ISR throughout, but another broker showed
    the committed ISR of the same epoch under the same leader with 2 in it before the answer:
    the leader may hold that ISR from its AlterPartition response (an isolated leader never
    sees it in its own image). Just outside: another epoch, another leader, or only after."""
    out = ((1, 3),) * 3

    def with_other(t, epoch=5, leader=1, isr=(1, 2, 3)):
        h = prr(isr=out)
        return h.meta(t, broker=3, leader=leader, epoch=epoch, isr=isr)

    assert found(with_other(S // 2), profile) == {}
    assert set(found(with_other(S // 2, epoch=4), profile)) == {"preferred-replica-violation"}
    assert set(found(with_other(S // 2, leader=3), profile)) == {"preferred-replica-violation"}
    assert set(found(with_other(S // 2, isr=(1, 3)), profile)) == {"preferred-replica-violation"}
    assert set(found(with_other(3 * S), profile)) == {"preferred-replica-violation"}  # shown only 2 s later


@pytest.mark.parametrize("profile", PROFILES)
def test_preferred_replica_racks(profile):
    assert set(found(prr(rack=""), profile)) == {"preferred-replica-violation"}  # rackless client
    assert set(found(prr(pref=3), profile)) == {"preferred-replica-violation"}  # another rack
    assert set(found(prr(rack="r1"), profile)) == {"preferred-replica-violation"}  # leader in the client's rack
    assert found(prr(pref=-1, rack="r1"), profile) == {}


# --- fetch sessions (KIP-227 stepped by the model) ----------------------------------------------

def part(offset=0, hwm=10, start=0, recs=(), error="NONE", omitted=False, missing=False, pref=-1):
    e = {"topic": "t", "partition": 0, "fetch_offset": offset, "error": error}
    if omitted:
        return {**e, "omitted": True}
    e.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=start, preferred_read_replica=pref,
             records=[[o, f"v{o}"] for o in recs])
    return {**e, "missing": True} if missing else e


def sess(h, t, sid, epoch, rid, parts, top="NONE", sent=None, replica_id=-1):
    inv = {"broker": 1, "replica_id": replica_id, "rack": "r1", "session_id": sid, "session_epoch": epoch, "version": 18,
           "partitions": [{"topic": "t", "partition": 0, "fetch_offset": p["fetch_offset"]}
                          for p in (parts if sent is None else sent)]}
    return h.op(6, "fetch", inv, {"top_error": top, "response_session_id": rid, "partitions": parts}, t)


def opened(hwm=10, replica_id=-1):
    return sess(H(), 0, 0, 0, 42, [part(10, hwm=hwm)], replica_id=replica_id)


@pytest.mark.parametrize("profile", PROFILES)
def test_incremental_response_with_nothing_new_is_flagged(profile):
    same = sess(opened(), S, 42, 1, 42, [part(10, hwm=10)], sent=[])
    assert set(found(same, profile)) == {"fetch-session-violation"}
    moved = sess(opened(), S, 42, 1, 42, [part(10, hwm=11)], sent=[])
    assert found(moved, profile) == {}
    omitted = sess(opened(), S, 42, 1, 42, [part(10, omitted=True)], sent=[])
    assert found(omitted, profile) == {}


def test_incremental_response_with_a_preferred_replica_only_is_known_under_kafka():
    h = sess(opened(), S, 42, 1, 42, [part(10, hwm=10, pref=2)], sent=[])
    assert set(found(h, "kip")) == {"fetch-session-violation"}
    assert found(h, "kafka-4.3") == {} and set(found(h, "kafka-4.3", known=True)) == {"fetch-session-violation"}
    assert [ex["deviations"] for ex in found(h, "kafka-4.3", known=True)["fetch-session-violation"]] == [
        ["incremental-extra-partitions"]]


@pytest.mark.parametrize("profile", PROFILES)
def test_session_gone_and_refused(profile):
    # a consumer session may be evicted (a follower's new session may take its slot): not judged
    gone = sess(opened(), S, 42, 1, 0, [part(10, hwm=-1, start=-1, error="FETCH_SESSION_ID_NOT_FOUND")],
                top="FETCH_SESSION_ID_NOT_FOUND", sent=[])
    assert found(gone, profile) == {}
    # ...but the answer must carry session id 0
    named = sess(opened(), S, 42, 1, 42, [part(10, hwm=-1, start=-1, error="FETCH_SESSION_ID_NOT_FOUND")],
                 top="FETCH_SESSION_ID_NOT_FOUND", sent=[])
    assert set(found(named, profile)) == {"fetch-session-violation"}
    # a follower's (privileged) session, young and busy, may not be evicted by any new session
    evicted = sess(opened(replica_id=3), S, 42, 1, 0, [part(10, hwm=-1, start=-1, error="FETCH_SESSION_ID_NOT_FOUND")],
                   top="FETCH_SESSION_ID_NOT_FOUND", sent=[], replica_id=3)
    assert set(found(evicted, profile)) == {"fetch-session-violation"}
    # ... once idle longer than the eviction time (120 s) it may
    idle = sess(opened(replica_id=3), 121 * S, 42, 1, 0,
                [part(10, hwm=-1, start=-1, error="FETCH_SESSION_ID_NOT_FOUND")],
                top="FETCH_SESSION_ID_NOT_FOUND", sent=[], replica_id=3)
    assert found(idle, profile) == {}
    # a new session may be refused (the cache may be full of sessions we cannot see)
    assert found(sess(H(), 0, 0, 0, 0, [part(10)]), profile) == {}
    # a full response must carry every requested partition
    assert set(found(sess(H(), 0, 0, 0, 42, [part(10, missing=True)]), profile)) == {"fetch-session-violation"}


@pytest.mark.parametrize("profile", PROFILES)
def test_session_epochs_follow_the_model(profile):
    ok = sess(sess(opened(), S, 42, 1, 42, [part(10, omitted=True)], sent=[]), 2 * S, 42, 2, 42,
              [part(10, omitted=True)], sent=[])
    assert found(ok, profile) == {}
    replayed = sess(sess(opened(), S, 42, 1, 42, [part(10, omitted=True)], sent=[]), 2 * S, 42, 1, 42,
                    [part(10, omitted=True)], sent=[])
    assert set(found(replayed, profile)) == {"fetch-session-violation"}


# --- ListOffsets ----------------------------------------------------------------------------------

def offsets(*answers, fault=None, epochs=None):
    """ListOffsets answers of broker 1 (timestamp, offset[, isolation]) a second apart."""
    h = H()
    for i, a in enumerate(answers):
        if fault is not None and i == fault[0]:
            h.fault(i * S - S // 2, fault[1], [1])
        h.list_offsets(i * S, a[0], a[1], *a[2:], epoch=(epochs or {}).get(i, 5))
    return h


@pytest.mark.parametrize("profile", PROFILES)
def test_list_offsets_order(profile):
    flag = {"tiered-offset-violation"}
    assert set(found(offsets((-2, 50), (-4, 40)), profile)) == flag  # log start above local log start
    assert found(offsets((-2, 40), (-4, 40)), profile) == {}
    assert set(found(offsets((-4, 60), (-1, 59)), profile)) == flag  # local log start above the HWM
    assert found(offsets((-4, 60), (-1, 60)), profile) == {}
    assert set(found(offsets((-5, 80), (-6, 80)), profile)) == flag  # pending upload is last tiered + 1
    assert found(offsets((-5, 80), (-6, 81)), profile) == {}
    assert set(found(offsets((-1, 90, "read_committed"), (-1, 89, "read_uncommitted")), profile)) == flag
    assert found(offsets((-1, 90, "read_committed"), (-1, 90, "read_uncommitted")), profile) == {}
    assert found(offsets((-1, 90, "read_uncommitted"), (-1, 89, "read_committed")), profile) == {}  # LSO may lag


@pytest.mark.parametrize("profile", PROFILES)
def test_list_offsets_ends_never_go_back_within_an_epoch(profile):
    flag = {"tiered-offset-violation"}
    assert set(found(offsets((-1, 100), (-1, 99)), profile)) == flag | {"hwm-regression"}
    assert set(found(offsets((-2, 30), (-2, 29)), profile)) == flag
    assert found(offsets((-1, 100), (-1, 100), (-2, 30), (-2, 31)), profile) == {}
    assert found(offsets((-1, 100), (-1, 99), fault=(1, "truncate")), profile) == {}  # a fault that truncates
    assert "tiered-offset-violation" in found(offsets((-1, 100), (-1, 99), fault=(1, "pause")), profile)
    assert found(offsets((-1, 100), (-1, 99), epochs={1: 6}), profile) == {}  # another leader epoch


def test_pending_upload_below_last_tiered_plus_one_is_known_under_kafka():
    # Kafka answers max(last tiered + 1, log start): above last tiered + 1 when the log start is
    h = offsets((-6, 100), (-5, 95))
    assert set(found(h, "kip")) == {"tiered-offset-violation"}
    assert found(h, "kafka-4.3") == {} and set(found(h, "kafka-4.3", known=True)) == {"tiered-offset-violation"}
    assert [ex["deviations"] for ex in found(h, "kafka-4.3", known=True)["tiered-offset-violation"]] == [
        ["pending-upload-resolved-by-leader"]]
    # ...but never below the log start it answered before (that pair holds only under Kafka)
    low = offsets((-2, 100), (-6, 99))
    assert set(found(low, "kafka-4.3")) == {"tiered-offset-violation"}
    assert found(low, "kip") == {}


# --- `kipcheck check` on a hand-made history of every gap ------------------------------------

def _on_topic(record: dict, topic: str) -> dict:
    v = record["value"]
    return {**record, "value": {**v, "partitions": [{**p, "topic": topic} for p in v.get("partitions") or []]}}


def every_gap() -> list[dict]:
    """One history with each section-3 gap: a fetch serving another value, a preferred
    replica out of the ISR, a session response with nothing new, ListOffsets out of order."""
    parts = [written().fetch(S, 0, [(0, "a"), (1, "x")], hwm=3, proc=5).poll(9, 2 * S, (0, "a"), (1, "b"), (2, "c")),
             prr(isr=((1, 3),) * 3), sess(opened(), S, 42, 1, 42, [part(10)], sent=[]), offsets((-2, 50), (-4, 40))]
    # the session's partition is another topic's: HWM 10 on t/0 is more than its three sends can write
    parts[2].records[:] = [_on_topic(r, "s") for r in parts[2].records]
    records = sorted((r for h in parts for r in h.records), key=lambda r: r["time"])
    assert len({r["process"] for h in parts for r in h.records}) == 7  # no process shared by two parts
    return [dict(r, index=i) for i, r in enumerate(records)]


@pytest.mark.parametrize("profile", PROFILES)
def test_kipcheck_check_flags_every_gap(tmp_path, profile):
    write_jsonl(every_gap(), tmp_path / "history.jsonl")
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "check", str(tmp_path / "history.jsonl"),
                           "--profile", profile, "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(proc.stdout)
    assert {n for n, ex in verdict["anomalies"].items() if ex} == {
        "inconsistent-offset", "preferred-replica-violation", "fetch-session-violation", "tiered-offset-violation"}


def test_pending_upload_above_last_tiered_plus_one_is_known_only_as_far_as_the_log_start_reaches():
    """`pending-upload-resolved-by-leader`'s bound: a pending upload above the later last
    tiered + 1 can only be the log start then, so a lower log start (or local log start)
    answered after it puts it outside the deviation under every profile."""
    carrying = [p for p in PROFILES if p != "kip"]
    assert carrying
    for profile in carrying:
        at_log_start = offsets((-6, 150), (-5, 100), (-2, 150))
        assert found(at_log_start, profile) == {}
        assert set(found(at_log_start, profile, known=True)) == {"tiered-offset-violation"}
        for later_start in ((-2, 149), (-4, 120)):  # the log start then was below 150
            beyond = offsets((-6, 150), (-5, 100), later_start)
            assert set(found(beyond, profile)) == {"tiered-offset-violation"}, (profile, later_start)
    assert set(found(offsets((-6, 150), (-5, 100), (-2, 150)), "kip")) == {"tiered-offset-violation"}


@pytest.mark.parametrize("profile", PROFILES)
def test_a_preferred_replica_no_answer_of_the_epoch_lists_as_a_replica_is_flagged(profile):
    """Broker 7 is not a replica of t/0 in any metadata answer of epoch 5 (all list 1, 2, 3):
    naming it was accepted while the rule added the named replica to the replica set."""
    stranger = prr(pref=7, rack="r7")
    assert set(found(stranger, profile)) == {"preferred-replica-violation"}
    [example] = found(stranger, profile)["preferred-replica-violation"]
    assert "no metadata answer in epoch 5 lists 7 among the replicas [1, 2, 3]" in example["message"]
    assert found(prr(pref=2), profile) == {}  # a replica in the client's rack stays allowed
