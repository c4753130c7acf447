"""KIP-848 liveness of a consumer group, judged from its members' own records: `slow-rebalance`.

A partition of a group is freed when its last owner revokes it (the `revoke` callback, lost or
not, completed) or that owner's client fails (a `fatal` record). It must be owned again (some
member's rebalance `assign` gives it, from the start of its callback: `group_rules.callback_order`) by `kip848.reown_deadline`: the session timeout plus a
heartbeat interval (the brokers' own, as the run recorded them: `checks.recovery.group_liveness_rule`), not counting time a fault or a rolling upgrade was in force, after both the
freeing and the subscribe of a member of the group that was still there at that deadline (its
process recorded something later, and no failure of its client came before). Only such a member
proves the group could have taken the partition: with none, the freeing is not judged.

The rule is one group for the run, judged once the history is whole; a freeing judged is one
observation of `kip848.reowned_in_time` (coverage counts the partitions of every `revoke`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from kipcheck.reference_model import kip848

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.group_rules import REVOKE, _ends_a_client, callback_order, is_callback_fetch, is_group_assign
from kipcheck.checks.rules.kip1166_rules import fault_windows

ANOMALY = "slow-rebalance"
SUBSCRIBE, POLL = "subscribe", "poll"
#: records that pause the clock: the nemesis's faults and a rolling upgrade's steps
_PAUSING = frozenset(("fault", "upgrade"))


@dataclass(frozen=True)
class _Member:
    process: object
    group: str
    topics: frozenset
    since: int  # the subscribe's completion (ns)
    until: int  # its process's last record (ns)
    failed: bool  # its client failed (a fatal record): it may have left the group before `until`
    assigned: bool  # some rebalance gave it partitions (so the coordinator knew it by its member id)


def _pauses(records: Sequence[dict]) -> list[tuple[int, int]]:
    """Spans (ns) when a fault was in force (`kip1166_rules.fault_windows`: from its start to its
    stop's completion and a settling time) or a rolling upgrade ran (its first record to its last), merged."""
    spans = [(int(s), e) for s, e, _ in fault_windows([r for r in records if r.get("f") == "fault"])]
    upgrade = [r["time"] for r in records if r.get("f") == "upgrade"]
    if upgrade:
        spans.append((upgrade[0], upgrade[-1]))
    merged: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _members(records: Sequence[dict]) -> list[_Member]:
    """Every subscription of the history, with how long its process went on."""
    last: dict[object, int] = {}
    failed, assigned = set(), set()
    subscribed: dict[object, dict] = {}
    for r in records:
        last[r.get("process")] = r["time"]
        if _ends_a_client(r):
            failed.add(r.get("process"))
        elif is_group_assign(r):
            assigned.add(r.get("process"))
        elif r.get("f") == SUBSCRIBE and r.get("type") == "ok" and isinstance((r.get("value") or {}).get("group"), str):
            subscribed.setdefault(r.get("process"), r)
    return [_Member(p, r["value"]["group"], frozenset(r["value"].get("topics") or ()), r["time"], last[p], p in failed,
                    p in assigned) for p, r in subscribed.items()]


class GroupLivenessRule(BaseRule):
    """One group: subscriptions, rebalance callbacks, client failures, polls (a member still there), faults."""

    anomalies = (ANOMALY,)
    key = "group-liveness"

    def __init__(self, bound_ns: int = kip848.REOWN_BOUND_NS, source: str = "Kafka's default timeouts"):
        self.bound_ns, self.source = int(bound_ns), source  # `kip848.reown_bound_ns` of the run's settings

    def reads(self, f: str, type_: str) -> bool:
        """Assigns, OffsetFetches, faults and upgrades begun; every completion (a fatal one ends a client)."""
        return type_ != "invoke" or f in ("assign", "committed") or f in _PAUSING

    def group_keys(self, record: dict) -> Iterable[str]:
        f, type_ = record.get("f"), record.get("type")
        if (f in (POLL, SUBSCRIBE) and type_ == "ok" or f == REVOKE and type_ != "invoke" or f in _PAUSING
                or type_ == "invoke" and is_group_assign(record) or is_callback_fetch(record) or _ends_a_client(record)):
            yield self.key

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """An answered poll reaches the group bare: only that its member was still there (its
        process and time) and whether its client failed are read of it."""
        if record["f"] == POLL and record["type"] == "ok":
            return [(self.key, {**record, "value": {"fatal": True} if _ends_a_client(record) else {}})]
        return super().split(record)

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        records = sorted(records, key=lambda r: r["index"])
        pauses, members = _pauses(records), _members(records)
        owners: dict[tuple, set] = {}  # (group, topic, partition) -> owning processes
        freed: dict[tuple, dict] = {}  # (group, topic, partition) -> the record that freed it
        judged: list[tuple[tuple, dict, dict | None]] = []  # (key, freeing record, the assign that ended it)

        def release(key, process, r) -> None:
            held = owners.get(key)
            if held and process in held:
                held.discard(process)
                if not held:
                    freed[key] = r

        for r in callback_order(records):  # an assign counts from its callback's start (group_rules)
            v, process = r.get("value") or {}, r.get("process")
            if r.get("type") == "invoke" and is_group_assign(r):
                for topic, partition in v.get("partitions") or ():
                    key = (v["group"], topic, partition)
                    owners.setdefault(key, set()).add(process)
                    if key in freed:
                        judged.append((key, freed.pop(key), r))
            elif r.get("f") == REVOKE and r.get("type") != "invoke":
                for topic, partition in v.get("partitions") or ():
                    release((v.get("group"), topic, partition), process, r)
            elif _ends_a_client(r):
                for key in [k for k, held in owners.items() if process in held]:
                    release(key, process, r)
        judged += [(key, r, None) for key, r in freed.items()]
        return [a for key, r, given in judged for a in _judge(key, r, given, members, pauses, self.bound_ns, self.source)]


def _lingering_until(freed: int, group: str, members: list[_Member], pauses: list[tuple[int, int]], bound: int) -> int:
    """When the freeing's clock starts: at `freed`, or later while a member may linger. A client
    that closed before any rebalance gave it partitions may have closed with its join in flight,
    so without a member id to leave with: the coordinator keeps it, and may give it partitions,
    until its session times out (seen on 4.3.1: a member joined 0.1 s before its client closed, and
    was never heard of again). Such a member's end counts as a freeing of whatever it was given."""
    ends = [m.until for m in members if m.group == group and not m.assigned and m.until > freed]
    start = freed
    for end in sorted(ends):
        if end <= kip848.reown_deadline(start, start, pauses, bound):  # it may have taken the partition before the deadline
            start = max(start, end)
    return start


def _judge(key: tuple, freed: dict, given: dict | None, members: list[_Member],
           pauses: list[tuple[int, int]], bound: int, source: str) -> list[Anomaly]:
    """The freeing judged by the earliest deadline a member that stayed sets (none: not judged)."""
    group, topic, partition = key
    start = _lingering_until(freed["time"], group, members, pauses, bound)
    deadlines = []
    for m in members:
        if m.group != group or topic not in m.topics:
            continue
        deadline = kip848.reown_deadline(start, m.since, pauses, bound)
        if m.until > deadline and not (m.failed and m.until <= deadline):
            deadlines.append((deadline, m))
    if not deadlines:
        return []
    deadline, witness = min(deadlines, key=lambda d: d[0])
    if kip848.reowned_in_time(given["time"] if given else None, deadline):
        return []
    late = (f"given to a member again only at record {given.get('began', given['index'])}, "
            f"{(given['time'] - freed['time']) / 1e9:.1f} s "
            f"after" if given else "never given to a member again")
    return [Anomaly(
        ANOMALY, (freed["index"],) + ((given.get("began", given["index"]),) if given else ()),
        f"partition {topic}/{partition} of group {group} was freed at record {freed['index']} (its owner "
        f"{'revoked it' if freed.get('f') == REVOKE else 'failed'}) and {late}; member "
        f"process {witness.process} was in the group from {witness.since / 1e9:.1f} s to {witness.until / 1e9:.1f} s, "
        f"past the deadline at {deadline / 1e9:.1f} s (session timeout plus heartbeat interval, "
        f"{bound / 1e9:g} s without a fault in force, {source})",
        details={"group": group, "topic": topic, "partition": partition, "freed_at_s": round(freed["time"] / 1e9, 3),
                 "deadline_s": round(deadline / 1e9, 3), "bound_s": bound / 1e9, "witness_process": witness.process,
                 "owned_again_s": round(given["time"] / 1e9, 3) if given else None, RULE: "kip848.reowned_in_time"})]
