"""The contract between the checker engines and the rules they run.

A rule looks at one *group* of history records (for example every record about one
topic-partition, or every fetch of one fetch session) and returns the anomalies it
proves. Engines (local Python, Spark) only group records and gather results; all
judgement lives in rules, so both engines give the same answer by construction.

A record is the plain dict of one history line (docs/history.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Protocol, Sequence


#: the key of an anomaly's `details` that names the model rule (`module.function` of
#: `reference_model`, one of checks.coverage.OBSERVED) the observation broke. The rule that
#: raises the anomaly names it, and nothing else maps anomalies to model rules: the verdict
#: counts them per model rule (checks.verdict) and the conformance table reads those counts.
RULE = "rule"
#: the key of a known anomaly's `details` that names the profile deviations accepting it
#: (checks.rules.observe.known_as); the verdict counts known anomalies per deviation.
DEVIATIONS = "deviations"
#: the name of an `Anomaly` that is no deviation but a reason the history could not be
#: decided (checks.verdict: it makes the verdict "unknown" unless an anomaly is proven)
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Anomaly:
    """One proven deviation. `indices` are the history indices that prove it."""

    name: str  # one of the anomaly names of docs/checker.md, e.g. "lost-write"
    indices: tuple[int, ...]
    message: str
    known: bool = False  # accepted by the chosen profile: reported under "known"
    details: dict = field(default_factory=dict)

    def as_example(self) -> dict:
        return {"indices": list(self.indices), "message": self.message, **self.details}


class Judge(Protocol):
    """One group judged as its records stream by (`Rule.start`)."""

    def add(self, record: dict) -> None:
        """The group's next record, in index order."""

    def finish(self) -> list[Anomaly]:
        """The group's anomalies: what `Rule.check_group` gives on the same records."""


class Rule(Protocol):
    """A checker rule. Pure: no I/O, no cluster, same input -> same output.

    Everything the engines (checks.verdict, checks.engine_local, checks.engine_spark) ask of
    a rule; `BaseRule` gives every part but `group_keys` a default, and every rule extends it."""

    #: anomaly names this rule can produce (for documentation and counts)
    anomalies: tuple[str, ...]
    #: True: `start` gives a judge per group, and engines stream each group through it
    #: instead of holding it (`check_group` is then start/add/finish)
    streams: bool
    #: True: `check_group` reads its records once, in order: engines may pass a one-pass
    #: iterable (records decoded as they stream by) instead of a list
    one_pass: bool
    #: the verdict block this rule's one summary row fills ("liveness", "coverage"), or None:
    #: a row of that name is no anomaly (checks.verdict.summaries)
    summary: str | None
    #: the key of the rule's only group (a summary rule's, a whole-history rule's), or None
    key: str | None
    #: the operations (`f`) whose records `split` may give a group, or None: any operation
    fs: frozenset | None

    def reads(self, f: str, type_: str) -> bool:
        """Whether `split` may give a group anything for a record of this `f` and `type`: the
        engines offer a record only to the rules that read its kind (checks.verdict.Dispatch),
        so a False here must mean `split` gives nothing for every such record."""

    def group_keys(self, record: dict) -> Iterable[str]:
        """The groups this record belongs to (empty: the rule ignores it).

        A record may belong to several groups, e.g. a metadata record is context
        for every fetch group of its partition."""

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """The keys of `group_keys` (sorted, once each), each with the part of the record
        that group reads, so engines move and hold less (checks.verdict.Dispatch.keyed)."""

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """Judge one group. `records` are sorted by `index`."""

    def check_group(self, key: str, records: Iterable[dict], profile: str) -> list[Anomaly]:
        """Judge the group `key` (engines call this: checks.verdict.run_rule)."""

    def streams_group(self, key: str) -> bool:
        """Whether the group `key` is judged as its records stream by (`start`): `streams` for
        every group of a streaming rule; a rule that judges its other groups whole may stream
        one it reads once in order, so that engines need not hold it."""

    def start(self, key: str, profile: str) -> Judge:
        """A judge for the group `key` (only when `streams_group(key)`)."""


class BaseRule:
    """`Rule`'s defaults. A rule gives `group_keys` and either `check` (it judges whole
    groups) or `start` with `streams = True` (it judges a group as its records stream by:
    `check_group` and `check` are then built on start/add/finish here, the one place that
    loop is written)."""

    anomalies: tuple[str, ...] = ()
    streams = False
    one_pass = False
    summary: str | None = None
    key: str | None = None
    fs: frozenset | None = None

    def reads(self, f: str, type_: str) -> bool:
        """By `fs` alone (None: every record is offered); a rule that reads only some types of an
        operation says so here."""
        return self.fs is None or f in self.fs

    def group_keys(self, record: dict) -> Iterable[str]:
        raise NotImplementedError

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """Every group of the record sees it whole."""
        keys = [*self.group_keys(record)]
        if not keys:
            return []
        if len(keys) > 1:
            keys = sorted(set(keys))
        return [(key, record) for key in keys]

    def streams_group(self, key: str) -> bool:
        return self.streams

    def start(self, key: str, profile: str) -> Judge:
        raise NotImplementedError(f"{type(self).__name__} judges whole groups (streams = False)")

    def check_group(self, key: str, records: Iterable[dict], profile: str) -> list[Anomaly]:
        """A streamed group's start/add/finish over the records; another group's `check`."""
        if not self.streams_group(key):
            return self.check(records, profile)
        judge = self.start(key, profile)
        add = judge.add
        for r in records:
            add(r)
        return judge.finish()

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """For a streaming rule: `check_group` under its one `key`, or the key every record
        shares (no records, no group: nothing to judge)."""
        if not self.streams:
            raise NotImplementedError(f"{type(self).__name__} gives neither `check` nor `start`")
        if self.key is not None:
            return self.check_group(self.key, records, profile)
        return self.check_group(common_key(self, records), records, profile) if records else []


def common_key(rule: Rule, records: Sequence[dict]) -> str:
    """The one key every record of the group shares (for callers of plain `check`)."""
    keys: set | None = None
    for r in records:
        keys = set(rule.group_keys(r)) if keys is None else keys & set(rule.group_keys(r))
        if len(keys) == 1:
            return next(iter(keys))
    raise ValueError(f"records do not name one partition: {sorted(keys or ())}")
