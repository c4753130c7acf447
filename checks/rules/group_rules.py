"""KIP-848 partition ownership in a consumer group, judged from the members' own callbacks:
`group-ownership-violation`.

Each subscriber records its rebalance callbacks (harness/clients/workload.py): an `assign`
with `"rebalance": true` when partitions are given to it, a `revoke` (`"lost": true` when it
was fenced) when they are taken away, both naming the group and the member. The history is one
clock, so the order of two members' records is the order in which their callbacks ran.

A subscriber's `assign` callback first asks the group's committed offsets of its new partitions
(a `committed` record, harness/clients/commits.py `resume`) and records the `assign` only once the
answer came, which may take the client's whole timeout (10 s): the member had been given the
partitions when its callback began, so each such `assign` counts from its `committed` invoke
(`callback_order`).

Per group and partition the rule keeps who owns it. When a member is given a partition another
member still owns, the handoff waits for what that owner does next: it is judged by
`kip848.handoff_allowed` once the owner revokes it (lost or not) or its client fails, and a
handoff whose owner did neither before the history ends is not judged (nothing proves it held on).

The coordinator's own view is judged too: every answered `group_describe` (its ConsumerGroupDescribe
answer, harness/clients/group_describer.py) by `kip848.assigned_to_one_member`. The callbacks show a
handoff only when the new member heard of it before the owner revoked; an answer listing one
partition for two members shows it while both are assigned, whichever callback runs first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

from kipcheck.reference_model import kip848

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule

ASSIGN, REVOKE, COMMITTED, DESCRIBE = "assign", "revoke", "committed", "group_describe"
ANOMALY = "group-ownership-violation"


def is_assigning_describe(record: dict) -> bool:
    """An answered `group_describe` in which some member has assigned partitions."""
    members = (record.get("value") or {}).get("members") if record.get("f") == DESCRIBE else None
    return record.get("type") == "ok" and isinstance(members, list) and any(m.get("assigned") for m in members)


def is_group_assign(record: dict) -> bool:
    """An `assign` a rebalance made (a subscriber's callback), naming its group."""
    v = record.get("value") or {}
    return record.get("f") == ASSIGN and v.get("rebalance") is True and isinstance(v.get("group"), str)


def is_callback_fetch(record: dict) -> bool:
    """A subscriber's OffsetFetch invoke (`committed`): its assign callback asks it before it records the `assign`."""
    v = record.get("value") or {}
    return record.get("f") == COMMITTED and record.get("type") == "invoke" and isinstance(v.get("group"), str)


def callback_order(records: Sequence[dict]) -> list[dict]:
    """`records` (in index order) with each rebalance `assign` moved back to where its callback
    began: the same process's last `committed` invoke before it, when that asked the same group,
    member and partitions (the callback's own OffsetFetch). The moved assign keeps its index and
    takes that invoke's time, and `began` names the invoke's index (the evidence that cites it)."""
    last_fetch: dict[object, dict] = {}
    moved: dict[int, dict] = {}  # the fetch's index -> the assign, moved there
    for r in records:
        if is_callback_fetch(r):
            last_fetch[r.get("process")] = r
        elif r.get("type") == "invoke" and is_group_assign(r):
            fetch, v = last_fetch.pop(r.get("process"), None), r["value"]
            w = (fetch or {}).get("value") or {}
            if fetch is not None and (w.get("group"), w.get("member")) == (v["group"], v.get("member")) \
                    and sorted(map(tuple, w.get("partitions") or ())) == sorted(map(tuple, v.get("partitions") or ())):
                moved[fetch["index"]] = {**r, "time": fetch["time"], "began": fetch["index"]}
    out, taken = [], {a["index"] for a in moved.values()}
    for r in records:
        if r["index"] in moved:
            out.append(moved[r["index"]])
        elif r["index"] not in taken:
            out.append(r)
    return out


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

    def reads(self, f: str, type_: str) -> bool:
        """Callbacks and OffsetFetches begun; every completion (a fatal one of any operation ends a client)."""
        return type_ != "invoke" or f in (ASSIGN, REVOKE, COMMITTED)

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("type") == "invoke" and (is_group_assign(record) or record.get("f") == REVOKE) \
                or is_callback_fetch(record) or _ends_a_client(record) or is_assigning_describe(record):
            yield self.key

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        owners: dict[tuple, dict[object, _Ownership]] = {}  # (group, topic, partition) -> process -> ownership
        out: list[Anomaly] = []
        for r in callback_order(sorted(records, key=lambda r: r["index"])):
            v, process = r.get("value") or {}, r.get("process")
            if r.get("type") == "invoke" and is_group_assign(r):
                for topic, partition in v.get("partitions") or ():
                    held = owners.setdefault((v["group"], topic, partition), {})
                    began = r.get("began", r["index"])  # the callback's OffsetFetch: the member had it by then
                    for other in held.values():
                        if other.process != process:
                            other.handed_to.append(began)
                    held.setdefault(process, _Ownership(process, began))
            elif r.get("type") == "invoke" and r.get("f") == REVOKE:
                state = kip848.FENCED if v.get("lost") else kip848.HELD
                for topic, partition in v.get("partitions") or ():
                    ownership = owners.get((v.get("group"), topic, partition), {}).pop(process, None)
                    if ownership is not None:
                        out += _judge(ownership, state, r, v.get("group"), topic, partition)
            elif is_assigning_describe(r):
                out += _judge_answer(r)
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


def _judge_answer(r: dict) -> list[Anomaly]:
    """A coordinator's answer that lists one partition for two members."""
    members = r["value"]["members"]
    if kip848.assigned_to_one_member([m.get("assigned") or () for m in members]):
        return []
    holders: dict[tuple, list] = {}
    for m in members:
        for tp in m.get("assigned") or ():
            holders.setdefault(tuple(tp), []).append(m.get("member"))
    (topic, partition), both = next((tp, ms) for tp, ms in sorted(holders.items()) if len(ms) > 1)
    group = r["value"].get("group")
    return [Anomaly(ANOMALY, (r["index"],),
                    f"the coordinator of group {group} listed partition {topic}/{partition} as assigned to members "
                    f"{', '.join(map(str, both))} in one ConsumerGroupDescribe answer (record {r['index']})",
                    details={"group": group, "topic": topic, "partition": partition, "members": both,
                             "source": "coordinator", RULE: "kip848.assigned_to_one_member"})]
