"""KIP-848 partition ownership in a consumer group, judged from the members' own callbacks:
`group-ownership-violation`.

Each subscriber records its rebalance callbacks (harness/clients/workload.py): an `assign`
with `"rebalance": true` when partitions are given to it, a `revoke` (`"lost": true` when it
was fenced) when they are taken away, both naming the group and the member. The history is one
clock, so the order of two members' records is the order in which their callbacks ran.

Per group and partition the rule keeps who owns it. When a member is given a partition another
member still owns, the handoff waits for what that owner does next: it is judged by
`kip848.handoff_allowed` once the owner revokes it (lost or not) or its client fails, and a
handoff whose owner did neither before the history ends is not judged (nothing proves it held on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from kipcheck.reference_model import kip848

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule

ASSIGN, REVOKE = "assign", "revoke"
ANOMALY = "group-ownership-violation"


def is_group_assign(record: dict) -> bool:
    """An `assign` a rebalance made (a subscriber's callback), naming its group."""
    v = record.get("value") or {}
    return record.get("f") == ASSIGN and v.get("rebalance") is True and isinstance(v.get("group"), str)


def _ends_a_client(record: dict) -> bool:
    """A record after which its process issues nothing more: a fatal failure (the worker replaces its client)."""
    return record.get("type") != "invoke" and (record.get("value") or {}).get("fatal") is True


@dataclass
class _Ownership:
    process: object
    assigned_at: int  # the history index of the assign that gave it
    #: later assigns of the same partition to other members while this one still owned it
    handed_to: list[int] = field(default_factory=list)


class GroupOwnershipRule(BaseRule):
    """One group: every rebalance callback of every consumer group, and every client failure."""

    anomalies = (ANOMALY,)
    key = "groups"

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("type") == "invoke" and (is_group_assign(record) or record.get("f") == REVOKE) \
                or _ends_a_client(record):
            yield self.key

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        owners: dict[tuple, dict[object, _Ownership]] = {}  # (group, topic, partition) -> process -> ownership
        out: list[Anomaly] = []
        for r in records:
            v, process = r.get("value") or {}, r.get("process")
            if r.get("type") == "invoke" and is_group_assign(r):
                for topic, partition in v.get("partitions") or ():
                    held = owners.setdefault((v["group"], topic, partition), {})
                    for other in held.values():
                        if other.process != process:
                            other.handed_to.append(r["index"])
                    held.setdefault(process, _Ownership(process, r["index"]))
            elif r.get("type") == "invoke" and r.get("f") == REVOKE:
                state = kip848.FENCED if v.get("lost") else kip848.HELD
                for topic, partition in v.get("partitions") or ():
                    ownership = owners.get((v.get("group"), topic, partition), {}).pop(process, None)
                    if ownership is not None:
                        out += _judge(ownership, state, r, v.get("group"), topic, partition)
            elif _ends_a_client(r):
                for key, held in owners.items():
                    ownership = held.pop(process, None)
                    if ownership is not None:
                        out += _judge(ownership, kip848.GONE, r, *key)
        return out


def _judge(ownership: _Ownership, state: str, ended: dict, group, topic, partition) -> list[Anomaly]:
    """The handoffs made while `ownership` lasted, judged by how it ended (`ended`, in `state`)."""
    if not ownership.handed_to or kip848.handoff_allowed(state):
        return []
    given = ownership.handed_to[0]
    return [Anomaly(
        ANOMALY, (ownership.assigned_at, given, ended["index"]),
        f"partition {topic}/{partition} of group {group} was given to another member (record {given}) while "
        f"member process {ownership.process} still owned it (given at record {ownership.assigned_at}); that owner "
        f"revoked it only afterwards, at record {ended['index']}, as an ordinary revocation, not as lost: two "
        f"members owned it at once",
        details={"group": group, "topic": topic, "partition": partition, "owner_process": ownership.process,
                 "owner_state": state, "handoffs": len(ownership.handed_to), RULE: "kip848.handoff_allowed"})]
