"""KIP-848 offset commits of a consumer group, judged from its members' own records:
`committed-offset-regression` and `resume-skip`, and the redeliveries a handoff caused.

Each subscriber records its commits (`commit`: the group, the member, `offsets`
{"topic/partition": next offset}; `ok`, or `fail` / `info` with the error) and, when a rebalance
gives it partitions, the group's committed offsets it asked for them (`committed`: the
OffsetFetch answer, `offsets` {"topic/partition": offset or null}), from which it resumes
(docs/history.md). A commit's outcome is read by `kip848.commit_outcome`: an answer without
error applied it, an error the coordinator's validation raises refused it, anything else (a
write error, no answer) may or may not have applied it.

Per group and partition every `committed` answer is judged against every commit of the group
(`kip848.committed_offset_kept`, `kip848.resume_within_commits`), once the history is whole:
a commit invoked before the answer may have been applied before it, whatever its own answer
says later. A member's commits are its reads plus one, so a member whose commits went back
without a seek read backwards first (`nonmonotonic-poll`'s); only the group's view is judged here.

The rule is one group for the run; it also fills the verdict's `"offset_commits"` block: commits
by outcome, answers by where the member resumed (at the acknowledged floor, below it: a
redelivery, counted with its offsets; above it: from a commit still open), and answers with no
committed offset (reset to earliest).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kipcheck.reference_model import kip848

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.kip1166_rules import fault_windows, touched

COMMIT, COMMITTED = "commit", "committed"
#: records of what may make a client resend a commit (a fault, a rolling upgrade's restarts)
_RETRY_CAUSES = ("fault", "upgrade")
REGRESSION, SKIP = "committed-offset-regression", "resume-skip"
COMMIT_ANOMALIES = (REGRESSION, SKIP)
#: the verdict block the rule's summary row fills
OFFSET_COMMITS = "offset_commits"
GROUP = "commits"


@dataclass
class _Fetch:
    """One partition's answer of a `committed` op."""
    invoke_index: int
    index: int
    asked: int
    answered: int
    process: object
    answer: int | None


@dataclass
class _Partition:
    commits: list = field(default_factory=list)  # [kip848.Commit, invoke index, completion index]
    fetches: list = field(default_factory=list)


def is_offset_fetch_answer(record: dict) -> bool:
    """An answered `committed` (a member's OffsetFetch) of a named group: what the rules judge."""
    return record.get("f") == COMMITTED and record.get("type") == "ok" \
        and isinstance((record.get("value") or {}).get("group"), str)


def _split_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


class CommitRule(BaseRule):
    """One group: every `commit` and `committed` record of every consumer group."""

    anomalies = COMMIT_ANOMALIES
    summary = OFFSET_COMMITS
    key = GROUP
    streams = True
    fs = frozenset((COMMIT, COMMITTED, *_RETRY_CAUSES))

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in (COMMIT, COMMITTED) and isinstance((record.get("value") or {}).get("group"), str) \
                or record.get("f") in _RETRY_CAUSES:
            yield GROUP

    def start(self, key: str, profile: str) -> "_Judge":
        return _Judge()


class _Judge:
    def __init__(self):
        self.open: dict[tuple, dict] = {}  # (process, f) -> invoke record
        self.partitions: dict[tuple, _Partition] = {}  # (group, topic, partition)
        self.outcomes = {o: 0 for o in kip848.COMMIT_OUTCOMES}
        self.answered: list[tuple] = []  # (invoke, completion) of each answered commit, judged at the end
        self.faults: list[dict] = []  # fault and upgrade records: when a commit may have been retried

    def _partition(self, group: str, key: str) -> _Partition:
        return self.partitions.setdefault((group, *_split_key(key)), _Partition())

    def add(self, r: dict) -> None:
        f, t, v = r.get("f"), r.get("type"), r.get("value") or {}
        if f in _RETRY_CAUSES:
            self.faults.append(r)
            return
        k = (r.get("process"), f)
        if t == "invoke":
            self.open[k] = r
            return
        inv = self.open.pop(k, None) or r
        group = v.get("group")
        if f == COMMIT:
            self.answered.append((inv, r))
        elif f == COMMITTED and t == "ok":
            for key, answer in (v.get("offsets") or {}).items():
                self._partition(group, key).fetches.append(_Fetch(
                    inv["index"], r["index"], inv.get("time", 0), r.get("time", 0), r.get("process"),
                    answer if isinstance(answer, int) and answer >= 0 else None))

    def _commit(self, group: str, inv: dict, done: dict | None, outcome: str) -> None:
        self.outcomes[outcome] += 1
        answered = done.get("time", 0) if done is not None and outcome != kip848.MAYBE else None
        for key, offset in ((inv.get("value") or {}).get("offsets") or {}).items():
            if isinstance(offset, int):
                self._partition(group, key).commits.append(
                    (kip848.Commit(offset, inv.get("time", 0), answered, outcome), inv["index"],
                     done["index"] if done is not None else None))

    def _outcomes(self) -> None:
        """Each answered commit's outcome: the error decides, not the completion's type (an error
        answer may still have been applied), and a refusal only when the client cannot have sent
        the commit before (`kip848.may_have_been_retried`: a fault, or an upgrade, touched it)."""
        windows = fault_windows(self.faults)
        upgrades = [r.get("time", 0) for r in self.faults if r.get("f") == "upgrade"]
        if upgrades:
            windows.append((min(upgrades), max(upgrades), None))
        for inv, done in self.answered:
            begin, end = inv.get("time", 0), done.get("time", 0)
            retried = kip848.may_have_been_retried(end - begin, touched(windows, begin, end, None))
            v = done.get("value") or {}
            outcome = kip848.commit_outcome(v.get("error"), answered=done.get("type") != "info", retried=retried)
            self._commit(v.get("group"), inv, done, outcome)

    def finish(self) -> list[Anomaly]:
        self._outcomes()
        for (process, f), inv in self.open.items():  # the history ended before these were answered
            if f == COMMIT:
                self._commit((inv.get("value") or {}).get("group"), inv, None, kip848.MAYBE)
        self.open = {}
        out: list[Anomaly] = []
        figures = {"commits": dict(self.outcomes), "answers": 0, "no_committed_offset": 0, "at_floor": 0,
                   "ahead_of_floor": 0, "redeliveries": 0, "redelivered_offsets": 0}
        for (group, topic, partition), part in sorted(self.partitions.items(), key=lambda kv: str(kv[0])):
            commits = [c for c, _, _ in part.commits]
            for fetch in part.fetches:
                out += _judge(fetch, commits, part.commits, group, topic, partition, figures)
        out.append(Anomaly(OFFSET_COMMITS, (), "offset commits", details=figures))
        return out


def _judge(fetch: _Fetch, commits: list, recorded: list, group, topic, partition, figures: dict) -> list[Anomaly]:
    """One answer against the group's commits of the partition; counts where the member resumed."""
    figures["answers"] += 1
    answer = fetch.answer
    floor = kip848.acknowledged_floor(commits, fetch.asked)
    kept = kip848.committed_offset_kept(answer, commits, fetch.asked, fetch.answered)
    within = kip848.resume_within_commits(answer, commits, fetch.asked, fetch.answered)
    if kept and within:
        if answer is None:
            figures["no_committed_offset"] += 1
        elif floor is None or answer > floor:
            figures["ahead_of_floor"] += 1
        elif answer == floor:
            figures["at_floor"] += 1
        else:
            figures["redeliveries"] += 1
            figures["redelivered_offsets"] += kip848.redelivered(answer, commits, fetch.asked)
        return []
    # the proof: the acknowledged commit(s) at the floor, or the last commit invoked before the answer
    proof = [(inv, done) for c, inv, done in recorded
             if (floor is not None and c.offset == floor and c.outcome == kip848.APPLIED
                 and c.answered is not None and c.answered < fetch.asked)]
    indices = tuple(sorted({fetch.invoke_index, fetch.index, *(i for pair in proof[-1:] for i in pair if i is not None)}))
    where = f"partition {topic}/{partition} of group {group}"
    details = {"group": group, "topic": topic, "partition": partition, "process": fetch.process, "answer": answer,
               "acknowledged_floor": floor,
               "possible": sorted((o for o in kip848.possible_committed_offsets(commits, fetch.asked, fetch.answered)
                                   if o is not None))[-5:]}
    if not kept:
        return [Anomaly(REGRESSION, indices,
                        f"the committed offset of {where} went back: a commit of {floor} was acknowledged before "
                        f"the OffsetFetch at record {fetch.invoke_index}, which answered "
                        f"{'no committed offset' if answer is None else answer}, and no commit that could have "
                        f"been applied meanwhile set that",
                        details={**details, RULE: "kip848.committed_offset_kept"})]
    return [Anomaly(SKIP, indices,
                    f"process {fetch.process} resumed {where} at {answer} (OffsetFetch at record {fetch.invoke_index}), "
                    f"above the acknowledged commit {floor} and above every commit that could have been applied: "
                    f"the records between were skipped by the group",
                    details={**details, RULE: "kip848.resume_within_commits"})]
