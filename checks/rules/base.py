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


class Rule(Protocol):
    """A checker rule. Pure: no I/O, no cluster, same input -> same output."""

    #: anomaly names this rule can produce (for documentation and counts)
    anomalies: tuple[str, ...]

    def group_keys(self, record: dict) -> Iterable[str]:
        """The groups this record belongs to (empty: the rule ignores it).

        A record may belong to several groups, e.g. a metadata record is context
        for every fetch group of its partition."""

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """Judge one group. `records` are sorted by `index`."""
