"""Every KIP-392 deviation of `reference_model.profiles`, at its bound (docs/model.md,
"bound"): a hand-made history just inside it is *known* under each profile carrying the
deviation (and an anomaly under `kip`); one just outside it is an anomaly under `kip`
and under every such profile."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kipcheck.checks.rules.base import DEVIATIONS
from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from kipcheck.reference_model import profiles
from tests.support.histories import fetch, follower_history, follower_with_leader, history, leader_answers, meta, names, run


def carrying(deviation):
    return [name for name, p in sorted(profiles.PROFILES.items()) if p.allows(deviation)]


def both(records, profile):
    return run(ConsumerFetchRule(), records, profile) + run(HighWatermarkRule(), records, profile)


def inside(records, name, deviation):
    assert name in names(both(records, "kip"))
    assert carrying(deviation), deviation
    for p in carrying(deviation):
        found = both(records, p)
        assert names(found) == [] and name in names(found, known=True), (p, found)
        accepted = [a.details.get(DEVIATIONS) for a in found if a.known and a.name == name]
        assert all(d == [deviation] for d in accepted), (p, accepted)  # named: this deviation and no other


def outside(records, name, deviation):
    for p in ["kip", *carrying(deviation)]:
        assert name in names(both(records, p)), p


def sends(n, idempotent=True):
    return [(5, "send", {"topic": "t", "partition": 0, "key": f"v{i}", "value": f"v{i}", "idempotent": idempotent},
             {"offset": i}) for i in range(n)]


# --- response-hwm-sampled-before-read -------------------------------------------------
D = profiles.RESPONSE_HWM_SAMPLED_BEFORE_READ


KILL_2 = ("nemesis", "fault", {"fault": "kill", "targets": [2], "phase": "start"}, None)


def committed_elsewhere(offset, value, hwm):
    """Another broker's later answer showing `value` at `offset` below its HWM."""
    return fetch(offset, hwm=hwm, records=[offset], current_leader_epoch=4, broker=3) if value is None else \
        (1, "fetch", fetch(offset, broker=3, current_leader_epoch=4)[2],
         {"top_error": "NONE", "response_session_id": 0, "error": "NONE", "high_watermark": hwm, "log_start_offset": 0,
          "preferred_read_replica": -1, "records": [[offset, value]]})


@pytest.mark.parametrize("later", [
    [fetch(11, hwm=11, current_leader_epoch=3)],  # a later HWM of the same broker and epoch covers 10
    [],  # the broker was never asked again: nothing bounds its HWM at read time
    [KILL_2, fetch(11, hwm=10, current_leader_epoch=3)],  # the only lower HWM is from the broker's next life
    [fetch(11, hwm=10, current_leader_epoch=4)],  # ... or from the next epoch
    [fetch(11, hwm=10, current_leader_epoch=3, broker=3)],  # ... or from another broker
    [committed_elsewhere(10, None, 11)],  # another broker later shows the same record committed
])
def test_records_above_the_reported_hwm_that_no_later_answer_contradicts_are_known(later):
    inside(history(fetch(8, records=[8, 9, 10], current_leader_epoch=3), *later), "uncommitted-read", D)


@pytest.mark.parametrize("later", [
    [fetch(11, hwm=10, current_leader_epoch=3)],  # a later HWM of the same broker, epoch and life is not above 10
    [fetch(11, hwm=12, current_leader_epoch=3), fetch(11, hwm=10, current_leader_epoch=3)],  # covered, then not
    [committed_elsewhere(10, "other", 11)],  # offset 10 later held another committed record
    [KILL_2, committed_elsewhere(10, "other", 11)],  # ... even after the reading broker died
    [(5, "send", {"topic": "t", "partition": 0, "key": "k", "value": "other", "acks": "all", "idempotent": True},
      {"offset": 10})],  # ... or acknowledged with acks=all
])
def test_records_above_the_reported_hwm_contradicted_or_never_committed_are_uncommitted_reads(later):
    outside(history(fetch(8, records=[8, 9, 10], current_leader_epoch=3), *later), "uncommitted-read", D)


def test_a_record_read_below_its_hwm_is_judged_by_the_same_committed_evidence():
    """A read below its own HWM that disagrees with another committed record is
    inconsistent-offset's business (history_rules), not a read above the HWM: not flagged here."""
    h = history(fetch(8, hwm=11, records=[8, 9, 10], current_leader_epoch=3), committed_elsewhere(10, "other", 11))
    assert "uncommitted-read" not in names(both(h, "kip")) + names(both(h, "kafka-4.3"), known=True)


# --- follower-hwm-follows-leader ------------------------------------------------------
F = profiles.FOLLOWER_HWM_FOLLOWS_LEADER


def test_a_follower_going_back_once_after_an_election_is_known():
    inside(follower_history(10, 10, 9, 9, 11), "hwm-regression", F)


@pytest.mark.parametrize("hwms,old_epoch", [
    ((10, 9, 11), False),  # no earlier leader epoch seen on the broker: no election
    ((10, 9, 11, 10), True),  # back again after it rose in the new epoch
    ((10, 9, 8), True),  # back twice in one epoch
    ((10, 11, 9), True),  # it had already risen in the new epoch: following the new leader
])
def test_a_follower_going_back_outside_the_fetcher_bound_is_a_regression(hwms, old_epoch):
    outside(follower_history(*hwms, old_epoch=old_epoch), "hwm-regression", F)


def test_a_follower_going_back_no_deeper_than_its_new_leaders_hwm_is_known():
    inside(follower_with_leader(leader_answers(9, epoch=4)), "hwm-regression", F)  # as deep as the leader's
    inside(follower_with_leader(leader_answers(9)), "hwm-regression", F)
    # the leader's answers after the follower's last uncopied one: the copy may have come first
    inside(follower_with_leader(between=leader_answers(10)), "hwm-regression", F)
    # the leader's answers from an older epoch (it may have gone back in between), or before its kill
    inside(follower_with_leader(leader_answers(10, epoch=3)), "hwm-regression", F)
    inside(follower_with_leader(leader_answers(10, epoch=4, kill=True)), "hwm-regression", F)
    # the leader's answers in the new epoch, even before the follower's last uncopied one: Kafka
    # reads a follower's fetch before that fetch moves the leader's HWM, so the copy may be older
    # by the response's time in flight (the seed-25 run, docs/findings.md section 3)
    inside(follower_with_leader(leader_answers(10)), "hwm-regression", F)
    inside(follower_with_leader(leader_answers(8, 10)), "hwm-regression", F)


def test_a_follower_going_back_below_its_new_leaders_hwm_is_a_regression():
    """Issue 21 section 1: the drop was once per epoch, of any depth. Leader 1 had HWM 10 in
    epoch 4 and carried it into its epoch 5: 9 is deeper than any HWM it could have sent."""
    outside(follower_with_leader(leader_answers(10, epoch=4)), "hwm-regression", F)
    assert "below the HWM 10 its new leader 1 had proven by then" in " ".join(
        a.message for a in both(follower_with_leader(leader_answers(10, epoch=4)), "kafka-4.3"))


def test_a_leader_going_back_is_a_regression_whatever_the_profile():
    outside(history(meta(4, 3), fetch(0, hwm=8, current_leader_epoch=4), meta(5, 2),
                    fetch(0, hwm=10, current_leader_epoch=5), fetch(0, hwm=9, current_leader_epoch=5), meta(5, 2)),
            "hwm-regression", F)


# --- fetch-above-hwm-empty: the LEO the partition's sends allow -------------------------
E = profiles.FETCH_ABOVE_HWM_EMPTY
# 20 idempotent sends acknowledged at 0..19: no log can reach past 19 + 1 + 20 = 40


def test_none_and_empty_above_the_hwm_within_the_possible_leo_is_known():
    # 20 idempotent sends acknowledged at 0..19: the LEO is at most 20, each send counted once
    inside(history(*sends(20), fetch(20, hwm=10)), "wrong-fetch-error", E)


@pytest.mark.parametrize("offset", [21, 40, 10**9])
def test_none_and_empty_above_any_possible_leo_is_a_wrong_fetch_error(offset):
    # 40 was inside while acknowledged sends were counted twice (highest offset + every send)
    outside(history(*sends(20), fetch(offset, hwm=10)), "wrong-fetch-error", E)


def _in_flight(records, key, ns):
    """`records` with the send of `key` answered `ns` after its invoke (later records shifted)."""
    out, shift = [], 0
    for r in records:
        if r["f"] == "send" and r["value"]["key"] == key and r["type"] == "ok":
            shift = ns
        out.append({**r, "time": r["time"] + shift})
    return out


def test_non_idempotent_sends_may_append_once_per_attempt_their_time_in_flight_allows():
    quick = history(*sends(20, idempotent=False), fetch(40, hwm=10))  # one attempt each, never taken off
    inside(quick, "wrong-fetch-error", E)
    outside(history(*sends(20, idempotent=False), fetch(41, hwm=10)), "wrong-fetch-error", E)
    # one send in flight for 1 s: 1 + 1 s / 80 ms = 13 attempts, so 12 more appends are possible
    slow = lambda offset: _in_flight(history(*sends(20, idempotent=False), fetch(offset, hwm=10)), "v3", 10**9)
    inside(slow(52), "wrong-fetch-error", E)
    outside(slow(53), "wrong-fetch-error", E)



def test_a_non_idempotent_sends_second_attempt_needs_min_retry_spacing_in_flight():
    """`MIN_RETRY_SPACING_NS` at its edge: one send (v3) in flight exactly that long may have
    been appended twice, so NONE and empty at 41 (one above the 20 sends' one-attempt bound) is
    within the possible LEO; in flight 1 ns less, it had one attempt, and 41 is past any LEO."""
    from kipcheck.checks.rules.log_bounds import MIN_RETRY_SPACING_NS
    base = history(*sends(20, idempotent=False), fetch(41, hwm=10))
    invoked, done = (next(r["time"] for r in base if r["f"] == "send" and r["value"]["key"] == "v3" and r["type"] == t)
                     for t in ("invoke", "ok"))
    flight = lambda ns: _in_flight(base, "v3", ns - (done - invoked))
    inside(flight(MIN_RETRY_SPACING_NS), "wrong-fetch-error", E)
    outside(flight(MIN_RETRY_SPACING_NS - 1), "wrong-fetch-error", E)

# --- out-of-range-without-offsets: the LEO and log start the broker's answers prove -----
O = profiles.OUT_OF_RANGE_WITHOUT_OFFSETS


def oor(offset):
    return fetch(offset, error="OFFSET_OUT_OF_RANGE", hwm=-1, start=-1, current_leader_epoch=3)


def test_out_of_range_without_offsets_above_every_proven_leo_is_known():
    # HWM 10 proves LEO >= 10; 11 may be past the LEO
    inside(history(fetch(0, hwm=10, current_leader_epoch=3), oor(11), fetch(0, hwm=10, current_leader_epoch=3)),
           "wrong-fetch-error", O)


@pytest.mark.parametrize("before", [
    fetch(0, hwm=10, current_leader_epoch=3),  # HWM 10 before: the LEO was >= 10
    fetch(5, hwm=8, records=[5, 6, 7, 8, 9], current_leader_epoch=3),  # records up to 9 read before (kafka-style)
])
def test_out_of_range_for_a_proven_readable_offset_is_a_wrong_fetch_error(before):
    # a later answer shows log start 0, so 10 is in [log start, LEO]: just outside (11 is inside, above)
    records = history(before, oor(10), fetch(0, hwm=12, current_leader_epoch=3))
    for p in ["kip", *carrying(O)]:
        assert "wrong-fetch-error" in names(run(ConsumerFetchRule(), records, p)), p


def test_out_of_range_needs_the_log_start_bound_too():
    # no later answer shows the log start: it may have moved past 10 (retention), so no proof
    h = history(fetch(0, hwm=10, current_leader_epoch=3), oor(10))
    assert names(run(ConsumerFetchRule(), h, "kafka-4.3")) == []


# --- an in-sync follower's LEO reaches the leader's HWM (issue 21 §3-4) ---------------------
def isr_meta(isr=(1, 2, 3), broker=3, epoch=3, leader=1):
    return (9, "metadata", {"broker": broker, "topic": "t", "partition": 0},
            {"leader": leader, "leader_epoch": epoch, "isr": list(isr), "replicas": [1, 2, 3]})


def in_sync_follower(offset, after=None, leader_hwm=20, between=()):
    """Leader 1 of epoch 3 answered HWM `leader_hwm`; then follower 2, in the ISR by every
    metadata answer around it (the last one 2 s after), answered OFFSET_OUT_OF_RANGE (-1/-1)
    at `offset`, and later showed log start 0. `after`: the metadata answer 2 s later."""
    records = history(isr_meta(), fetch(0, hwm=leader_hwm, broker=1, current_leader_epoch=3),
                      fetch(0, hwm=12, current_leader_epoch=3), *between, oor(offset),
                      fetch(0, hwm=12, current_leader_epoch=3), after or isr_meta())
    for r in records[-2:]:
        r["time"] += 2_000_000_000  # the closing answer, asked after the metadata images caught up
    return records


def test_out_of_range_below_the_leaders_hwm_on_an_in_sync_follower_is_a_wrong_fetch_error():
    """The seeded `wrong-fetch-error-case1` slip on a follower: OFFSET_OUT_OF_RANGE (Kafka: -1/-1) at
    an offset in [its HWM, the leader's HWM] is case 1 (its LEO reached the leader's HWM), under
    every profile; above the leader's HWM it may be past the follower's LEO (known)."""
    for p in ["kip", *carrying(O)]:
        assert "wrong-fetch-error" in names(run(ConsumerFetchRule(), in_sync_follower(15), p)), p
        assert "wrong-fetch-error" in names(run(ConsumerFetchRule(), in_sync_follower(20), p)), p
    inside(in_sync_follower(21), "wrong-fetch-error", O)


@pytest.mark.parametrize("after,between", [
    (isr_meta(isr=(1, 3)), ()),  # the closing answer shows the follower out of the ISR
    (isr_meta(epoch=4), ()),  # another epoch by then
    (None, [("nemesis", "fault", {"fault": "pause", "targets": [2], "phase": "start"}, None)]),  # a fault in the span
])
def test_without_the_isr_proof_the_follower_may_lag_the_leader(after, between):
    inside(in_sync_follower(15, after=after, between=between), "wrong-fetch-error", O)


def test_a_follower_in_the_isr_answering_none_and_empty_below_the_leaders_hwm_is_case1():
    """KIP-392 case 1 on an in-sync follower: NONE and no records at its own HWM while the leader's
    HWM is above it is not the end of its log: OFFSET_NOT_AVAILABLE under `kip`, known under Kafka."""
    records = history(isr_meta(), fetch(0, hwm=20, broker=1, current_leader_epoch=3),
                      fetch(12, hwm=12, current_leader_epoch=3), isr_meta())
    records[-2]["time"] += 2_000_000_000
    records[-1]["time"] += 2_000_000_000
    inside(records, "wrong-fetch-error", profiles.FETCH_ABOVE_HWM_EMPTY)


# --- offsets-for-leader-epoch-uncapped ------------------------------------------------
U = profiles.OFFSETS_FOR_LEADER_EPOCH_UNCAPPED


def ofle(end):
    return (3, "offsets_for_leader_epoch", {"broker": 2, "replica_id": -1, "topic": "t", "partition": 0,
                                            "leader_epoch": 3, "current_leader_epoch": 3},
            {"error": "NONE", "end_offset": end, "leader_epoch": 3})


def test_end_offset_above_the_hwm_within_the_possible_leo_is_known():
    inside(history(*sends(20), ofle(20), fetch(0, hwm=10, current_leader_epoch=3)), "wrong-fetch-error", U)


def test_end_offset_above_any_possible_leo_is_a_wrong_fetch_error():
    outside(history(*sends(20), ofle(21), fetch(0, hwm=10, current_leader_epoch=3)), "wrong-fetch-error", U)


# --- hwm-capped-at-leo (Kafka never reaches case 2; a profile never forbids the KIP) ------------
C = profiles.HWM_CAPPED_AT_LEO


def test_case2_offset_not_available_below_the_hwm_is_the_kips_answer_under_every_profile():
    """Issue 21 §3: a profile widens the KIP, never narrows it. `hwm-capped-at-leo` only says
    Kafka never reaches case 2; the KIP's answer for it stays allowed under its profiles."""
    h = history(fetch(5, error="OFFSET_NOT_AVAILABLE", hwm=10))
    assert names(run(ConsumerFetchRule(), h, "kip")) == []  # KIP-392 case 2: LEO <= 5 < HWM 10
    for p in carrying(C):
        assert names(run(ConsumerFetchRule(), h, p)) == [], p
    # at or above the HWM: case 1, the KIP's OFFSET_NOT_AVAILABLE, under kip and under the profiles
    above = history(fetch(12, error="OFFSET_NOT_AVAILABLE", hwm=10))
    for p in ["kip", *carrying(C)]:
        assert names(run(ConsumerFetchRule(), above, p)) == [], p


# --- profiles: a Kafka version without one falls back, and the verdict says so ------------
def _judge(tmp_path, version):
    import json

    from kipcheck.checks.api import check
    records = history(fetch(8, records=[8, 9, 10], current_leader_epoch=3), fetch(11, hwm=11, current_leader_epoch=3))
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "config.json").write_text(json.dumps({"kafka_version": version}))
    return check(tmp_path)


def test_an_unread_newer_release_is_judged_under_the_newest_read_profile_and_says_so(tmp_path):
    from kipcheck.checks.cli_check import deviation_lines, summary
    from kipcheck.reference_model.profiles import newest_read_line
    newest = "kafka-%d.%d" % newest_read_line()
    verdict = _judge(tmp_path, "9.9.0")  # newer than every read line: what a new release looks like
    assert verdict["profile"] == newest and verdict["valid"] is True
    assert verdict["judged_as"]["release"] == "9.9.0" and verdict["judged_as"]["read"] is False
    assert verdict["profile_note"].startswith(f"judged as {newest}: 9.9 not read")
    assert f"profile note: judged as {newest}: 9.9 not read" in summary(verdict)
    # the deviation that accepted the read is listed as inherited, not confirmed
    assert verdict["counts"]["known"]["uncommitted-read"] == 1
    assert all(f"inherited from {newest}, not confirmed for 9.9" in line for line in deviation_lines(verdict))
    known_rows = [row for rows in verdict["conformance"].values() for row in rows.values() if row["status"] == "known deviation"]
    assert known_rows and all(f"(inherited from {newest}, not confirmed for 9.9)" in row["why"] for row in known_rows)


def test_a_read_release_and_an_older_unread_line_are_not_inherited(tmp_path):
    from kipcheck.checks.cli_check import summary
    read = _judge(tmp_path, "4.3.1")
    assert read["profile"] == "kafka-4.3" and "profile_note" not in read and "judged_as" not in read
    assert read["counts"]["known"]["uncommitted-read"] == 1
    assert not any("inherited" in row["why"] for rows in read["conformance"].values() for row in rows.values())
    older = _judge(tmp_path, "3.2.3")  # an older line without a profile keeps the KIP text
    assert older["profile"] == "kip" and "3.2.3" in older["profile_note"] and "judged_as" not in older
    assert "profile note" in summary(older) and older["counts"]["anomalies"]["uncommitted-read"] == 1


# --- the LEO bound at 100x the run length ------------------------------------------------
def _long_run(acknowledged: int, in_flight: int, answer_offset: int, later: int) -> list[dict]:
    """`acknowledged` idempotent sends at offsets 0.., `in_flight` more invoked and not yet
    answered, an empty NONE fetch answer at `answer_offset` (HWM 10), then `later` sends."""
    def send(i, done=True):  # a send in flight holds its process (one operation per process)
        return (5 if done else 100 + i, "send", {"topic": "t", "partition": 0, "key": f"v{i}", "value": f"v{i}", "idempotent": True},
                {"offset": i} if done else None)
    ops = [send(i) for i in range(acknowledged)]
    ops += [send(acknowledged + i, done=False) for i in range(in_flight)]
    ops += [fetch(answer_offset, hwm=10)]
    ops += [send(acknowledged + in_flight + i) for i in range(later)]
    return history(*ops)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(acknowledged=st.sampled_from([20, 200, 2000]), in_flight=st.integers(0, 64),
       beyond=st.integers(1, 10**6), later=st.sampled_from([0, 2000]))
def test_the_leo_bound_follows_the_writes_in_flight_not_the_run_length(acknowledged, in_flight, beyond, later):
    """10x and 100x the sends around a fixed answer: one past the LEO the history allows stays
    flagged, at it stays known (the bound is acknowledged + in flight, whatever came before)."""
    leo = acknowledged + in_flight
    flagged = both(_long_run(acknowledged, in_flight, leo + beyond, later), "kafka-4.3")
    assert "wrong-fetch-error" in names(flagged)
    accepted = both(_long_run(acknowledged, in_flight, leo, later), "kafka-4.3")
    assert names(accepted) == [] and "wrong-fetch-error" in names(accepted, known=True)
