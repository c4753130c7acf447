"""The raw-protocol checks (issue 10's section 3, and the model-stepped session rule of its
section 2): fetch records in the log checks, preferred replicas, fetch sessions, ListOffsets
order and tiered offsets. For each, a hand-made history the checker must flag under `kip`
and under the release profile, and a nearby one it must accept (builders: tests/support/raw_protocol.py).
Histories go through the local engine (`check_records`) unless a rule is named."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.rundir.history import write_jsonl
from kipcheck.checks.rules.history_rules import PartitionHistoryRule
from tests.support.raw_protocol import H, S, every_gap, killed, offsets, omitted_after, opened, part, prr, sess, written

PROFILES = ("kip", "kafka-4.3")


def found(h: H, profile: str, known: bool = False) -> dict:
    v = check_records(h.records, profile=profile)
    return {n: ex for n, ex in v["known" if known else "anomalies"].items() if ex}


# --- raw fetch records in the log checks -------------------------------------------------


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
    # a divergent follower: "b" one offset further on, in a session fetch's `partitions`; its read
    # at offset 1 began at 2, past the acknowledged offset 1: a poll-skip of the raw fetch too
    def session(h, recs):
        inv = {"broker": 3, "replica_id": -1, "rack": "r3", "session_id": 0, "session_epoch": 0, "version": 18,
               "partitions": [{"topic": "t", "partition": 0, "fetch_offset": 1}]}
        return h.op(7, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "partitions": [
            {"topic": "t", "partition": 0, "fetch_offset": 1, "error": "NONE", "high_watermark": 3,
             "log_start_offset": 0, "preferred_read_replica": -1, "records": [list(r) for r in recs]}]}, S)
    h = H().send("a", 0, 0).send("b", 1, 10)
    assert set(found(session(h, [(2, "b")]).poll(9, 2 * S, (0, "a"), (1, "b")), profile)) == {"duplicate", "poll-skip"}
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
def test_a_replica_every_broker_shows_out_of_the_isr_is_not_in_sync(profile):
    """Issue 21 section 3: broker 3 is killed; broker 2's metadata shows it out of the ISR
    (and offline) under leader 1 in epoch 5 every second around the fetch, the leader's own
    answers say nothing around it. The leader naming 3 was accepted: only its own answers
    within 6 s counted as proof."""
    bad = killed()
    assert set(found(bad, profile)) == {"preferred-replica-violation"}
    [example] = found(bad, profile)["preferred-replica-violation"]
    assert "every broker's metadata shows 3 out of the ISR or offline in epoch 5" in example["message"]
    assert set(found(killed(offline=()), profile)) == {"preferred-replica-violation"}  # out of the ISR, still listed
    # the leader's own answers span 14 s around the fetch (too long for its own proof): the others' decide
    sparse = killed()
    sparse.meta(3 * S, broker=1, isr=(1, 2)).meta(17 * S, broker=1, isr=(1, 2))
    sparse.records.sort(key=lambda r: r["time"])
    sparse.records[:] = [dict(r, index=i) for i, r in enumerate(sparse.records)]
    assert set(found(sparse, profile)) == {"preferred-replica-violation"}
    # near misses, each accepted: a gap of 6 s in the answers (it may have rejoined and left),
    assert found(killed(times=[*range(0, 8), *range(14, 21)]), profile) == {}
    # the chain starting less than a second before the fetch (the leader may not have replayed it yet),
    assert found(killed(times=range(10, 21), at=10 * S + S // 2), profile) == {}
    # nothing 1 s after it, an answer showing 3 in the ISR before the fetch (even of another broker),
    assert found(killed(times=range(0, 11)), profile) == {}
    assert found(killed(shows={4: (1, 2, 3)}), profile) == {}
    # a fault in the chain, another epoch or leader named by the answers, or a request epoch not accepted
    assert found(killed(fault=9), profile) == {}
    # a fault running on another node (the leader may be cut off from the controller, its image frozen)
    assert found(killed(running=("partition", 1)), profile) == {}
    assert set(found(killed(running=None), profile)) == {"preferred-replica-violation"}
    assert found(killed(epoch=4), profile) == {}
    assert found(killed(broker=2).meta(10 * S + S // 3, broker=3, leader=2, isr=(2,)), profile) == {}
    # once 3 shows back in the ISR after the fetch (a restarted broker rejoined), the fetch is still judged
    assert set(found(killed(shows={15: (1, 2, 3), 16: (1, 2, 3)}), profile)) == {"preferred-replica-violation"}


@pytest.mark.parametrize("profile", PROFILES)
def test_preferred_replica_racks(profile):
    assert set(found(prr(rack=""), profile)) == {"preferred-replica-violation"}  # rackless client
    assert set(found(prr(pref=3), profile)) == {"preferred-replica-violation"}  # another rack
    assert set(found(prr(rack="r1"), profile)) == {"preferred-replica-violation"}  # leader in the client's rack
    assert found(prr(pref=-1, rack="r1"), profile) == {}


# --- fetch sessions (KIP-227 stepped by the model) ----------------------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_incremental_response_with_nothing_new_is_flagged(profile):
    same = sess(opened(), S, 42, 1, 42, [part(10, hwm=10)], sent=[])
    assert set(found(same, profile)) == {"fetch-session-violation"}
    moved = sess(opened(), S, 42, 1, 42, [part(10, hwm=11)], sent=[])
    assert found(moved, profile) == {}
    omitted = sess(opened(), S, 42, 1, 42, [part(10, omitted=True)], sent=[])
    assert found(omitted, profile) == {}



@pytest.mark.parametrize("profile", PROFILES)
def test_an_incremental_response_leaving_out_a_partition_whose_hwm_the_broker_had_moved_is_flagged(profile):
    """Issue 21 section 3 (KIP-227 "Incremental Fetch Responses"): the session last sent HWM
    10 with nothing at offset 10, so leaving t/0 out looked fine; but broker 1 had answered
    HWM 12 (or served offset 11) in epoch 5 before the request was sent, and its HWM does not
    go back in an epoch: the HWM changed, so the partition had to be in the response."""
    bad = omitted_after()
    assert set(found(bad, profile)) == {"fetch-session-violation"}
    [example] = found(bad, profile)["fetch-session-violation"]
    assert "its HWM had changed since the session last sent it (10)" in example["message"]
    assert example["rule"] == "kip227.may_omit"
    # records served past the session's HWM, under an HWM sampled before the read (10)
    assert "fetch-session-violation" in found(omitted_after(hwm=10, recs=[(10, "a"), (11, "b")]), profile)
    # across the session's own requests: its full response served offsets 10 and 11 with an HWM
    # of 10 sampled before the read, so the HWM had passed 11 before the next request
    own = sess(H().meta(0), S // 2, 0, 0, 42, [part(10, hwm=10, recs=(10, 11))])
    own = sess(own, 2 * S, 42, 1, 42, [part(10, omitted=True)], sent=[]).meta(3 * S)
    assert "fetch-session-violation" in found(own, profile)
    # near misses, each accepted: the same HWM as the session's, an answer made after the request
    # was sent, in another epoch, across a kill, or with the request's epoch not proven
    assert found(omitted_after(hwm=10), profile) == {}
    assert found(omitted_after(when=2 * S + S // 2), profile) == {}
    assert found(omitted_after(epoch=4), profile) == {}
    assert found(omitted_after(fault="kill"), profile) == {}
    assert found(omitted_after(meta_after=2 * S - S // 10), profile) == {}


def test_a_follower_after_an_epoch_change_may_still_go_back_under_kafka():
    """`follower-hwm-follows-leader`: broker 1 is a follower (leader 2) that saw epoch 4 and
    whose HWM had not risen in epoch 5: it may still drop to a new leader's HWM, which may be
    the session's, so under kafka-4.3 the floor proves nothing (known); under `kip` it does."""
    h = omitted_after(earlier_epoch=True, leader=2)
    assert set(found(h, "kip")) == {"fetch-session-violation"}
    assert found(h, "kafka-4.3") == {}
    assert set(found(h, "kafka-4.3", known=True)) == {"fetch-session-violation"}
    # a known leader may not go back: flagged under both
    assert set(found(omitted_after(earlier_epoch=True), "kafka-4.3")) == {"fetch-session-violation"}


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


@pytest.mark.parametrize("profile", PROFILES)
def test_preferred_replica_out_of_the_isr_at_both_edges_of_its_span(profile):
    """Broker 1's answers show replica 2 out of the ISR (metadata invoked at 0, the fetch at 1 s
    completing 1 ms later, the last answer at 1 s + `late`, each taking 1 ms). `ISR_SPAN_NS`:
    answers spanning 1 ns less are judged and flagged, spanning it exactly they are not (it may
    have rejoined and left). `IMAGE_LAG_NS`: the span must reach an answer invoked more than it
    after the fetch completed; one invoked exactly then closes nothing, and nothing is judged."""
    from kipcheck.checks.rules.replica_rules import IMAGE_LAG_NS, ISR_SPAN_NS
    ms, out = S // 1000, ((1, 3),) * 3
    span_late = ISR_SPAN_NS - S - ms  # the last answer completes ISR_SPAN_NS after the first's invoke
    assert set(found(prr(isr=out, late=span_late - 1), profile)) == {"preferred-replica-violation"}
    assert found(prr(isr=out, late=span_late), profile) == {}
    lag_late = ms + IMAGE_LAG_NS  # invoked IMAGE_LAG_NS after the fetch completed
    assert set(found(prr(isr=out, late=lag_late + 1), profile)) == {"preferred-replica-violation"}
    assert found(prr(isr=out, late=lag_late), profile) == {}
