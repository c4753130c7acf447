"""KIP-848 offset commits (`committed-offset-regression`, `resume-skip`, checks/rules/commit_rules.py)
on hand-made histories: each OffsetFetch answer (`committed`) is judged against the group's commits,
an answered commit visible from its answer on, an open one (async, unanswered, a write error) maybe
applied, a refused one never; each rule flags an answer just outside its bound and accepts one just
inside. Also where a subscriber's first read after its resume may start (poll-skip)."""
from __future__ import annotations

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.commit_rules import OFFSET_COMMITS, REGRESSION, SKIP, CommitRule
from kipcheck.reference_model import kip848

A, B = 11, 12  # two members of group "g"


class CommitHistory:
    """Records at explicit times (ns), indices in time order once `records` is read."""

    def __init__(self):
        self._records: list[dict] = []

    def _add(self, time, process, type_, f, value):
        self._records.append({"time": time, "process": process, "type": type_, "f": f, "value": value})

    def commit(self, process, offset, invoked, answered=None, type_="ok", error=None, partition=0):
        value = {"group": "g", "member": f"m{process}", "mode": "async", "offsets": {f"t/{partition}": offset}}
        self._add(invoked, process, "invoke", "commit", value)
        if answered is not None:
            self._add(answered, process, type_, "commit", {**value, **({"error": error} if error else {})})

    def fetch(self, process, answer, asked, answered, partition=0):
        value = {"group": "g", "member": f"m{process}", "partitions": [["t", partition]]}
        self._add(asked, process, "invoke", "committed", value)
        self._add(answered, process, "ok", "committed", {**value, "offsets": {f"t/{partition}": answer}})

    @property
    def records(self) -> list[dict]:
        ordered = sorted(self._records, key=lambda r: r["time"])
        return [{**r, "index": i} for i, r in enumerate(ordered)]

    def judged(self) -> tuple[list, dict]:
        found = CommitRule().check([r for r in self.records if [*CommitRule().group_keys(r)]], "kip")
        [figures] = [a.details for a in found if a.name == OFFSET_COMMITS]
        return [a for a in found if a.name != OFFSET_COMMITS], figures


# --- committed-offset-regression --------------------------------------------------------------

def test_an_answer_below_an_acknowledged_commit_is_a_regression():
    """Just outside: the commit of 10 was answered (t=50) before the fetch was asked (t=51)."""
    h = CommitHistory()
    h.commit(A, 5, 10, 20)
    h.commit(A, 10, 30, 50)
    h.fetch(B, 5, 51, 60)
    [anomaly], _ = h.judged()
    assert anomaly.name == REGRESSION and anomaly.details["acknowledged_floor"] == 10
    assert anomaly.details["rule"] == "kip848.committed_offset_kept"


def test_an_answer_during_the_commit_may_not_see_it_yet():
    """Just inside: the fetch was asked (t=49) before the commit of 10 was answered (t=50)."""
    h = CommitHistory()
    h.commit(A, 5, 10, 20)
    h.commit(A, 10, 30, 50)
    h.fetch(B, 5, 49, 60)
    found, figures = h.judged()
    assert found == [] and figures["at_floor"] == 1


def test_no_committed_offset_after_an_acknowledged_commit_is_a_regression():
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.fetch(B, None, 51, 60)
    [anomaly], _ = h.judged()
    assert anomaly.name == REGRESSION and anomaly.details["answer"] is None
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.fetch(B, None, 49, 60)  # asked before the answer
    assert h.judged()[0] == []


def test_a_lower_commit_of_another_member_may_lower_it_and_is_a_redelivery():
    """B resumed lower (its own explicit seek) and committed 7 after A's 10 was acknowledged: the
    group's offset went back by a commit; a fetch answering 7 sees 3 offsets again."""
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.commit(B, 7, 55, 70)
    h.fetch(A, 7, 60, 80)
    found, figures = h.judged()
    assert found == []
    assert figures["redeliveries"] == 1 and figures["redelivered_offsets"] == 3


def test_a_commit_replaced_for_certain_is_not_seen_again():
    """A's 12 was answered (t=40) before B's 7 was invoked (t=45), and B's 7 was answered before the
    fetch: answering 12 again is the offset going back to a replaced commit."""
    h = CommitHistory()
    h.commit(A, 12, 30, 40)
    h.commit(B, 7, 45, 50)
    h.fetch(A, 12, 51, 60)
    [anomaly], _ = h.judged()
    assert anomaly.name == SKIP and anomaly.details["acknowledged_floor"] == 7  # above the floor: a skip
    h = CommitHistory()
    h.commit(A, 12, 30, 46)  # answered after B's was invoked: either may have been applied last
    h.commit(B, 7, 45, 50)
    h.fetch(A, 12, 51, 60)
    assert h.judged()[0] == []


# --- resume-skip -------------------------------------------------------------------------------

def test_a_resume_above_every_commit_skips_records():
    """Just outside: no commit of 15 was invoked before the fetch was answered (t=60)."""
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.fetch(B, 15, 51, 60)
    h.commit(A, 15, 61)  # invoked after the answer
    [anomaly], _ = h.judged()
    assert anomaly.name == SKIP and anomaly.details["rule"] == "kip848.resume_within_commits"


def test_a_resume_at_an_open_async_commit_is_allowed():
    """Just inside: the async commit of 15 was invoked (t=59) before the answer and never answered
    (its client closed): it may have been applied."""
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.commit(A, 15, 59)
    h.fetch(B, 15, 51, 60)
    found, figures = h.judged()
    assert found == [] and figures["ahead_of_floor"] == 1 and figures["commits"][kip848.MAYBE] == 1


@pytest.mark.parametrize("error, type_, allowed", [
    ("REQUEST_TIMED_OUT: timed out", "info", True),  # appended, timed out waiting for replication
    ("NOT_COORDINATOR: moved", "info", True),  # the coordinator unloaded with the write pending
    ("STALE_MEMBER_EPOCH: stale", "fail", False),  # refused by validation: nothing written
    ("ILLEGAL_GENERATION: old", "fail", False),
    ("COORDINATOR_NOT_AVAILABLE: x", "fail", True),  # a fail is judged by its error, not trusted as refused
    ("no commit answer before the client closed", "info", True),  # no answer at all
])
def test_an_error_answer_may_still_have_applied_a_commit_unless_validation_refused_it(error, type_, allowed):
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.commit(A, 15, 52, 55, type_=type_, error=error)
    h.fetch(B, 15, 56, 60)
    found, _ = h.judged()
    assert (found == []) is allowed
    if not allowed:
        assert found[0].name == SKIP


S = 1_000_000_000  # ns


@pytest.mark.parametrize("span_s, fault, allowed", [
    (4.9, None, False),  # just outside: one attempt, refused by validation: nothing written
    (5.0, None, True),  # an attempt may have waited out offsets.commit.timeout.ms and been retried
    (1.0, (0.5, 1.5), True),  # a fault in force: the coordinator may have moved, the answer may be a retry's
    (1.0, (2.5, 3.0), True),  # a fault stopped 0.5 s after the answer: still settling (fault_windows)
    (1.0, (9.0, 10.0), False),  # a fault long after the answer: nothing to retry
])
def test_a_refusal_proves_nothing_was_written_only_when_the_commit_cannot_have_been_retried(span_s, fault, allowed):
    """librdkafka retries an OffsetCommit after REQUEST_TIMED_OUT or NOT_COORDINATOR (whose write
    may stand) and reports the retry's answer: ILLEGAL_GENERATION then refuses only the retry."""
    h = CommitHistory()
    h.commit(A, 10, 1 * S, 2 * S)
    h.commit(A, 15, 2 * S, int((2 + span_s) * S), type_="fail", error="ILLEGAL_GENERATION: old")
    if fault:
        h._add(int(fault[0] * S), "nemesis", "invoke", "fault", {"fault": "kill", "phase": "start"})
        h._add(int(fault[1] * S), "nemesis", "ok", "fault", {"fault": "kill", "phase": "stop"})
    h.fetch(B, 15, 20 * S, 21 * S)
    found, figures = h.judged()
    assert (found == []) is allowed
    assert figures["commits"][kip848.REFUSED] == (0 if allowed else 1)
    if not allowed:
        assert found[0].name == SKIP


def test_a_first_answer_without_commits_is_allowed_only_as_none():
    h = CommitHistory()
    h.fetch(A, None, 1, 2)
    found, figures = h.judged()
    assert found == [] and figures["no_committed_offset"] == 1
    h = CommitHistory()
    h.fetch(A, 3, 1, 2)  # an offset nobody committed
    [anomaly], _ = h.judged()
    assert anomaly.name == SKIP


def test_partitions_and_groups_are_judged_apart():
    h = CommitHistory()
    h.commit(A, 10, 30, 50, partition=1)
    h.fetch(B, None, 51, 60, partition=0)  # partition 0 had no commit
    assert h.judged()[0] == []


# --- the verdict ---------------------------------------------------------------------------------

def test_the_checker_reports_both_by_name_with_coverage_and_figures():
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.fetch(B, 5, 51, 60)
    h.fetch(B, 20, 61, 70, partition=0)
    verdict = check_records(h.records)
    assert verdict["valid"] is False and verdict["anomalies"][REGRESSION] and verdict["anomalies"][SKIP]
    assert verdict["coverage"]["kip848.committed_offset_kept"]["observations"] == 2
    assert verdict["conformance"]["KIP-848"]["kip848.resume_within_commits"]["status"] == "fails"
    assert verdict[OFFSET_COMMITS]["commits"][kip848.APPLIED] == 1 and verdict[OFFSET_COMMITS]["answers"] == 2


def test_a_history_without_commits_has_an_empty_block():
    verdict = check_records([{"index": 0, "time": 0, "process": 1, "type": "invoke", "f": "poll", "value": {}}])
    assert verdict[OFFSET_COMMITS]["answers"] == 0


@pytest.mark.parametrize("error, answered, outcome", [
    (None, True, kip848.APPLIED), ("STALE_MEMBER_EPOCH: x", True, kip848.REFUSED),
    ("REQUEST_TIMED_OUT: x", True, kip848.MAYBE), (None, False, kip848.MAYBE)])
def test_the_model_reads_a_commit_outcome_from_its_answer(error, answered, outcome):
    assert kip848.commit_outcome(error, answered) == outcome
    assert kip848.commit_outcome(error, answered, retried=True) == (kip848.MAYBE if error else outcome)


# --- where a subscriber's first read after its resume starts (poll-skip) -------------------------

def _resumed_reads(resume, first_reads, sent=range(0, 12)):
    records = [{"time": 0, "process": 1, "type": "invoke", "f": "send",
                "value": {"topic": "t", "partition": 0, "value": f"v{o}"}} for o in sent]
    records += [{"time": 0, "process": 1, "type": "ok", "f": "send",
                 "value": {"topic": "t", "partition": 0, "value": f"v{o}", "offset": o}} for o in sent]
    assign = {"partitions": [["t", 0]], "rebalance": True, "group": "g", "member": "m", "resume": {"t/0": resume}}
    records += [{"time": 0, "process": 2, "type": t, "f": "assign", "value": assign} for t in ("invoke", "ok")]
    records.append({"time": 0, "process": 2, "type": "ok", "f": "poll",
                    "value": {"records": [["t", 0, o, f"v{o}"] for o in first_reads]}})
    return [{**r, "index": i} for i, r in enumerate(records)]


def test_a_first_read_above_the_resume_position_skips():
    """Just outside: resumed at 5, the first read is 6 although 5 exists."""
    verdict = check_records(_resumed_reads(5, [6, 7]))
    [skip] = verdict["anomalies"]["poll-skip"]
    assert skip["skipped"] == 5 and "resumed at offset 5" in skip["message"]


def test_a_first_read_at_the_resume_position_or_below_it_is_no_anomaly():
    """Just inside: the read starts at 5; a read below it is the position reset (out of range), not a
    read going back."""
    for reads in ([5, 6], [0, 1]):
        verdict = check_records(_resumed_reads(5, reads))
        assert not verdict["anomalies"]["poll-skip"] and not verdict["anomalies"]["nonmonotonic-poll"], reads


def test_the_check_command_prints_the_commit_figures():
    from kipcheck.checks.cli_check import commits_line
    h = CommitHistory()
    h.commit(A, 10, 30, 50)
    h.commit(B, 7, 55, 70)
    h.fetch(A, 7, 60, 80)
    line = commits_line(check_records(h.records))
    assert "2 acknowledged" in line and "redeliveries 1 of 3 offsets" in line
    assert commits_line({"offset_commits": {"commits": {}, "answers": 0}}) is None
