"""KIP-32 LogAppendTime stamps against the clocks the history shows (checks/rules/timestamp_rules.py).

Histories are written by hand with real-looking times (ms), so each case names the send, its
acknowledgement, the read and the clock fault that decide whether a stamp may be what it is."""
from __future__ import annotations

from hypothesis import assume, given, settings, strategies as st

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.timestamp_rules import CLOCK_LAG_MS, SLEW_PER_MS, TOLERANCE_MS

MS = 1_000_000  # history time is ns


class Builder:
    def __init__(self):
        self.records = []

    def add(self, at_ms, process, type_, f, value):
        self.records.append({"index": len(self.records), "time": int(at_ms * MS), "process": process,
                             "type": type_, "f": f, "value": value})
        return self

    def send(self, sent_ms, acked_ms, offset, value=None, process=1, outcome="ok"):
        v = {"topic": "t", "partition": 0, "key": "k", "value": value or f"1-{offset}"}
        self.add(sent_ms, process, "invoke", "send", v)
        if acked_ms is not None:
            self.add(acked_ms, process, outcome, "send", {**v, "offset": offset} if outcome == "ok" else v)
        return self

    def poll(self, at_ms, *reads, process=9, wall=None, values=None):
        """reads: (offset, stamp ms) of partition t/0, values as `send` names them (or `values`);
        `wall`: the poll's wall_minus_history_ms."""
        self.add(at_ms - 1, process, "invoke", "poll", {"topic": "t"})
        recs = [["t", 0, o, (values or {}).get(o, f"1-{o}")] for o, _ in reads]
        extra = {} if wall is None else {"wall_minus_history_ms": wall}
        return self.add(at_ms, process, "ok", "poll", {"topic": "t", "records": recs,
                                                        "append_ms": [s for _, s in reads], **extra})

    def by_time(self, at_ms, target_unix_ms, answer):
        """The prober's ListOffsets of t/0 for a real timestamp, answered `answer`."""
        v = {"broker": 1, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "t", "partition": 0,
             "timestamp": target_unix_ms, "current_leader_epoch": 0}
        self.add(at_ms - 2, "prober", "invoke", "list_offsets", v)
        return self.add(at_ms, "prober", "ok", "list_offsets", {**v, "version": 1, "error": "NONE", "offset": answer,
                                                                 "leader_epoch": 0})

    def clock(self, kind, start_ms, stop_ms, skew_s, target=2):
        params = {"fault": kind, "targets": [target], "phase": "start"}
        self.add(start_ms, "nemesis", "invoke", "fault", params)
        self.add(start_ms + 5, "nemesis", "ok", "fault", {**params, "skew_s": skew_s})
        stop = {"fault": kind, "targets": [target], "phase": "stop"}
        self.add(stop_ms - 5, "nemesis", "invoke", "fault", stop)
        return self.add(stop_ms, "nemesis", "ok", "fault", stop)

    def verdict(self):
        return check_records(self.records)


def violations(verdict):
    return verdict["anomalies"].get("append-time-violation", [])


def test_a_stamp_between_the_send_and_its_acknowledgement_holds_and_counts():
    v = Builder().send(1000, 1040, 0).send(1010, 1050, 1).poll(1100, (0, 1020), (1, 1049)).verdict()
    assert v["valid"] is True and not violations(v)
    assert v["coverage"]["kip32.append_time_allowed"]["observations"] == 1
    assert v["conformance"]["KIP-32"]["kip32.append_time_allowed"]["status"] == "holds"


def test_a_stamp_seconds_after_the_acknowledgement_without_a_skewed_clock_is_a_violation():
    v = Builder().send(1000, 1040, 0).poll(9000, (0, 6000)).verdict()
    [a] = violations(v)
    assert v["valid"] is False and a["offset"] == 0 and a["stamp_ms"] == 6000 and a["rule"] == "kip32.append_time_allowed"
    assert v["conformance"]["KIP-32"]["kip32.append_time_allowed"]["status"] == "fails"


def test_a_stamp_before_the_send_without_a_skewed_clock_is_a_violation():
    assert violations(Builder().send(5000, 5040, 0).poll(6000, (0, 4000)).verdict())


def test_a_skewed_leaders_stamp_holds_while_its_clock_fault_lasts():
    b = Builder().clock("clock-skew", 500, 20_000, 120).send(1000, 1040, 0).poll(2000, (0, 121_020))
    assert not violations(b.verdict())


def test_the_same_stamp_after_the_clock_was_given_back_is_a_violation():
    b = Builder().clock("clock-skew", 500, 800, 120).send(1000 + CLOCK_LAG_MS, 1040 + CLOCK_LAG_MS, 0)
    assert violations(b.poll(5000, (0, 121_020 + CLOCK_LAG_MS)).verdict())


def test_a_clock_behind_moves_the_lower_bound_too():
    b = Builder().clock("clock-strobe", 500, 20_000, -300).send(1000, 1040, 0).poll(2000, (0, 1020 - 300_000))
    assert not violations(b.verdict())
    assert violations(Builder().send(1000, 1040, 0).poll(2000, (0, 1020 - 300_000)).verdict())


def test_a_skew_of_another_size_does_not_excuse_a_stamp():
    b = Builder().clock("clock-skew", 500, 20_000, 30).send(1000, 1040, 0).poll(2000, (0, 1020 + 120_000))
    assert violations(b.verdict())


def test_a_polled_stamp_is_flagged_one_ms_outside_its_window_and_held_one_inside():
    """Both edges of the window a poll's stamp is judged by (the rule's per-record hot path):
    the send less the allowance, the acknowledgement plus it."""
    sent, acked, read = 1000, 1040, 1200
    allowance = TOLERANCE_MS + int(SLEW_PER_MS * (read - sent))
    for stamp, flagged in ((sent - allowance, False), (sent - allowance - 1, True),
                           (acked + allowance, False), (acked + allowance + 1, True)):
        # another record read just before, so the judged one is not the poll's first
        b = Builder().send(990, 995, 0, value="x").send(sent, acked, 1).poll(read, (0, 992), (1, stamp))
        assert [a["offset"] for a in violations(b.verdict())] == ([1] if flagged else []), stamp


def test_a_record_read_before_its_acknowledgement_is_bounded_by_the_read():
    assert not violations(Builder().send(1000, 1500, 0).poll(1200, (0, 1100)).verdict())
    # appended after it was read: impossible on a right clock
    assert violations(Builder().send(1000, 5000, 0).poll(1200, (0, 1200 + TOLERANCE_MS + 50)).verdict())


def test_an_unacknowledged_send_bounds_its_stamp_from_below_and_by_the_read():
    b = Builder().send(1000, 4000, 0, outcome="info").poll(5000, (0, 4500))
    assert not violations(b.verdict())
    assert violations(Builder().send(1000, 4000, 0, outcome="info").poll(5000, (0, 900 - TOLERANCE_MS)).verdict())


def test_a_record_no_send_wrote_is_left_to_the_other_rules():
    v = Builder().poll(5000, (0, 1)).verdict()
    assert not violations(v)


def test_a_read_without_stamps_decides_nothing():
    b = Builder().send(1000, 1040, 0)
    b.add(1099, 9, "invoke", "poll", {"topic": "t"}).add(1100, 9, "ok", "poll", {"topic": "t", "records": [["t", 0, 0, "1-0"]]})
    v = b.verdict()
    assert v["coverage"]["kip32.append_time_allowed"]["observations"] == 0 and not violations(v)


@settings(max_examples=60, deadline=None)
@given(read_after_s=st.integers(min_value=1, max_value=100 * 120 * 10), drift=st.floats(min_value=-1.0, max_value=1.0),
       beyond=st.booleans())
def test_the_slew_allowance_holds_at_100x_the_run_length(read_after_s, drift, beyond):
    """A record read long after its send (a 120 s run's final read, at up to 1000x that) with the
    wall clock slewed by up to 500 ppm meanwhile still holds; a stamp past that allowance fails."""
    read_ms = 1040 + read_after_s * 1000
    allowance = TOLERANCE_MS + SLEW_PER_MS * (read_ms - 1000)
    assume(abs(drift) > 0.01)
    stamp = 1040 + drift * (allowance - 2) if not beyond else 1040 + (1 if drift > 0 else -1) * (allowance + 45)
    assume(stamp < read_ms - TOLERANCE_MS)  # a stamp after the read is bounded by the read instead
    v = Builder().send(1000, 1040, 0).poll(read_ms, (0, int(stamp))).verdict()
    assert bool(violations(v)) == beyond


def test_a_synthetic_history_holds_and_one_stamp_a_minute_late_is_found():
    from tests.synthetic import generate
    records = list(generate(20_000, seed=3))
    clean = check_records(records)
    assert clean["coverage"]["kip32.append_time_allowed"]["observations"] > 100 and not violations(clean)
    poll = next(r for r in records if r["f"] == "poll" and r["type"] == "ok" and r["value"]["append_ms"])
    poll["value"]["append_ms"][0] += 60_000
    [found] = violations(check_records(records))
    assert found["indices"] == [poll["index"]] and found["offset"] == poll["value"]["records"][0][2]


def test_offsets_acknowledged_out_of_order_or_far_from_zero_are_judged():
    far = 5_000_000_000  # an old topic's offsets: stored from the first one acknowledged, not from 0
    b = Builder().send(1000, 1100, far + 1, value=f"1-{far + 1}").send(1010, 1150, far, value=f"1-{far}")
    b.poll(2000, (far, 1120), (far + 1, 1050))
    assert not violations(b.verdict())
    b = Builder().send(1000, 1100, far + 1, value=f"1-{far + 1}").send(1010, 1150, far, value=f"1-{far}")
    assert [a["offset"] for a in violations(b.poll(2000, (far, 1500), (far + 1, 1050)).verdict())] == [far]


# -- ListOffsets by timestamp (kip32.offset_for_time_allowed) ---------------------------------
WALL = 1_790_000_000_000  # Unix ms at the history's time 0


def time_offsets(verdict):
    return verdict["anomalies"].get("time-offset-violation", [])


def five_in_order(b=None):
    """Offsets 0..4 sent 10 ms apart from 1000 ms, stamped 5 ms after each send, read once."""
    b = b or Builder()
    for o in range(5):
        b.send(1000 + 10 * o, 1008 + 10 * o, o)
    return b.poll(1200, *[(o, 1005 + 10 * o) for o in range(5)], wall=WALL)


def test_the_first_offset_at_or_after_the_time_holds_and_counts():
    v = five_in_order().by_time(1300, WALL + 1020, 2).verdict()
    assert v["valid"] is True and not time_offsets(v)
    assert v["coverage"]["kip32.offset_for_time_allowed"]["observations"] == 1
    assert v["conformance"]["KIP-32"]["kip32.offset_for_time_allowed"]["status"] == "holds"


def test_an_answer_past_a_record_stamped_at_or_after_the_time_is_a_violation():
    v = five_in_order().by_time(1300, WALL + 1020, 3).verdict()
    [a] = time_offsets(v)
    assert v["valid"] is False and a["offset"] == 3 and a["highest_stamp_below"] == WALL + 1025
    assert a["rule"] == "kip32.offset_for_time_allowed"


def test_an_answer_at_a_record_stamped_before_the_time_is_a_violation():
    [a] = time_offsets(five_in_order().by_time(1300, WALL + 1020, 1).verdict())
    assert a["stamp_at"] == WALL + 1015 and a["highest_stamp_below"] == WALL + 1005


def test_stamps_out_of_order_under_a_clock_set_back_still_ask_for_the_first_at_or_after():
    # the leader's clock is 1 s behind for offsets 2 and 3: stamps 1005, 1015, 30, 40, 1045
    b = Builder().clock("clock-skew", 1018, 1039, -1)
    for o in range(5):
        b.send(1000 + 10 * o, 1008 + 10 * o, o)
    stamps = [1005, 1015, 25, 35, 1045]
    b.poll(1200, *[(o, stamps[o]) for o in range(5)], wall=WALL)
    assert not violations(b.verdict())
    assert not time_offsets(b.by_time(1300, WALL + 30, 0).verdict())  # 1005 at offset 0 is already after 30
    b2 = Builder(); b2.records = list(b.records)
    assert time_offsets(b2.by_time(1300, WALL + 30, 3).verdict())  # offset 0's 1005 lies below it


def test_a_partition_where_an_acknowledged_offset_was_read_with_another_record_is_left_alone():
    b = five_in_order().poll(1250, (2, 1100), values={2: "other"}, wall=WALL)
    assert not time_offsets(b.by_time(1300, WALL + 1020, 4).verdict())


def test_a_read_without_the_wall_offset_leaves_answers_unjudged():
    b = Builder()
    for o in range(3):
        b.send(1000 + 10 * o, 1008 + 10 * o, o)
    b.poll(1200, *[(o, 1005 + 10 * o) for o in range(3)])  # a history of the previous format
    assert not time_offsets(b.by_time(1300, WALL + 1010, 2).verdict())


@given(st.integers(1, 100), st.integers(0, 4))
@settings(max_examples=20, deadline=None)
def test_the_bound_does_not_grow_with_the_run(scale, first):
    """Stamps compared as Unix ms: at 100x the run's length the tolerance is the same 2 ms."""
    assume(first < 4)
    t0 = 1000 * 3600 * scale  # up to 100 hours into the run
    b = Builder()
    for o in range(5):
        b.send(t0 + 10 * o, t0 + 8 + 10 * o, o)
    b.poll(t0 + 200, *[(o, t0 + 5 + 10 * o) for o in range(5)], wall=WALL)
    target = WALL + t0 + 5 + 10 * first - 3  # record `first` stamped 3 ms after the target: past the 2 ms blind zone
    rec = list(b.records)
    assert not time_offsets(b.by_time(t0 + 300, target, first).verdict())
    b2 = Builder(); b2.records = rec
    assert time_offsets(b2.by_time(t0 + 300, target, first + 1).verdict())


def test_the_by_time_tolerance_edge_is_flagged_just_outside_and_accepted_just_inside():
    """Offset 2 stamped WALL+1025: an answer past it is flagged from a target 2 ms (the tolerance)
    below its stamp on, accepted from 1 ms below; the answer at it is flagged once its stamp lies
    2 ms before the target."""
    def flagged(target, answer):
        return bool(time_offsets(five_in_order().by_time(1300, WALL + target, answer).verdict()))
    assert flagged(1025 - 2, 3) and not flagged(1025 - 1, 3)
    assert flagged(1025 + 2, 2) and not flagged(1025 + 1, 2)


# -- ListOffsets for the largest timestamp (kip734.max_timestamp_answer_allowed) ------------------

def max_timestamp(b, at_ms, answer):
    """The prober's ListOffsets of t/0 for the largest timestamp (-3), answered `answer`."""
    v = {"broker": 1, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "t", "partition": 0,
         "timestamp": -3, "current_leader_epoch": 0}
    b.add(at_ms - 2, "prober", "invoke", "list_offsets", v)
    return b.add(at_ms, "prober", "ok", "list_offsets", {**v, "version": 7, "error": "NONE", "offset": answer,
                                                         "leader_epoch": 0, "found_timestamp": WALL + 1050})


def one_batch_of_five(b=None, reads=((0, 1, 2, 3, 4),)):
    """Offsets 0..4, one LogAppendTime batch (every record stamped 1050), read in the polls `reads`."""
    b = b or Builder()
    for o in range(5):
        b.send(1000 + o, 1060, o)
    for i, offsets in enumerate(reads):
        b.poll(1200 + 10 * i, *[(o, 1050) for o in offsets], wall=WALL)
    return b


def max_flagged(answer, reads=((0, 1, 2, 3, 4),)):
    return [a for a in time_offsets(max_timestamp(one_batch_of_five(reads=reads), 1300, answer).verdict())
            if a["rule"] == "kip734.max_timestamp_answer_allowed"]


def test_the_first_record_of_the_largest_timestamp_holds_and_counts():
    v = max_timestamp(one_batch_of_five(), 1300, 0).verdict()
    assert v["valid"] is True and not time_offsets(v)
    assert v["coverage"]["kip734.max_timestamp_answer_allowed"]["observations"] == 1


def test_the_last_record_of_a_batch_stamped_alike_is_flagged_with_the_first_named():
    """KAFKA-16310's shape (3.3.1-3.7.x answered the batch's last offset): flagged one offset past
    the first of its stamp, and at the last."""
    [a] = max_flagged(4)
    assert a["first_with_its_stamp"] == 0 and a["offset"] == 4
    [b] = max_flagged(1)
    assert b["first_with_its_stamp"] == 0


def test_records_stamped_alike_but_read_in_two_polls_prove_nothing():
    """Two polls map their stamps through their own clock readings: equal numbers there are not
    proven equal stamps, so the answer is not judged by them."""
    flagged = max_flagged(4, reads=((0, 1), (2, 3, 4)))
    assert [a["first_with_its_stamp"] for a in flagged] == [2]  # proven from offset 2 on only
    assert not max_flagged(2, reads=((0, 1), (2, 3, 4)))


def test_a_withheld_answer_and_a_rewritten_partition_are_not_judged():
    assert not max_flagged(-1)
    b = one_batch_of_five().poll(1250, (3, 1100), values={3: "other"}, wall=WALL)
    assert not [a for a in time_offsets(max_timestamp(b, 1300, 4).verdict())
                if a["rule"] == "kip734.max_timestamp_answer_allowed"]


def test_a_stamp_that_differs_from_the_one_below_ends_the_tie():
    """Offsets 0-1 stamped 1040, 2-4 stamped 1050: the first of 1050 is offset 2."""
    b = Builder()
    for o in range(5):
        b.send(1000 + o, 1060, o)
    b.poll(1200, *[(o, 1040 if o < 2 else 1050) for o in range(5)], wall=WALL)
    rec = list(b.records)
    assert not time_offsets(max_timestamp(b, 1300, 2).verdict())
    b2 = Builder(); b2.records = rec
    [a] = time_offsets(max_timestamp(b2, 1300, 3).verdict())
    assert a["first_with_its_stamp"] == 2


def test_the_3x_shallow_offset_is_known_there_and_flagged_under_the_kip():
    """Kafka 3.3-3.7 answer the last of a batch's records stamped alike (KAFKA-16310): known under
    their profiles, a violation under `kip` and from 3.8 on, whose profile lacks the deviation."""
    def judged(profile):
        b = max_timestamp(one_batch_of_five(), 1300, 4)
        return check_records(b.records, profile=profile)
    kip, old, fixed = judged("kip"), judged("kafka-3.7"), judged("kafka-3.8")
    assert [a["offset"] for a in time_offsets(kip)] == [4] and kip["valid"] is False
    assert old["valid"] is True and not time_offsets(old)
    assert old["known"]["time-offset-violation"][0]["deviations"] == ["max-timestamp-shallow-offset"]
    assert fixed["valid"] is False and time_offsets(fixed)


def test_a_named_record_stamped_otherwise_than_the_answer_is_flagged_under_every_profile():
    """Beyond the deviation's bound: the record the answer names must carry the answered timestamp,
    within 2 ms (stamps are Unix ms read back through the poll's clock mapping); 3 ms off is flagged
    under kafka-3.7 too, 2 ms off is not."""
    def answered(at_unix_ms, profile):
        b = one_batch_of_five()
        v = {"broker": 1, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "t", "partition": 0,
             "timestamp": -3, "current_leader_epoch": 0}
        b.add(1298, "prober", "invoke", "list_offsets", v)
        b.add(1300, "prober", "ok", "list_offsets", {**v, "version": 7, "error": "NONE", "offset": 0,
                                                      "leader_epoch": 0, "found_timestamp": at_unix_ms})
        return [a for a in time_offsets(check_records(b.records, profile=profile))
                if a["rule"] == "kip734.max_timestamp_answer_allowed"]
    for profile in ("kip", "kafka-3.7"):
        [a] = answered(WALL + 1050 + 3, profile)
        assert a["stamp_at"] == WALL + 1050 and a["answered_timestamp"] == WALL + 1053
        assert not answered(WALL + 1050 - 2, profile)


def test_a_clock_windows_edges_are_clock_lag_wide_and_a_stamp_just_past_them_is_flagged():
    """A 120 s skew from a fault started (invoked) at 5000 ms and healed at 8000 ms excuses a
    stamp whose send overlaps the window: from `CLOCK_LAG_MS` before the start's invoke to
    `CLOCK_LAG_MS` after the stop's completion (to the completion itself when the start says the
    heal waited out libfaketime's re-read, `settle_ms`). The same stamp on a send 1 ms outside
    either edge is an append-time violation."""
    start, stop, skew_ms = 5000, 8000, 120_000

    def flagged(sent, settled=False):
        b = Builder()
        before = sent + 40 < start
        if before:
            b.send(sent, sent + 40, 0)
        b.clock("clock-skew", start, stop, skew_ms // 1000)
        if settled:
            for r in b.records:
                if r["f"] == "fault" and r["type"] == "ok" and r["value"]["phase"] == "start":
                    r["value"]["settle_ms"] = CLOCK_LAG_MS
        if not before:
            b.send(sent, sent + 40, 0)
        read = (stop if before else sent) + 1000  # records in time order
        return bool(violations(b.poll(read, (0, sent + 20 + skew_ms)).verdict()))

    first = start - CLOCK_LAG_MS  # the window's start; a send acknowledged before it never met the skew
    assert not flagged(first - 40) and flagged(first - 41)
    last = stop + CLOCK_LAG_MS  # the window's end without `settle_ms`
    assert not flagged(last) and flagged(last + 1)
    assert not flagged(stop, settled=True) and flagged(stop + 1, settled=True)
