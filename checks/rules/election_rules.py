"""KIP-966 leader eligibility, judged from the controller's metadata log: `ineligible-leader`.

The harness appends the log's partition records after a run (harness/metadata_log.py:
`partition_change`, one per PartitionRecord or PartitionChangeRecord, with its log offset).
Per partition they are replayed in log order through `kip966.created` / `kip966.changed`,
and every state is asked of `kip966.may_lead`: the first (a creation) against no leader and
its own ISR and ELR, every later one against the state before it. The log is complete and
ordered, so no sampling gap can make an eligible leader look ineligible; a partition whose
creation the log no longer holds (compacted into a snapshot) is judged from its first
record on.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from kipcheck.reference_model import kip966

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule

F = "partition_change"


def decides(value: dict) -> bool:
    """Whether a `partition_change` value is one `may_lead` judges: a creation, or a change naming a leader."""
    return value.get("kind") == "create" or isinstance(value.get("leader"), int) and value["leader"] >= 0


def _state(before: kip966.PartitionState | None, v: dict) -> kip966.PartitionState:
    if v.get("kind") == "create" or before is None:
        return kip966.created(v.get("leader", kip966.NO_LEADER), v.get("isr") or (), v.get("elr") or (),
                              v.get("recovery", 0), v.get("last_known_elr") or ())
    return kip966.changed(before, v.get("leader"), v.get("isr"), v.get("elr"), v.get("recovery"),
                          v.get("last_known_elr"))


def _unclean_asked(record: dict) -> bool:
    """An `elect-unclean` fault: kipcheck's only way to permit an unclean election (its brokers run
    with unclean.leader.election.enable false, harness/backends/node.py)."""
    return record.get("f") == "fault" and (record.get("value") or {}).get("fault") == "elect-unclean"


class ElectionRule(BaseRule):
    """One group: every partition's records, and whether the run asked for an unclean election."""

    anomalies = ("ineligible-leader",)
    key = "elections"
    fs = frozenset((F, "fault"))

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") == F and record.get("type") == "ok" or _unclean_asked(record):
            yield self.key

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        unclean_permitted = any(_unclean_asked(r) for r in records)
        by_partition: dict[tuple, list[dict]] = {}
        for r in records:
            if r.get("f") == F:
                by_partition.setdefault((r["value"].get("topic"), r["value"].get("partition")), []).append(r)
        return [a for rs in by_partition.values() for a in self._partition(rs, unclean_permitted)]

    @staticmethod
    def _partition(records: list[dict], unclean_permitted: bool) -> list[Anomaly]:
        out, before, last_index = [], None, None
        for r in sorted(records, key=lambda r: (r["value"].get("offset", 0), r["index"])):
            v = r["value"]
            after = _state(before, v)
            # a creation is judged against no leader with its own ISR and ELR
            judged_from = kip966.created(kip966.NO_LEADER, after.isr, after.elr) if v.get("kind") == "create" \
                else before
            new_replicas = v.get("replicas") if v.get("kind") == "change" else None
            if judged_from is not None and decides(v) and not kip966.may_lead(judged_from, after, unclean_permitted,
                                                                               new_replicas):
                proof = (r["index"],) if last_index is None or v.get("kind") == "create" else (last_index, r["index"])
                out.append(Anomaly(
                    "ineligible-leader", proof,
                    f"the controller made broker {after.leader} leader of {v.get('topic')}/{v.get('partition')} "
                    f"(metadata log offset {v.get('offset')}) though it was in neither the ISR {list(judged_from.isr)} "
                    f"nor the ELR {list(judged_from.elr)}, and the change is no unclean election that could happen "
                    f"(recovery state {after.recovery}, ISR {list(after.isr)}, last known ELR "
                    f"{list(judged_from.last_known_elr)}, unclean election asked: {unclean_permitted})",
                    details={"topic": v.get("topic"), "partition": v.get("partition"), "leader": after.leader,
                             "offset": v.get("offset"), "log_time_ms": v.get("log_time_ms"),
                             "isr_before": list(judged_from.isr),
                             "elr_before": list(judged_from.elr), RULE: "kip966.may_lead"}))
            before, last_index = after, r["index"]
        return out
