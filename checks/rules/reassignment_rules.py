"""KIP-455 reassignment completion, judged from the controller's metadata log:
`premature-reassignment-completion`.

Per partition the metadata log's records (`partition_change`, harness/metadata_log.py) are
replayed in log order through `kip455.created` / `kip455.changed`, and every record is asked of
`kip455.completion_allowed` against the state before it. Only a record that ends a reassignment
by moving to its target is judged (a cancellation goes back to the original replicas); the log
is complete and ordered, so the ISR the record leaves is the controller's own, not a sample.
A partition whose creation the log no longer holds (compacted into a snapshot) is judged from
its first record on.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

from kipcheck.reference_model import kip455, profiles

from kipcheck.checks.rules.base import DEVIATIONS, RULE, Anomaly, BaseRule

F = "partition_change"
ANOMALY = "premature-reassignment-completion"


def _state(before: kip455.Assignment | None, v: dict) -> kip455.Assignment:
    if v.get("kind") == "create" or before is None:
        return kip455.created(v.get("replicas"), v.get("isr"), v.get("adding"), v.get("removing"))
    return kip455.changed(before, v.get("replicas"), v.get("isr"), v.get("adding"), v.get("removing"))


def ends_a_move(value: dict) -> bool:
    """Whether a `partition_change` value ends a reassignment (completes or cancels it): it sets the
    replicas and empties the adding or removing ones, which PartitionChangeBuilder writes only when they change."""
    return value.get("kind") == "change" and "replicas" in value \
        and (value.get("adding") == [] or value.get("removing") == [])


def replay(records: Iterable[dict]) -> Iterator[tuple[dict | None, dict, kip455.Assignment | None, kip455.Assignment]]:
    """Each `partition_change` record with the one before it of its partition, in log order, and the
    state before and after it."""
    last: dict[tuple, tuple[dict, kip455.Assignment]] = {}
    for r in sorted(records, key=lambda r: (r["value"].get("offset", 0), r["index"])):
        tp = (r["value"].get("topic"), r["value"].get("partition"))
        previous, before = last.get(tp, (None, None))
        after = _state(before, r["value"])
        yield previous, r, before, after
        last[tp] = (r, after)


class ReassignmentRule(BaseRule):
    """One group: every partition's metadata log records."""

    anomalies = (ANOMALY,)
    key = "reassignments"
    fs = frozenset((F,))

    def reads(self, f: str, type_: str) -> bool:
        return f == F and type_ == "ok"

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") == F and record.get("type") == "ok":
            yield self.key

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        return [_anomaly(previous, r, before, after, profile) for previous, r, before, after in replay(records)
                if before is not None and not kip455.completion_allowed(before, after)]


def _anomaly(previous: dict, r: dict, before: kip455.Assignment, after: kip455.Assignment, profile: str) -> Anomaly:
    v = r["value"]
    known = kip455.completion_allowed(before, after, profile)
    outside = sorted(set(after.replicas) - set(after.isr))
    return Anomaly(
        ANOMALY, (previous["index"], r["index"]),
        f"the controller completed the reassignment of {v.get('topic')}/{v.get('partition')} to "
        f"{list(after.replicas)} (metadata log offset {v.get('offset')}) with {outside} out of the ISR "
        f"{list(after.isr)}: the adding replicas {list(before.adding)} were in sync, not every target "
        f"replica (removed: {list(before.removing)})",
        known=known,
        details={"topic": v.get("topic"), "partition": v.get("partition"), "offset": v.get("offset"),
                 "log_time_ms": v.get("log_time_ms"), "replicas": list(after.replicas),
                 "isr": list(after.isr), "adding": list(before.adding), "removing": list(before.removing),
                 "out_of_isr": outside, RULE: "kip455.completion_allowed",
                 **({DEVIATIONS: [profiles.REASSIGNMENT_COMPLETES_ON_ADDING]} if known else {})})
