"""Recall of the KIP-392 fetch rules (checks/rules/fetch_rules.py).

`uncommitted-read` on a consumer poll (`_PollJudge`): a poll reports no HWM, but every record it
returned was below the serving replica's HWM when read, which is at most what the partition's
leader L answers later in the same epoch and life. So a polled record at offset k is proven
uncommitted, under every profile, when L (named leader of epoch E by metadata) answered in E
before the record's send was invoked, answered in E after the poll completed with a HWM <= k, and
no fault or upgrade step ran between those two answers. The shared history uncommitted-read-04 is
this shape. Each bound has a history just outside it (flagged) and just inside it (accepted).

`wrong-fetch-error` on an in-sync follower (`_IsrProof`, `_Reports`): a follower in the leader's
ISR at some moment after the leader reported HWM h has its LEO at h from then on, so NONE and no
records at an offset in [its HWM, h) is case 1 (OFFSET_NOT_AVAILABLE under `kip`). The metadata
chain must close `IMAGE_LAG_NS` after the leader's report (no longer after the follower's answer):
a closing answer sooner than that may still show a follower the leader had just shrunk. The shared
history wrong-fetch-error-03 closes 2.8 ms after the report, so as recorded it proves nothing.
"""
import json

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules import fetch_rules
from kipcheck.checks.rules.kip1166_rules import SETTLE_NS
from kipcheck.checks.rules.replica_rules import IMAGE_LAG_NS, ISR_SPAN_NS
from kipcheck.checks.verdict import run_rule
from kipcheck.reference_model import kip392, profiles
from tests.support.raw_protocol import H, S
from tests.support.shared_histories import SHARED

PROFILES = ("kip", "kafka-4.3")
MS = 1_000_000


def verdict(records, profile):
    return check_records(records, profile=profile)


def found(records, profile, name, known=False):
    return verdict(records, profile)["known" if known else "anomalies"][name]


def ordered(h: H) -> list[dict]:
    """`h`'s records by time, indexed in that order."""
    return [dict(r, index=i) for i, r in enumerate(sorted(h.records, key=lambda r: r["time"]))]


def shared(case: str) -> tuple[list[dict], dict]:
    folder = SHARED / case
    if not folder.exists():
        pytest.skip(f"{folder} not on this machine")
    records = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    return records, json.loads((folder / "expected.json").read_text())


# --- the model: a read that reports no HWM ------------------------------------------------------

def test_a_read_without_a_reported_hwm_is_judged_by_later_hwms_under_every_profile():
    for p in (profiles.get("kip"), profiles.get("kafka-4.3")):
        assert not kip392.records_committed([7], None, p, ((7, True),))  # at a later HWM
        assert not kip392.records_committed([6, 7], None, p, ((6, True),))
        assert kip392.records_committed([7], None, p, ((8, True),))  # below it
        assert kip392.records_committed([7], None, p, ((7, False),))  # asked before the read ended
        assert kip392.records_committed([7], None, p, ())  # nothing asked later: nothing proven
    assert kip392.records_committed([7], -1, profiles.get("kip"), ((7, True),))  # -1: unknown, as before


# --- uncommitted-read on a poll ------------------------------------------------------------------

T = 10 * S  # the scenario starts late enough for a fault to end (plus its settle time) before it


def poll_history(report_at=T, report_epoch=5, send_at=T + 2 * S, poll_at=T + 3 * S, later_at=T + 4 * S,
                 later_hwm=2, later_epoch=5, leader=1, txn=False, fault=None, upgrade=None) -> list[dict]:
    """Metadata names `leader` for epoch 5; sends a, b (offsets 0, 1) before anything; leader 1
    answers HWM 2 at `report_at` (epoch `report_epoch`); "c" is sent at `send_at` and polled at
    offset 2 at `poll_at`; leader 1 answers `later_hwm` at `later_at` (epoch `later_epoch`).
    `fault`: (kind, start invoke, stop completion) of a fault on broker 3; `upgrade`: (invoke,
    completion) of an upgrade step. Every op takes 1 ms."""
    h = H().meta(0, broker=2, leader=leader).send("a", 0, S // 10).send("b", 1, S // 5)
    h.fetch(report_at, 0, [(0, "a"), (1, "b")], broker=1, hwm=2, epoch=report_epoch, rack="r1")
    c = {"topic": "t", "partition": 0, "value": "c", **({"txn": "t-1"} if txn else {})}
    h.op(0, "send", c, {"offset": 2}, send_at)
    h.poll(9, poll_at, (2, "c"))
    h.fetch(later_at, 2, [], broker=1, hwm=later_hwm, epoch=later_epoch, rack="r1")
    if fault:
        kind, start, stop = fault
        value = {"fault": kind, "targets": [3]}
        h.op("nemesis", "fault", {**value, "phase": "start"}, {}, start)
        h.op("nemesis", "fault", {**value, "phase": "stop"}, {}, stop - MS)
    if upgrade:
        h.op("upgrade", "upgrade", {"step": "roll", "node": 3}, {}, upgrade[0], dt=upgrade[1] - upgrade[0])
    return ordered(h)


def _poll_indices(records):
    """The indices of: the leader's earlier answer, the send of "c", the poll, the later answer."""
    fetches = [r["index"] for r in records if r["f"] == "fetch" and r["type"] == "ok"]
    send = next(r["index"] for r in records if r["f"] == "send" and r["type"] == "invoke" and r["value"]["value"] == "c")
    poll = next(r["index"] for r in records if r["f"] == "poll" and r["type"] == "ok")
    return fetches[0], send, poll, fetches[1]


@pytest.mark.parametrize("profile", PROFILES)
def test_a_poll_above_its_leaders_later_hwm_is_an_uncommitted_read(profile):
    records = poll_history()
    [example] = found(records, profile, "uncommitted-read")
    assert set(_poll_indices(records)) <= set(example["indices"])
    assert example["offsets"] == [2] and example["high_watermark"] == 2 and example["leader_epoch"] == 5
    assert example["rule"] == "kip392.records_committed"


@pytest.mark.parametrize("profile", PROFILES)
def test_shared_history_uncommitted_read_04_is_flagged_at_its_indices(profile):
    records, expected = shared("uncommitted-read-04")
    v = verdict(records, profile)
    for name in expected["must_flag"]:
        assert v["anomalies"][name], name
    assert not [n for n in expected["must_not_flag"] if v["anomalies"][n]]
    [example] = v["anomalies"]["uncommitted-read"]
    assert {19, 23, 25} <= set(example["indices"])  # the leader's answers before and after, the poll
    assert 7 in example["offsets"] and example["high_watermark"] == 6


@pytest.mark.parametrize("outside, inside", [
    # the later HWM: at the record's offset, or above it
    (dict(later_hwm=2), dict(later_hwm=3)),
    # the later answer asked after the poll completed (1 ms after its invoke), or just before
    (dict(later_at=T + 3 * S + MS + 1), dict(later_at=T + 3 * S + MS - 1)),
    # the earlier answer completed before the send was invoked, or just after
    (dict(report_at=T + 2 * S - MS - 1), dict(report_at=T + 2 * S - MS + 1)),
    # a fault (on any node) ended, settle time included, before the earlier answer was asked, or just after
    (dict(fault=("kill", S, T - SETTLE_NS - 1)), dict(fault=("kill", S, T - SETTLE_NS + 1))),
    # an upgrade step ended before it, or not
    (dict(upgrade=(S, T - SETTLE_NS - 1)), dict(upgrade=(S, T - SETTLE_NS + 1))),
    # both answers in the epoch metadata names broker 1 the leader of, or broker 1 a follower
    (dict(), dict(leader=3)),
    # both answers in one epoch, or the later in the next epoch, or the earlier in the one before
    (dict(), dict(later_epoch=6)),
    (dict(), dict(report_epoch=4)),
    # a plain send, or a transactional one (a copier may send a value twice)
    (dict(), dict(txn=True)),
])
@pytest.mark.parametrize("profile", PROFILES)
def test_each_bound_of_the_poll_proof(outside, inside, profile):
    assert found(poll_history(**outside), profile, "uncommitted-read")
    assert not found(poll_history(**inside), profile, "uncommitted-read")
    assert not found(poll_history(**inside), profile, "uncommitted-read", known=True)


def test_the_poll_judge_remembers_only_sends_that_may_still_prove_something():
    """Streaming memory: a send is remembered only once its partition has a fetch answer, and
    forgotten when a poll reads it below the last HWM of every broker named its leader (that
    HWM only rises in the span a proof needs); a record read at or above it waits."""
    h = H().meta(0, broker=2, leader=1).send("a", 0, S // 10).fetch(S, 0, [], broker=1, hwm=0, rack="r1")
    h.send("c", 0, 2 * S).send("d", 1, 2 * S + S // 10).fetch(3 * S, 0, [], broker=1, hwm=1, rack="r1")
    h.poll(9, 4 * S, (0, "c"), (1, "d"))
    judge = fetch_rules._PollJudge()
    for r in ordered(h):
        judge.add(r)
    assert ("t", 0, "a") not in judge.sent  # sent before any answer
    assert ("t", 0, "c") not in judge.sent and ("t", 0, "d") in judge.sent
    assert [c.value for c in judge.waiting[("t", 0, 1)]] == ["d"]


@pytest.mark.parametrize("records", [poll_history(), poll_history(fault=("kill", S, T + S)), None])
def test_the_poll_groups_projection_judges_as_the_whole_records(records):
    """`ConsumerFetchRule.split` gives the poll group only what it reads; the verdict is the same."""
    if records is None:
        records, _ = shared("uncommitted-read-04")
    rule = fetch_rules.ConsumerFetchRule()
    whole = [r for r in records if fetch_rules.POLL_GROUP in rule.group_keys(r)]
    parts = [part for r in records for k, part in rule.split(r) if k == fetch_rules.POLL_GROUP]
    for p in PROFILES:
        assert run_rule(rule, fetch_rules.POLL_GROUP, whole, p) == run_rule(rule, fetch_rules.POLL_GROUP, iter(parts), p)


# --- wrong-fetch-error: an in-sync follower after the leader's report ---------------------------

def _shifted(records, first: int, by: int) -> list[dict]:
    """The records from index `first` on, `by` ns later."""
    return [dict(r, time=r["time"] + by) if r["index"] >= first else r for r in records]


def test_shared_history_wrong_fetch_error_03_as_recorded_proves_no_isr():
    """Its closing metadata answer (22, 23) is asked 2.8 ms after the leader's report (17), well
    inside a metadata image's lag: the leader may have shrunk follower 2 (8 s behind) just
    before the report while every image still listed it, and such a follower answers NONE and
    no records at its own HWM, its log end. So nothing is flagged."""
    records, _ = shared("wrong-fetch-error-03")
    assert not found(records, "kip", "wrong-fetch-error")


@pytest.mark.parametrize("profile, known", [("kip", False), ("kafka-4.3", True)])
def test_shared_history_wrong_fetch_error_03_closed_a_replay_after_the_report_is_flagged(profile, known):
    """The same history with the closing answer asked `IMAGE_LAG_NS` after the leader's report
    completed (still before the old bound, a replay after the follower's answer): flagged at the
    follower's answer (21), with the report (17) and the chain (1, 23); one ns sooner, nothing."""
    records, _ = shared("wrong-fetch-error-03")
    report_done = records[17]["time"]
    by = report_done + IMAGE_LAG_NS - records[22]["time"]
    assert records[22]["time"] + by < records[21]["time"] + IMAGE_LAG_NS  # the old bound was not met
    [example] = found(_shifted(records, 22, by), profile, "wrong-fetch-error", known=known)
    assert {1, 17, 21, 23} <= set(example["indices"])
    assert example["leo_min"] == 7
    assert not found(_shifted(records, 22, by - 1), profile, "wrong-fetch-error", known=known)


def isr_history(fault_stop=None, closing=17 * S + S // 2, report_at=10 * S) -> list[dict]:
    """Leader 1 (epoch 5, ISR [1, 2, 3]) reports HWM 20 at `report_at` (10 s); metadata at 16 s
    and at `closing` (17.5 s); follower 2 answers NONE and no records at its own HWM 12 at 16.5 s.
    `fault_stop`: a kill of broker 3 from 1 s whose stop completes then (its window runs
    `SETTLE_NS` longer)."""
    h = H().fetch(report_at, 0, [], broker=1, hwm=20, rack="r1")
    h.meta(16 * S).fetch(16 * S + S // 2, 12, [], broker=2, hwm=12).meta(closing)
    if fault_stop is not None:
        value = {"fault": "kill", "targets": [3]}
        h.op("nemesis", "fault", {**value, "phase": "start"}, {}, S)
        h.op("nemesis", "fault", {**value, "phase": "stop"}, {}, fault_stop - MS)
    return ordered(h)


def test_the_isr_proof_keeps_faults_out_from_the_leaders_report():
    """The metadata chain (16 s to 17.5 s) is fault-free either way; a fault between the report
    (10 s) and the chain may have cost the leader its life or the follower its log."""
    assert found(isr_history(), "kip", "wrong-fetch-error")
    assert found(isr_history(fault_stop=10 * S - SETTLE_NS - 1), "kip", "wrong-fetch-error")
    assert not found(isr_history(fault_stop=10 * S - SETTLE_NS + 1), "kip", "wrong-fetch-error")


def test_the_isr_proofs_chain_must_span_less_than_isr_span_ns():
    """`ISR_SPAN_NS`, the span in which no shrink and rejoin of the follower is assumed. The
    leader reports at 16.2 s, after the answer at 16 s, so only the closing answer (invoked
    `IMAGE_LAG_NS` after the report or later) can show the follower in the ISR after it: a chain
    from the 16 s answer's invoke to the closing answer's completion (1 ms after its invoke) 1 ns
    short of `ISR_SPAN_NS` proves the follower in sync, and its NONE at its own HWM is flagged;
    spanning it exactly, the follower may have left and rejoined between the two answers, and
    nothing is proven."""
    report_at = 16 * S + S // 5
    closing = 16 * S + ISR_SPAN_NS - MS  # the closing answer completes ISR_SPAN_NS after the first's invoke
    assert closing - 1 >= report_at + MS + IMAGE_LAG_NS  # late enough to close the proof for that report
    assert found(isr_history(closing=closing - 1, report_at=report_at), "kip", "wrong-fetch-error")
    assert not found(isr_history(closing=closing, report_at=report_at), "kip", "wrong-fetch-error")
    # the closing answer's own bound: invoked 1 ns before IMAGE_LAG_NS after the report completed, nothing
    at_lag = report_at + MS + IMAGE_LAG_NS
    assert found(isr_history(closing=at_lag, report_at=report_at), "kip", "wrong-fetch-error")
    assert not found(isr_history(closing=at_lag - 1, report_at=report_at), "kip", "wrong-fetch-error")
