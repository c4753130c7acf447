"""Each transaction anomaly (docs/checker.md, "Transactions"): a hand-made history that must
be flagged, and its valid near-misses that must pass, on both of the rules that judge
transactions (the history rule's gaps and lost writes, the transaction rule)."""
from hypothesis import assume, given, settings, strategies as st

from kipcheck.checks.engine_local import check_records
from kipcheck.reference_model import profiles, transactions as model
from tests.test_deviation_bounds import carrying
from tests.test_checker_anomalies import H, flagged

RC, RU = "read_committed", "read_uncommitted"


class T(H):
    """H with transactions: sends carry their `txn`, ends list the partitions written."""

    def begin(self, proc, txn, timeout_ms=10_000):
        v = {"transactional_id": txn.split(".")[0], "txn": txn, "transaction_timeout_ms": timeout_ms}
        return self._add(proc, "invoke", "txn-begin", v)._add(proc, "ok", "txn-begin", v)

    def tsend(self, proc, txn, value, offset, p=0, type_="ok"):
        v = {"topic": "t", "partition": p, "value": value, "transactional_id": txn.split(".")[0], "txn": txn}
        self._add(proc, "invoke", "send", v)
        return self._add(proc, type_, "send", {**v, "offset": offset} if offset is not None else v)

    def end(self, proc, f, txn, parts, type_="ok", invoke=True):
        v = {"transactional_id": txn.split(".")[0], "txn": txn, "partitions": [["t", p] for p in parts]}
        if invoke:
            self._add(proc, "invoke", f, v)
        return self._add(proc, type_, f, v) if type_ else self

    def commit(self, proc, txn, parts, type_="ok"):
        return self.end(proc, "txn-commit", txn, parts, type_)

    def abort(self, proc, txn, parts, type_="ok"):
        return self.end(proc, "txn-abort", txn, parts, type_)

    def rpoll(self, proc, isolation, *recs):
        self._add(proc, "invoke", "poll", {"topic": "t", "isolation": isolation})
        return self._add(proc, "ok", "poll", {"isolation": isolation, "records": [["t", p, o, v] for p, o, v in recs]})

    def fetch(self, proc, broker, lso, hwm, records=(), epoch=0, isolation=None, p=0, gap=10):
        # read from its first record's offset (a read starting above its fetch offset is a poll-skip)
        v = {"broker": broker, "replica_id": -1, "topic": "t", "partition": p,
             "fetch_offset": min((r[0] for r in records), default=0),
             "current_leader_epoch": epoch, "session_id": 0, "session_epoch": -1}
        if isolation:
            v["isolation_level"] = isolation
        self._add(proc, "invoke", "fetch", v)
        return self._add(proc, "ok", "fetch", {**v, "top_error": "NONE", "error": "NONE", "high_watermark": hwm,
                                               "last_stable_offset": lso, "log_start_offset": 0,
                                               "preferred_read_replica": -1, "records": [list(r) for r in records]})


def base() -> T:
    """p0: 0 a (T1), 1 marker, 2 c (T2, aborted after both its sends were acknowledged),
    3 marker, 4 e (T3), 5 marker, 6 f (T4, commit outcome unknown); p1: 0 b (T1), 1 marker,
    2 d (T2), 3 marker."""
    h = T()
    h.begin(0, "x.1").tsend(0, "x.1", "a", 0, 0).tsend(0, "x.1", "b", 0, 1).commit(0, "x.1", [0, 1])
    h.begin(0, "x.2").tsend(0, "x.2", "c", 2, 0).tsend(0, "x.2", "d", 2, 1).abort(0, "x.2", [0, 1])
    h.begin(0, "x.3").tsend(0, "x.3", "e", 4, 0).commit(0, "x.3", [0])
    h.begin(0, "x.4").tsend(0, "x.4", "f", 6, 0).commit(0, "x.4", [0], type_="info")
    return h


def reads(h: T) -> T:
    """The read_committed and read_uncommitted views of base()."""
    return (h.rpoll(8, RC, (0, 0, "a"), (0, 4, "e"), (1, 0, "b"))
            .rpoll(9, RU, (0, 0, "a"), (0, 2, "c"), (0, 4, "e"), (0, 6, "f"), (1, 0, "b"), (1, 2, "d")))


def test_valid_near_misses_pass():
    """An abort after every send was acknowledged, its records passed over by read_committed
    readers and read by read_uncommitted ones; a commit whose outcome is unknown, read or not."""
    v = check_records(reads(base()).records)
    assert v["valid"] is True, {k: x for k, x in v["anomalies"].items() if x}
    assert flagged(reads(base()).rpoll(7, RC, (0, 6, "f"))) == {}  # the unknown commit may have committed


def test_aborted_read():
    found = flagged(reads(base()).rpoll(7, RC, (0, 2, "c")))
    assert set(found) == {"aborted-read"}
    ex = found["aborted-read"][0]
    assert ex["txn"] == "x.2" and ex["outcome"] == "aborted" and ex["offset"] == 2
    assert ex["records"] == [["t/0", 2, True], ["t/1", 2, False]]  # across partitions, read_committed reads


def test_precommitted_read():
    h = T().begin(0, "x.1").tsend(0, "x.1", "a", 0).rpoll(7, RC, (0, 0, "a")).commit(0, "x.1", [0])
    found = flagged(h)
    assert set(found) == {"precommitted-read"} and found["precommitted-read"][0]["txn"] == "x.1"
    # read once the commit was called: fine, whether it answered or not
    for outcome in ("ok", "info", None):
        ok = T().begin(0, "x.1").tsend(0, "x.1", "a", 0).end(0, "txn-commit", "x.1", [0], type_=None)
        ok.rpoll(7, RC, (0, 0, "a"))
        if outcome:
            ok.end(0, "txn-commit", "x.1", [0], type_=outcome, invoke=False)
        assert flagged(ok) == {}, outcome
    # never asked to commit (the producer died): no read_committed reader may see it
    assert set(flagged(T().begin(0, "x.1").tsend(0, "x.1", "a", 0).rpoll(7, RC, (0, 0, "a")))) == {"precommitted-read"}
    # a read_uncommitted reader may
    assert flagged(T().begin(0, "x.1").tsend(0, "x.1", "a", 0).rpoll(7, RU, (0, 0, "a"))) == {}


def test_torn_transaction_and_lost_committed_write():
    h = base()
    h.rpoll(8, RC, (0, 0, "a"), (0, 4, "e")).rpoll(8, RC, (1, 2, "z"))  # b (T1, p1 offset 0) never read
    found = flagged(h)
    assert {"torn-transaction", "lost-write"} <= set(found)
    assert found["torn-transaction"][0]["missing"] == [0] and found["torn-transaction"][0]["txn"] == "x.1"
    assert found["lost-write"][0]["value"] == "b"


def test_aborted_send_unread_is_not_lost_but_a_committed_skip_is():
    h = base().rpoll(8, RC, (0, 0, "a"), (0, 6, "f"), (1, 0, "b"))  # skips e (T3 committed) at 4
    found = flagged(h)
    assert set(found) >= {"poll-skip", "lost-write"} and found["poll-skip"][0]["skipped"] == 4
    assert not any(ex["value"] in ("c", "d") for ex in found["lost-write"])


def test_read_uncommitted_skip_of_aborted_records_is_a_skip():
    found = flagged(base().rpoll(9, RU, (0, 0, "a"), (0, 4, "e")))
    assert set(found) == {"poll-skip"} and found["poll-skip"][0]["skipped"] == 2


def test_lso_violations():
    assert flagged(reads(base()).fetch(5, 1, lso=4, hwm=7)) == {}
    assert set(flagged(reads(base()).fetch(5, 1, lso=8, hwm=7))) == {"lso-violation"}
    back = reads(base()).fetch(5, 1, lso=4, hwm=7).fetch(5, 1, lso=2, hwm=7)
    assert set(flagged(back)) == {"lso-violation"}
    # a new leader epoch, or a follower whose HWM (and so its LSO) came down with it: not judged
    assert flagged(reads(base()).fetch(5, 1, lso=4, hwm=7).fetch(5, 1, lso=2, hwm=7, epoch=1)) == {}
    followed = flagged(reads(base()).fetch(5, 1, lso=4, hwm=7).fetch(5, 1, lso=3, hwm=3))
    assert set(followed) == {"hwm-regression"}  # the HWM rule's, not an LSO of its own
    # read_committed answers stop below their LSO
    above = reads(base()).fetch(5, 1, lso=4, hwm=7, records=[(4, "e")], isolation=RC)
    assert set(flagged(above)) == {"lso-violation"}
    assert flagged(reads(base()).fetch(5, 1, lso=4, hwm=7, records=[(4, "e")], isolation=RU)) == {}


def describe(h: T, at_s: float, state="Ongoing", epoch=0, start_ms=1000, timeout_ms=10_000, proc=7) -> T:
    """The prober's DescribeTransactions of one open transaction, asked and answered at `at_s`."""
    v = {"broker": 2, "transactional_ids": ["x"]}
    h._add(proc, "invoke", "describe_transactions", v)
    h._add(proc, "ok", "describe_transactions", {**v, "version": 0, "transactions": [
        {"transactional_id": "x", "error": "NONE", "state": state, "producer_id": 5, "producer_epoch": epoch,
         "timeout_ms": timeout_ms, "start_time_ms": start_ms, "partitions": [["t", 0]]}]})
    h.records[-2]["time"] = h.records[-1]["time"] = int(at_s * 1e9)
    return h


def test_a_transaction_its_coordinator_describes_open_past_its_timeout_hangs():
    """KIP-664's view of KIP-98's timeout: one transaction (producer id, epoch, start time)
    described Ongoing for longer than its timeout (10 s) plus the bound (the liveness bound and
    Kafka's 10 s sweep) hangs; its valid near-misses do not."""
    from kipcheck.checks.recovery import liveness_rule
    last = 1 + 10 + liveness_rule().bound + 10  # first described at 1 s; the latest it may still be Ongoing
    found = flagged(describe(describe(T(), 1), last + 1))
    assert set(found) == {"hanging-transaction"}
    assert found["hanging-transaction"][0]["rule"] == "transactions.described_hanging"
    assert flagged(describe(describe(T(), 1), last - 1)) == {}  # within timeout + bound
    assert flagged(describe(describe(T(), 1), last + 1, epoch=1)) == {}  # a later epoch: another transaction
    assert flagged(describe(describe(T(), 1), last + 1, start_ms=70_000)) == {}  # the same id began again
    assert flagged(describe(describe(T(), 1), last + 1, state="PrepareCommit")) == {}  # waits for markers
    assert flagged(describe(describe(T(), 1), last + 1, timeout_ms=60_000)) == {}  # its own, longer timeout
    # asked while a fault was on, or within the bound after the heal: the coordinator may be the one cut off
    cut = describe(T(), 1)
    cut._add("nemesis", "ok", "fault", {"fault": "pause", "targets": [2], "phase": "start"})
    assert flagged(describe(cut, last + 1)) == {}
    healed = describe(T(), 1)
    healed._add("nemesis", "ok", "fault", {"fault": "pause", "targets": [2], "phase": "start"})
    healed._add("nemesis", "ok", "fault", {"fault": "pause", "targets": [2], "phase": "stop"})
    healed.records[-1]["time"] = int((last - 5) * 1e9)
    assert flagged(describe(healed, last + 1)) == {}
    assert set(flagged(describe(healed, 2 * last))) == {"hanging-transaction"}


def test_hanging_transaction():
    h = reads(base())
    h.records[-1]["time"] = 0  # keep the reads early: time is what the rule measures
    late = T()
    late.records = [dict(r) for r in h.records]
    late.fetch(5, 1, lso=6, hwm=7)
    late.records[-2]["time"] = late.records[-1]["time"] = 10**12  # 1000 s after: far past timeout + bound
    found = flagged(late)
    assert set(found) == {"hanging-transaction"} and found["hanging-transaction"][0]["txn"] == "x.4"
    soon = T()
    soon.records = [dict(r) for r in h.records]
    assert flagged(soon.fetch(5, 1, lso=6, hwm=7)) == {}  # within its timeout
    # asked while a fault was on: a cut-off follower's LSO may be stale for as long as it lasts
    cut = T()
    cut.records = [dict(r) for r in h.records]
    cut._add("nemesis", "invoke", "fault", {"fault": "partition", "targets": [1], "phase": "start"})
    cut._add("nemesis", "ok", "fault", {"fault": "partition", "targets": [1], "phase": "start"})
    cut.fetch(5, 1, lso=6, hwm=7)
    cut.records[-2]["time"] = cut.records[-1]["time"] = 10**12
    assert flagged(cut) == {}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["ok", "info", "fail", None]), st.sampled_from(["ok", "info", "fail", None]),
       st.integers(0, 5), st.integers(0, 5))
def test_read_committed_verdict_matches_outcome(commit, abort, read_at, commit_at):
    """Aborted is always wrong to read; before the commit call always wrong; after it,
    wrong only when aborted."""
    assume(not (commit == "ok" and abort == "ok"))
    outcome = model.transaction_outcome((commit,) if commit else (), (abort,) if abort else ())
    began = commit_at if commit else None
    got = model.read_committed_verdict(outcome, read_at, began)
    if outcome == model.ABORTED:
        assert got == "aborted-read"
    elif began is None or read_at < began:
        assert got == "precommitted-read"
    else:
        assert got is None


def test_read_committed_fetch_must_list_the_aborted_transactions_it_returns():
    def answer(aborted):
        h = reads(base()).fetch(5, 1, lso=6, hwm=7, records=[(2, "c")], isolation=RC)
        h.records[-1]["value"].update(batches=[[2, 2, 1000]], aborted_transactions=aborted)
        return flagged(h)
    found = answer([])
    assert set(found) == {"aborted-read"} and found["aborted-read"][0]["producer_id"] == 1000
    assert answer([[1000, 2]]) == {}  # listed: the consumer drops it
    assert set(answer([[1001, 2]])) == {"aborted-read"}  # another producer's abort covers nothing
    assert set(answer([[1000, 3]])) == {"aborted-read"}  # an abort that began after the record


def test_read_committed_fetch_shows_a_committed_transaction_whole():
    h = T().begin(0, "x.1").tsend(0, "x.1", "a", 0).tsend(0, "x.1", "b", 1).tsend(0, "x.1", "c", 3)
    h.commit(0, "x.1", [0]).rpoll(8, RC, (0, 0, "a"), (0, 1, "b"), (0, 3, "c"))
    torn = T()
    torn.records = [dict(r) for r in h.records]
    found = flagged(torn.fetch(5, 1, lso=5, hwm=5, records=[(0, "a"), (3, "c")], isolation=RC))
    assert set(found) == {"torn-transaction"} and found["torn-transaction"][0]["missing"] == [1]
    # an answer that stopped before b (a size limit) is no proof
    assert flagged(h.fetch(5, 1, lso=5, hwm=5, records=[(0, "a")], isolation=RC)) == {}


def test_read_committed_answer_above_its_sampled_lso():
    """Kafka samples the LSO before the read (response-lso-sampled-before-read): a record at or
    above it is known when its transaction's end was called before the answer, else an anomaly."""
    from kipcheck.checks.engine_local import check_records
    ended = reads(base()).fetch(5, 1, lso=4, hwm=7, records=[(4, "e")], isolation=RC)
    early = T().begin(0, "x.1").tsend(0, "x.1", "a", 0).fetch(5, 1, lso=0, hwm=1, records=[(0, "a")], isolation=RC)
    early.commit(0, "x.1", [0]).rpoll(8, RC, (0, 0, "a"))
    assert check_records(ended.records, profile="kip")["anomalies"]["lso-violation"]
    for p in carrying(profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ):  # 3.3 ... 4.4
        v = check_records(ended.records, profile=p)
        assert v["valid"] is True and v["known"]["lso-violation"][0]["deviations"] == [
            "response-lso-sampled-before-read"], p
        assert check_records(early.records, profile=p)["anomalies"]["lso-violation"], p  # its commit came later


def test_coverage_counts_transaction_observations():
    h = reads(base()).fetch(5, 1, lso=4, hwm=7, records=[(0, "a")], isolation=RC)
    h.records[-1]["value"]["batches"] = [[0, 0, 1000]]
    cov = check_records(h.records)["coverage"]
    assert cov["transactions.read_committed_verdict"]["observations"] == 1  # the one read_committed poll
    assert cov["transactions.aborted_record_covered"]["observations"] == 1
    assert cov["transactions.lso_may_follow"]["observations"] == 1 and cov["transactions.hanging"]["observations"] is None


def test_malformed_transaction_record_is_a_one_line_error(tmp_path):
    import pytest
    from kipcheck.checks.engine_local import check_path
    from kipcheck.rundir.history import HistoryError, write_jsonl
    h = base()
    h.records[-1]["value"]["partitions"] = [["t"]]
    write_jsonl(h.records, tmp_path / "history.jsonl")
    with pytest.raises(HistoryError) as e:
        check_path(tmp_path / "history.jsonl")
    assert "\n" not in str(e.value) and "txn-commit needs value.txn" in str(e.value)


def test_an_lso_above_its_own_hwm_is_the_sampled_hwm_under_kafka_until_a_later_hwm_is_below_it():
    """Kafka's `Partition.readRecords` samples the HWM, then the LSO: an answer's LSO may pass
    its HWM by what the HWM advanced in between (seen live under a kill, LSO 8743 vs HWM 8686),
    but never a later HWM of that broker in the same epoch and life."""
    def judged(h, profile):
        v = check_records(h.records, profile=profile)
        return ({k: len(x) for k, x in v["anomalies"].items() if x}, {k: len(x) for k, x in v["known"].items() if x})
    caught_up = reads(base()).fetch(5, 1, lso=8, hwm=7).fetch(5, 1, lso=8, hwm=9)
    assert judged(caught_up, "kip")[0] == {"lso-violation": 1}
    unconfirmed = reads(base()).fetch(5, 1, lso=8, hwm=7)  # no later answer: nothing contradicts it
    contradicted = reads(base()).fetch(5, 1, lso=9, hwm=7).fetch(5, 1, lso=8, hwm=8)
    # another epoch proves nothing about it
    other_epoch = reads(base()).fetch(5, 1, lso=9, hwm=7).fetch(5, 1, lso=4, hwm=4, epoch=1)
    # a session fetch names no leader epoch (CI, 2026-11-27: LSO 8101 over HWM 8055 in a healthy control window)
    epochless = reads(base()).fetch(5, 1, lso=9, hwm=7)
    del epochless.records[-1]["value"]["current_leader_epoch"], epochless.records[-2]["value"]["current_leader_epoch"]
    assert judged(epochless, "kip")[0] == {"lso-violation": 1}
    for p in carrying(profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ):  # 3.3 ... 4.4
        assert judged(epochless, p) == ({}, {"lso-violation": 1}), p
        assert judged(caught_up, p) == ({}, {"lso-violation": 1}), p
        assert judged(unconfirmed, p) == ({}, {"lso-violation": 1}), p
        assert judged(contradicted, p)[0] == {"lso-violation": 1}, p
        assert judged(other_epoch, p) == ({}, {"lso-violation": 1}), p


def test_hanging_transaction_just_inside_and_just_outside_its_bound():
    """The LSO-held judgement at its edge: a fetch asked 1 ms before x.4's deadline (first
    acknowledged send + its 10 s timeout + the liveness bound + Kafka's 10 s sweep) holding the
    LSO at its offset passes; one asked 1 ms after it is a hanging transaction."""
    from kipcheck.checks.recovery import liveness_rule
    from kipcheck.checks.rules.txn_rules import CLEANUP_INTERVAL_NS
    h = reads(base())
    h.records[-1]["time"] = 0
    first_ack = next(r["time"] for r in h.records
                     if r["type"] == "ok" and r["f"] == "send" and r["value"]["txn"] == "x.4")
    deadline = first_ack + 10_000 * 1_000_000 + int(liveness_rule().bound * 1e9 + CLEANUP_INTERVAL_NS)
    for asked, expect in ((deadline - 1_000_000, set()), (deadline + 1_000_000, {"hanging-transaction"})):
        at = T()
        at.records = [dict(r) for r in h.records]
        at.fetch(5, 1, lso=6, hwm=7)
        at.records[-2]["time"] = at.records[-1]["time"] = asked
        found = flagged(at)
        assert set(found) == expect, (asked - deadline, found)
        if expect:
            assert found["hanging-transaction"][0]["txn"] == "x.4"
            assert found["hanging-transaction"][0]["rule"] == "transactions.hanging"


def test_an_lso_held_within_the_bound_after_a_heal_is_not_judged_and_one_just_after_is():
    """The heal's shadow (`_quiet`): for the bound (liveness bound + the 10 s sweep) after a fault
    healed, a stale LSO may be a cut-off broker's catching up; an answer asked at the end of that
    shadow holding x.4's LSO passes, one asked 1 ms after it (both far past x.4's deadline) hangs."""
    from kipcheck.checks.recovery import liveness_rule
    from kipcheck.checks.rules.txn_rules import CLEANUP_INTERVAL_NS
    bound_ns = int(liveness_rule().bound * 1e9 + CLEANUP_INTERVAL_NS)
    h = reads(base())
    h.records[-1]["time"] = 0
    healed_at = 500 * 10**9  # x.4's deadline (10 s + the bound after its first send) long gone
    for asked, expect in ((healed_at + bound_ns, set()), (healed_at + bound_ns + 1_000_000, {"hanging-transaction"})):
        at = T()
        at.records = [dict(r) for r in h.records]
        at._add("nemesis", "ok", "fault", {"fault": "partition", "targets": [1], "phase": "start"})
        at.records[-1]["time"] = healed_at - 10**9
        at._add("nemesis", "ok", "fault", {"fault": "partition", "targets": [1], "phase": "stop"})
        at.records[-1]["time"] = healed_at
        at.fetch(5, 1, lso=6, hwm=7)
        at.records[-2]["time"] = at.records[-1]["time"] = asked
        assert set(flagged(at)) == expect, (asked - healed_at - bound_ns, flagged(at))
