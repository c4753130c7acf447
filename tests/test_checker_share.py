"""KIP-932 share groups (`share-double-acquire`, `share-accepted-redelivered`,
`share-delivery-limit-exceeded`, `share-record-lost`, checks/rules/share_rules.py) on hand-made histories: each rule
flags what is just outside its bound and accepts what is just inside. Times are ms here."""
from __future__ import annotations

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.kip1166_rules import SETTLE_NS
from kipcheck.checks.rules.share_rules import (DOUBLE, LEADER_SLACK_NS, LIMIT, LOST, REDELIVERED, SHARE_GROUPS,
                                               ShareGroupRule)
from kipcheck.reference_model import kip932

A, B = 21, 22  # two share consumers of group "sg"
LOCK, LIMIT_N = 5000, 3
MS = 1_000_000


class ShareHistory:
    """Records at explicit times (ms), indices in time order once `records` is read."""

    def __init__(self):
        self._records: list[dict] = []

    def _add(self, ms, process, type_, f, value):
        self._records.append({"time": int(ms * MS), "process": process, "type": type_, "f": f, "value": value})
        return self

    def subscribe(self, process, at, reset="earliest"):
        v = {"group": "sg", "topics": ["t"], "offset_reset": reset}
        return self._add(at, process, "invoke", "share_subscribe", v)._add(at, process, "ok", "share_subscribe", v)

    def poll(self, process, asked, answered, offset=0, count=1, appended=None):
        v = {"group": "sg", "lock_duration_ms": LOCK, "delivery_count_limit": LIMIT_N}
        self._add(asked, process, "invoke", "share_poll", v)
        stamp = {} if appended is None else {"append_ms": [appended], "wall_minus_history_ms": 0}
        return self._add(answered, process, "ok", "share_poll",
                         {**v, "records": [["t", 0, offset, f"v{offset}"]], "delivery_counts": [count], **stamp})

    def ack(self, process, kind, invoked, answered=None, offset=0, type_="ok", refused=False):
        v = {"group": "sg", "mode": "sync", "acks": [["t", 0, offset, kind]]}
        self._add(invoked, process, "invoke", "share_ack", v)
        if answered is not None:
            self._add(answered, process, type_, "share_ack",
                      {**v, **({"partition_errors": {"t/0": "INVALID_RECORD_STATE"}} if refused else {})})
        return self

    def send(self, acked, offset, topic="t", **extra):
        """A producer's send of offset `offset`, acknowledged at `acked` ms."""
        v = {"topic": topic, "partition": 0, "value": f"v{offset}", **extra}
        return self._add(acked - 2, 1, "invoke", "send", v)._add(acked, 1, "ok", "send", {**v, "offset": offset})

    def async_ack(self, lane, consumer, kind, invoked, answered, offset=0):
        """An async acknowledgement under the client's second process `lane`, naming its consumer."""
        v = {"group": "sg", "mode": "async", "acks": [["t", 0, offset, kind]], "consumer": consumer}
        return self._add(invoked, lane, "invoke", "share_ack", v)._add(answered, lane, "ok", "share_ack", v)

    def fault(self, start, stop):
        v = {"fault": "kill", "targets": [1], "effects": ["stops-node"]}
        for phase, at in (("start", start), ("stop", stop)):
            self._add(at, "nemesis", "invoke", "fault", {**v, "phase": phase})
            self._add(at, "nemesis", "ok", "fault", {**v, "phase": phase})
        return self

    @property
    def records(self) -> list[dict]:
        ordered = sorted(self._records, key=lambda r: r["time"])
        return [{**r, "index": i} for i, r in enumerate(ordered)]

    def judged(self) -> tuple[list, dict]:
        rule = ShareGroupRule()
        found = rule.check([r for r in self.records if [*rule.group_keys(r)]], "kip")
        [figures] = [a.details for a in found if a.name == SHARE_GROUPS]
        return [a for a in found if a.name != SHARE_GROUPS], figures


def _base(appended=1000):
    """A acquires offset 0 (appended at 1000 ms) by its poll answered at 1100 ms."""
    return ShareHistory().subscribe(A, 0).subscribe(B, 0).poll(A, 1050, 1100, appended=appended)


# --- share-double-acquire ------------------------------------------------------------------------

def test_a_record_given_to_another_consumer_inside_the_lock_is_a_double_acquire():
    """Just outside: the lock (appended 1000 ms, 5000 ms, one tick and the stamp's slack early)
    certainly held until 5994 ms; B's poll, a later acquisition (count 2), answered at 5990 ms."""
    h = _base().poll(B, 5900, 5990, count=2).ack(A, "accept", 7000, 7010).ack(B, "accept", 6000, 6010)
    found, _ = h.judged()
    assert [a.name for a in found] == [DOUBLE]
    assert found[0].details["rule"] == "kip932.exclusive_acquisition"


def test_after_the_lock_could_have_expired_another_consumer_may_acquire():
    """Just inside: B's poll answered at 5995 ms, after the earliest expiry (5994 ms)."""
    h = _base().poll(B, 5900, 5995, count=2).ack(B, "accept", 6000, 6010)
    assert h.judged()[0] == []


def test_after_a_release_another_consumer_may_acquire():
    """A released it (ack invoked at 1200 ms): B may have it from then on, inside the lock time."""
    h = _base().ack(A, "release", 1200, 1210).poll(B, 1150, 1300, count=2)
    assert h.judged()[0] == []
    # the release invoked after B's poll answered does not cover it
    h = _base().poll(B, 1150, 1300, count=2).ack(A, "release", 1400, 1410)
    assert [a.name for a in h.judged()[0]] == [DOUBLE]


def test_equal_counts_must_overlap_both_ways():
    """Two deliveries with the same count: either could be first, so both locks must hold."""
    h = _base().poll(B, 1000, 1200, count=1).ack(A, "accept", 3000, 3010).ack(B, "accept", 3000, 3010)
    assert [a.name for a in h.judged()[0]] == [DOUBLE]


def test_a_fault_between_the_deliveries_exempts_the_pair():
    h = _base().fault(1200, 1300).poll(B, 1900, 2000, count=2).ack(A, "accept", 3000, 3010)
    found, figures = h.judged()
    assert found == [] and figures["pairs_not_judged_fault"] == 1


def test_without_a_stamp_the_client_start_bounds_the_acquisition():
    """No append stamp: A's lock counts from A's start (0 ms): certainly held until 4999 ms."""
    h = _base(appended=None).poll(B, 4900, 4998, count=2).ack(A, "accept", 6000, 6010)
    assert [a.name for a in h.judged()[0]] == [DOUBLE]
    assert _base(appended=None).poll(B, 4900, 4999, count=2).ack(A, "accept", 6000, 6010).judged()[0] == []


def test_a_consumer_that_went_away_released_its_records():
    """A's client did nothing after its poll (it may have closed then): not judged as holding."""
    assert _base().poll(B, 1900, 2000, count=2).judged()[0] == []


# --- share-accepted-redelivered -------------------------------------------------------------------

def test_an_accepted_record_delivered_again_is_flagged():
    """Just outside: A's accept was answered at 1210 ms; B's poll, asked at 1211, got count 2."""
    h = _base().ack(A, "accept", 1200, 1210).poll(B, 1211, 1300, count=2)
    found, _ = h.judged()
    assert REDELIVERED in [a.name for a in found]
    [a] = [a for a in found if a.name == REDELIVERED]
    assert a.details["rule"] == "kip932.accepted_not_redelivered"


def test_a_poll_asked_before_the_accept_answered_is_not_judged_by_it():
    """Just inside: B's poll was asked at 1209 ms, before the answer (the record may have been
    acquired by then); the double-acquire rule judges that pair, and the release came first."""
    h = _base().ack(A, "accept", 1200, 1210).poll(B, 1209, 1300, count=2)
    assert REDELIVERED not in [a.name for a in h.judged()[0]]


def test_an_async_acks_answer_inside_a_later_sync_ack_does_not_answer_the_sync_one():
    """2026-11-29, a selftest control-like window (no slip fired): A's async ack of offset 5 was answered by
    the callback inside A's later sync ack of offset 0 (a stalled one, refused: its lock had expired), and
    the answer was taken for the sync ack's, so B's later delivery of offset 0 was flagged as a redelivery."""
    v = {"group": "sg", "lock_duration_ms": LOCK, "delivery_count_limit": LIMIT_N}
    h = _base()
    h._add(1150, A, "invoke", "share_poll", v)._add(1160, A, "ok", "share_poll",
                                                   {**v, "records": [["t", 0, 5, "v5"]], "delivery_counts": [1]})
    async_ack = {"group": "sg", "mode": "async", "acks": [["t", 0, 5, "accept"]]}
    sync_ack = {"group": "sg", "mode": "sync", "acks": [["t", 0, 0, "accept"]]}
    h._add(1170, A, "invoke", "share_ack", async_ack)._add(7200, A, "invoke", "share_ack", sync_ack)
    h._add(7210, A, "ok", "share_ack", async_ack)
    h._add(7220, A, "ok", "share_ack", {**sync_ack, "partition_errors": {"t/0": "INVALID_RECORD_STATE"}})
    h.poll(B, 7300, 7400, count=2)
    assert REDELIVERED not in [a.name for a in h.judged()[0]]
    # the same history with the sync ack answered without error: then the redelivery is one
    h = ShareHistory()
    h._records = [r for r in _base()._records]
    h._add(1200, A, "invoke", "share_ack", sync_ack)._add(1210, A, "ok", "share_ack", sync_ack).poll(B, 7300, 7400, count=2)
    assert REDELIVERED in [a.name for a in h.judged()[0]]


def test_an_accept_answered_with_an_error_may_be_redelivered():
    h = _base().ack(A, "accept", 1200, 1210, refused=True).poll(B, 1300, 1400, count=2)
    assert REDELIVERED not in [a.name for a in h.judged()[0]]
    h = _base().ack(A, "accept", 1200, 1210, type_="info").poll(B, 1300, 1400, count=2)
    assert REDELIVERED not in [a.name for a in h.judged()[0]]


# --- share-delivery-limit-exceeded -----------------------------------------------------------------

def test_a_delivery_count_above_the_limit_is_flagged():
    h = _base().ack(A, "release", 1200, 1210).poll(B, 1300, 1400, count=LIMIT_N + 1)
    assert [a.name for a in h.judged()[0]] == [LIMIT]
    h = _base().ack(A, "release", 1200, 1210).poll(B, 1300, 1400, count=LIMIT_N)
    assert h.judged()[0] == []


def test_more_deliveries_than_the_limit_are_flagged_without_a_fault():
    """Four deliveries (counts unknown to the client) of one record with limit 3; three pass."""
    def deliveries(n, fault=False):
        h = ShareHistory().subscribe(A, 0).subscribe(B, 0)
        if fault:
            h.fault(10, 20)
        for i in range(n):
            p = A if i % 2 == 0 else B
            h.poll(p, 1000 * i + 100, 1000 * i + 200, count=None, appended=50).ack(p, "release", 1000 * i + 300,
                                                                                    1000 * i + 310)
        return h
    assert [a.name for a in deliveries(4).judged()[0]] == [LIMIT]
    assert deliveries(3).judged()[0] == []
    assert deliveries(4, fault=True).judged()[0] == []  # a fault between: the count is not exact


def test_figures_and_model_bounds():
    h = _base().ack(A, "release", 1200, 1210).poll(B, 1300, 1400, count=2).ack(B, "accept", 1500, 1510)
    found, figures = h.judged()
    assert found == []
    assert figures["polls"] == 2 and figures["records_acquired"] == 2 and figures["redeliveries"] == 1
    assert figures["acks"] == {"release": 1, "accept": 1}
    assert figures["lock_duration_ms"] == LOCK and figures["delivery_count_limit"] == LIMIT_N
    d = kip932.Delivery(A, 0, 10, 0, 1, None)
    assert kip932.lock_held_until(d, 1000) == 999 * MS


def test_the_engine_counts_share_observations():
    h = _base().ack(A, "accept", 1200, 1210)
    records = h.records
    records += [{"index": len(records), "time": 2000 * MS, "process": 9, "type": "invoke", "f": "send",
                 "value": {"topic": "t", "partition": 0, "value": "v0"}},
                {"index": len(records) + 1, "time": 2001 * MS, "process": 9, "type": "ok", "f": "send",
                 "value": {"topic": "t", "partition": 0, "value": "v0", "offset": 0}}]
    v = check_records(records)
    assert v["coverage"]["kip932.exclusive_acquisition"]["observations"] == 1
    assert v["share_groups"]["polls"] == 1
    assert not any(v["anomalies"][n] for n in (DOUBLE, REDELIVERED, LIMIT))


def test_the_accepting_consumers_own_reacquisition_needs_its_lock_to_lapse_first():
    """A's client fetches ahead: after A's count-1 lock lapsed it may have acquired the record again
    (count 2), and A's accept applied to that. A's lock was acquired after 995 ms (stamp 1000 less the
    5 ms slack) and lapses no sooner than 4999 ms later: with the accept answered at 5994 ms A's
    count 2 and B's count 2 (acquired after that lapse, lapsing in turn only at 10993) are explained,
    a count 3 is not. Answered at 5993 ms, A's own count 2 is a redelivery (the campaign's CI shape,
    2026-11-29: every redelivery went back to the consumer that had accepted it)."""
    lapsed = _base().ack(A, "accept", 1200, 5994)
    assert REDELIVERED not in [a.name for a in lapsed.poll(A, 6000, 6100, count=2).judged()[0]]
    assert REDELIVERED in [a.name for a in _base().ack(A, "accept", 1200, 5994).poll(A, 6000, 6100, count=3).judged()[0]]
    held = _base().ack(A, "accept", 1200, 5993).poll(A, 6000, 6100, count=2)
    assert [a.name for a in held.judged()[0]] == [REDELIVERED]


def test_another_consumers_acquisition_before_the_accept_must_have_lapsed():
    """B's count 2 came after A's count-1 lock (from 5994 ms), and B polled it only after A's accept
    was answered, so B cannot have released it: for A to hold the record again at its accept, B's
    lock must have lapsed too (by 10993 ms)."""
    def history(answered):
        return _base().ack(A, "accept", 1200, answered).poll(A, answered + 10, answered + 20, count=3) \
            .poll(B, answered + 30, answered + 40, count=2, appended=1000)
    assert REDELIVERED not in [a.name for a in history(10993).judged()[0]]
    assert REDELIVERED in [a.name for a in history(10992).judged()[0]]


def test_a_release_in_between_lets_the_next_acquisition_follow_at_once():
    """B got count 2 and released it at 1300 ms, so A's count 3 may follow at once, and A accepted it.
    A's count 3 seen again is no new acquisition; a count 4 would need A's count-3 lock to lapse first."""
    h = (_base().ack(A, "release", 1110, 1120).poll(B, 1150, 1200, count=2).ack(B, "release", 1300, 1310)
         .poll(A, 1350, 1400, count=3).ack(A, "accept", 1500, 1510).poll(B, 1600, 1700, count=4))
    assert REDELIVERED in [a.name for a in h.judged()[0]]
    h = (_base().ack(A, "release", 1110, 1120).poll(B, 1150, 1200, count=2).ack(B, "release", 1300, 1310)
         .poll(A, 1350, 1400, count=3).ack(A, "accept", 1500, 1510).poll(A, 1600, 1700, count=3))
    assert REDELIVERED not in [a.name for a in h.judged()[0]]


# --- share-record-lost ---------------------------------------------------------------------------
# Offset 0 acknowledged at 1000 ms and never delivered; offset 1 delivered with its append stamp.
# The bound: available by 1000 ms, plus two locks (10000 ms) and the fetch slack (1000 ms) = 12000 ms;
# a delivery's acquisition is bounded below by its stamp less the stamp's slack (5 ms).

def _lost_base(reset="earliest"):
    return ShareHistory().subscribe(A, 0, reset).send(1000, 0).send(1001, 1)


def test_a_record_never_delivered_behind_a_later_acquisition_past_the_bound_is_lost():
    """Just outside: offset 1 acquired no earlier than 12005 ms."""
    found, figures = _lost_base().poll(A, 12000, 12100, offset=1, appended=12010).judged()
    assert [a.name for a in found] == [LOST]
    assert found[0].details["offset"] == 0 and found[0].details["rule"] == "kip932.available_record_delivered"
    assert figures["records_judged_lost_rule"] == 1


def test_a_later_acquisition_inside_the_bound_may_still_have_the_record_locked_elsewhere():
    """Just inside: offset 1 acquired no earlier than 11995 ms."""
    found, _ = _lost_base().poll(A, 12000, 12100, offset=1, appended=12000).judged()
    assert found == []


def test_the_latest_acquisition_of_a_later_offset_is_the_one_judged():
    """Offset 1 delivered twice (redelivered to B): its later acquisition is past the bound (A's last
    record, at 1200 ms, counts as its end: 1200 + 11000 ms)."""
    h = _lost_base().poll(A, 1100, 1200, offset=1, appended=1001).poll(B, 12200, 12300, offset=1, count=2,
                                                                      appended=12210)
    found, _ = h.judged()
    assert LOST in [a.name for a in found]


def test_a_consumer_end_after_a_proof_does_not_hide_it():
    """CI's share-record-lost window (2026-11-29): a consumer's last record came late in the window, and
    judged against the latest later acquisition alone (after that end) nothing was lost. Each later
    acquisition is judged with the ends before it: B's offset 1, acquired after 12005 ms (stamp 12010),
    is 11 s after offset 0 was acknowledged (1000 ms), before consumer 23's last record (13000 ms); B's
    offset 2 (after 13995 ms) counts from that end and proves nothing. Just inside: stamp 12004."""
    def history(stamp):
        return (_lost_base().subscribe(B, 0).poll(B, 12100, 12110, offset=1, appended=stamp).subscribe(23, 13000)
                .poll(B, 14000, 14100, offset=2, appended=14000))
    found, _ = history(12010).judged()
    [lost] = [a for a in found if a.name == LOST]
    assert lost.details["offset"] == 0 and "12.005 s" in lost.message
    assert LOST not in [a.name for a in history(12004).judged()[0]]


def test_a_delivered_record_and_the_tail_are_not_lost():
    h = _lost_base().poll(A, 1100, 1200, offset=0, appended=1000).send(1002, 2).poll(A, 20000, 20100, offset=1,
                                                                                    appended=20000)
    found, figures = h.judged()
    assert found == [] and figures["records_judged_lost_rule"] == 1  # offset 0; 2: nothing after it was delivered


def test_a_consumer_that_ended_may_have_held_the_record_until_its_end():
    """B ended at 3000 ms (it may have acquired offset 0 and never returned it): the bound moves to
    14000 ms. 14005 ms is outside it, 13995 ms inside."""
    def history(appended):
        h = _lost_base().subscribe(B, 2900)
        h._add(3000, B, "invoke", "share_poll", {"group": "sg", "lock_duration_ms": LOCK, "delivery_count_limit": LIMIT_N})
        return h.poll(A, appended, appended + 100, offset=1, appended=appended)
    assert [a.name for a in history(14010).judged()[0]] == [LOST]
    assert history(14000).judged()[0] == []


def test_a_fault_ending_before_the_later_acquisition_moves_the_bound_and_one_in_force_stops_it():
    """A fault's end counts as an end (a response it cut off hid an acquisition); a fault in force at
    the later acquisition leaves the record unjudged."""
    settle = SETTLE_NS // MS  # a fault's window lasts this long past its stop: it ends at 8000 ms
    ended = _lost_base().fault(2000, 8000 - settle)
    assert [a.name for a in ended.poll(A, 19010, 19100, offset=1, appended=19010).judged()[0]] == [LOST]
    ended = _lost_base().fault(2000, 8000 - settle)
    assert ended.poll(A, 18990, 19100, offset=1, appended=18990).judged()[0] == []
    found, figures = _lost_base().fault(11000, 13000).poll(A, 12500, 12600, offset=1, appended=12500).judged()
    assert found == [] and figures["records_not_judged_lost_rule_fault"] == 1


def test_a_group_not_known_to_start_at_the_earliest_offset_is_not_judged_for_loss():
    for reset in ("latest", None):
        assert _lost_base(reset).poll(A, 20000, 20100, offset=1, appended=20000).judged()[0] == []


def test_transactional_sends_and_other_topics_are_not_judged_for_loss():
    h = ShareHistory().subscribe(A, 0).send(1000, 0, txn="t1").send(1000, 0, topic="other").send(1001, 1)
    found, figures = h.poll(A, 20000, 20100, offset=1, appended=20000).judged()
    assert found == [] and figures["records_judged_lost_rule"] == 0


def test_available_record_delivered_bound():
    lock = 5000
    assert kip932.available_record_delivered(False, 0, (2 * lock + kip932.FETCH_SLACK_MS) * MS - 1, lock)
    assert not kip932.available_record_delivered(False, 0, (2 * lock + kip932.FETCH_SLACK_MS) * MS, lock)
    assert kip932.available_record_delivered(True, 0, 10**15, lock)


def test_an_async_answer_inside_a_sync_commit_pairs_with_its_own_invoke():
    """The 4.3.1 campaign's shape: A's async accept of offset 1 (its second process, 31) is answered
    inside A's sync commit of offset 0, whose answer refuses the partition. Offset 0 was not accepted:
    B's later delivery of it is no redelivery; offset 1 was, and its redelivery to B is flagged."""
    lane = 31
    h = (ShareHistory().subscribe(A, 0).subscribe(B, 0).poll(A, 1000, 1100, offset=1, appended=900)
         .async_ack(lane, A, "accept", 1200, 7010, offset=1).poll(A, 1300, 1400, offset=0, appended=1000))
    h._add(7000, A, "invoke", "share_ack", {"group": "sg", "mode": "sync", "acks": [["t", 0, 0, "accept"]]})
    h._add(7020, A, "ok", "share_ack", {"group": "sg", "mode": "sync", "acks": [["t", 0, 0, "accept"]],
                                         "partition_errors": {"t/0": "INVALID_RECORD_STATE"}})
    h.poll(B, 9000, 9100, offset=0, count=2, appended=1000).poll(B, 9200, 9300, offset=1, count=2, appended=900)
    found, _ = h.judged()
    assert [(a.name, a.details["offset"]) for a in found] == [(REDELIVERED, 1)]


#: the double-acquire pair of `_seen_epochs`: A acquired after 995 ms, B's poll answered at 5990 ms
PAIR_BEGIN, PAIR_END = 995 * MS, 5990 * MS


def _seen_epochs(*epochs) -> list[str]:
    """The anomalies of a double-acquire pair (`PAIR_BEGIN` to `PAIR_END`) with the observer's
    answers `(time ns, leader epoch)` of its partition."""
    h = _base().poll(B, 5900, 5990, count=2, appended=5900).ack(A, "accept", 7000, 7010)
    h.ack(B, "accept", 6000, 6010)
    for at_ns, epoch in epochs:
        v = {"broker": 1, "topic": "t", "partition": 0}
        h._add(at_ns / MS, "observer", "invoke", "metadata", v)
        h._add(at_ns / MS, "observer", "ok", "metadata", {**v, "leader": 1, "leader_epoch": epoch, "isr": [1],
                                                          "replicas": [1], "offline": []})
    return [a.name for a in h.judged()[0]]


def test_a_leader_change_seen_within_the_slack_exempts_a_pair_and_one_seen_past_it_does_not():
    """`LEADER_SLACK_NS` at both ends of the double-acquire pair's span (A acquired after 995 ms,
    B after 5895 ms, its poll answered at 5990 ms): epochs 0 and 1 both seen within the slack exempt the pair; a
    change seen 1 ms past the slack on either side (both its epochs outside the widened span, or
    the old one inside and the new one past it) leaves the pair judged, and flagged."""
    assert _seen_epochs() == [DOUBLE]
    # just inside: the old epoch seen at the widened span's start, the new one at its end
    assert _seen_epochs((PAIR_BEGIN - LEADER_SLACK_NS, 0), (PAIR_END + LEADER_SLACK_NS, 1)) == []
    # just outside, after: the change falls between end + slack and 1 ms later
    assert _seen_epochs((PAIR_BEGIN - LEADER_SLACK_NS, 0), (PAIR_END + LEADER_SLACK_NS, 0), (PAIR_END + LEADER_SLACK_NS + MS, 1)) == [DOUBLE]
    # just outside, before: the change falls between begin - slack - 2 ms and begin - slack - 1 ms
    assert _seen_epochs((PAIR_BEGIN - LEADER_SLACK_NS - 2 * MS, 0), (PAIR_BEGIN - LEADER_SLACK_NS - MS, 1),
                (PAIR_END + LEADER_SLACK_NS, 1)) == [DOUBLE]


def test_a_record_lost_at_exactly_its_bound_and_held_one_ms_inside():
    """`kip932.FETCH_SLACK_MS` and `STAMP_SLACK_MS` at their edge, in whole-ms stamps: offset 0
    available by 1000 ms, so an acquisition of offset 1 no earlier than 1000 ms + two locks +
    the fetch slack (its stamp less the stamp slack) proves offset 0 lost; 1 ms sooner, not."""
    bound_ms = 1000 + 2 * LOCK + kip932.FETCH_SLACK_MS
    stamp = bound_ms + kip932.STAMP_SLACK_MS
    found, _ = _lost_base().poll(A, stamp - 100, stamp + 100, offset=1, appended=stamp).judged()
    assert [(a.name, a.details["offset"]) for a in found] == [(LOST, 0)]
    found, _ = _lost_base().poll(A, stamp - 100, stamp + 100, offset=1, appended=stamp - 1).judged()
    assert found == []


def test_a_leader_change_the_observer_saw_only_across_a_gap_over_the_pair_exempts_it():
    """An observer that did not ask from before the pair's widened span to after it (stalled, its
    broker cut off) may have missed a leader change inside it: two answers in a row with different
    epochs around the span exempt the pair. A gap that ends 1 ms before the widened span, or
    starts 1 ms after it, leaves the pair judged."""
    start, stop = PAIR_BEGIN - LEADER_SLACK_NS, PAIR_END + LEADER_SLACK_NS
    assert _seen_epochs((start - 500 * MS, 0), (stop + 500 * MS, 1)) == []
    assert _seen_epochs((start - 500 * MS, 0), (start, 1), (stop, 1)) == []  # the new epoch first seen at the start
    assert _seen_epochs((start - 500 * MS, 0), (start - MS, 1), (stop, 1)) == [DOUBLE]
    assert _seen_epochs((start, 0), (stop, 0), (stop + MS, 1)) == [DOUBLE]
    assert _seen_epochs((start - 500 * MS, 0), (stop + 500 * MS, 0)) == [DOUBLE]  # no change: judged
