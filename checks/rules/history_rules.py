"""Client-visible log anomalies over `send`, `poll`, `assign` and `seek` records.

One rule, grouped by topic-partition, yields `lost-write`, `duplicate`,
`inconsistent-offset`, `nonmonotonic-poll` and `poll-skip` (DESIGN.md definitions): they
all need the same digest of a partition (who wrote and read which value at which offset),
so one grouping pass serves five checks. Conventions (DESIGN.md):

* offsets, not value positions, measure read continuity; a process's first read, and its
  first read after an `assign` or `seek` of the partition, may start anywhere;
* an `info` send may or may not have happened: it is never a lost write, but when a read
  shows its value, it happened at that offset;
* `poll-skip` is flagged only for offsets proven to exist: returned by some read or
  acknowledged by a send (compaction is off and the workload has no transactions, so
  there are no legitimate gaps in the offsets).

The partition log must also be linearisable as an append-only log: a send called after
another send was acknowledged must land at a higher offset. That is checked with the
bounded WGL search of `checks.linearize`. A violation means an offset held one record
when the earlier send was acknowledged and another one later, so it is reported as
`inconsistent-offset` with the two sends as proof.
"""
from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import Iterable, Sequence

from checks import linearize
from checks.rules.base import Anomaly
from checks.verdict import UNKNOWN

HISTORY_ANOMALIES = ("lost-write", "duplicate", "inconsistent-offset", "nonmonotonic-poll", "poll-skip")


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def _vkey(value):
    """A hashable, canonical form of a record value."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass
class Send:
    invoke: int  # history index of the invoke (or of the completion when none was seen)
    done: int | None  # index of the completion; None when the run ended first
    type: str  # "ok", "info", "fail" or "pending"
    value: object
    offset: int | None  # acknowledged offset (ok sends)
    call: float
    ret: float


@dataclass
class Digest:
    """What one partition's records say, in a form each check reads directly."""

    topic: str
    partition: int
    sends: list[Send]
    reads: list[tuple[int, object, list[tuple[int, object]]]]  # (index, process, [(offset, value)])
    resets: list[tuple[int, object]]  # (index, process) of assign/seek of this partition
    by_offset: dict  # offset -> {value: first index observing it}
    by_value: dict  # value -> {offset: first index observing it}
    read_values: set
    read_offsets: list[tuple[int, int]]  # sorted (offset, first index reading it)
    known_offsets: list[tuple[int, int]]  # sorted (offset, first index proving it exists)


def digest(records: Sequence[dict], topic: str, partition: int) -> Digest:
    sends: list[Send] = []
    pending: dict = {}
    reads, resets = [], []
    for r in records:
        f, t, v = r["f"], r["type"], r["value"]
        if f == "send":
            if t == "invoke":
                pending[r["process"]] = r
                continue
            inv = pending.pop(r["process"], None)
            off = v.get("offset")
            sends.append(Send(
                invoke=inv["index"] if inv else r["index"], done=r["index"], type=t,
                value=_vkey(v.get("value")),
                offset=off if t == "ok" and isinstance(off, int) and off >= 0 else None,
                call=inv["time"] if inv else r["time"],
                ret=linearize.INF if t == "info" else r["time"]))
        elif f == "poll" and t == "ok":
            mine = [(rec[2], rec[3] if type(rec[3]) is str else _vkey(rec[3])) for rec in v["records"]
                    if rec[0] == topic and rec[1] == partition]
            reads.append((r["index"], r["process"], mine))
        elif f in ("assign", "seek"):
            resets.append((r["index"], r["process"]))
    for inv in pending.values():  # the run ended before these completed
        sends.append(Send(inv["index"], None, "pending", _vkey(inv["value"].get("value")), None,
                          inv["time"], linearize.INF))

    # offset -> {value: first index observing it}, value -> {offset: first index}: sends
    # first, then reads, in order ("first" is by that order). Written out (no setdefault
    # with a fresh dict per call): this is the checker's hottest loop.
    by_offset: dict = {}
    by_value: dict = {}
    first_read: dict[int, int] = {}
    read_values = set()

    for s in sends:
        if s.offset is not None:
            offset, value, index = s.offset, s.value, s.done
            vals = by_offset.get(offset)
            if vals is None:
                by_offset[offset] = {value: index}
            elif value not in vals:
                vals[value] = index
            offs = by_value.get(value)
            if offs is None:
                by_value[value] = {offset: index}
            elif offset not in offs:
                offs[offset] = index
    for index, _, recs in reads:
        for offset, value in recs:
            vals = by_offset.get(offset)
            if vals is None:
                by_offset[offset] = {value: index}
            elif value not in vals:
                vals[value] = index
            offs = by_value.get(value)
            if offs is None:
                by_value[value] = {offset: index}
            elif offset not in offs:
                offs[offset] = index
            if offset not in first_read:
                first_read[offset] = index
            read_values.add(value)
    known = {o: min(vals.values()) for o, vals in by_offset.items()}
    return Digest(topic, partition, sends, reads, resets, by_offset, by_value, read_values,
                  sorted(first_read.items()), sorted(known.items()))


# --- the five checks --------------------------------------------------------------------

def _where(d: Digest) -> dict:
    return {"topic": d.topic, "partition": d.partition}


def inconsistent_offsets(d: Digest) -> list[Anomaly]:
    out = []
    for offset, values in d.by_offset.items():
        if len(values) > 1:
            seen = sorted(values.items(), key=lambda kv: kv[1])
            out.append(Anomaly(
                "inconsistent-offset", tuple(i for _, i in seen),
                f"{d.topic}/{d.partition} offset {offset} holds {len(seen)} values: "
                + ", ".join(f"{v!r} (index {i})" for v, i in seen),
                details={**_where(d), "offset": offset, "values": [v for v, _ in seen]}))
    return out


def duplicates(d: Digest) -> list[Anomaly]:
    out = []
    for value, offsets in d.by_value.items():
        if len(offsets) > 1:
            seen = sorted(offsets.items())
            out.append(Anomaly(
                "duplicate", tuple(sorted(i for _, i in seen)),
                f"value {value!r} appears at {len(seen)} offsets of {d.topic}/{d.partition}: "
                + ", ".join(f"{o} (index {i})" for o, i in seen),
                details={**_where(d), "value": value, "offsets": [o for o, _ in seen]}))
    return out


def lost_writes(d: Digest) -> list[Anomaly]:
    out = []
    if not d.read_offsets:
        return out
    top = d.read_offsets[-1][0]
    for s in d.sends:
        if s.offset is None or s.value in d.read_values or s.offset >= top:
            continue
        # the proof that reads went past k: the read of the smallest offset above k
        above = d.read_offsets[bisect.bisect_right(d.read_offsets, (s.offset, float("inf")))]
        out.append(Anomaly(
            "lost-write", (s.invoke, s.done, above[1]),
            f"send of {s.value!r} acknowledged at {d.topic}/{d.partition} offset {s.offset} "
            f"(index {s.done}) was never read, although offset {above[0]} was (index {above[1]})",
            details={**_where(d), "offset": s.offset, "value": s.value}))
    return out


def continuity(d: Digest) -> list[Anomaly]:
    """nonmonotonic-poll and poll-skip, per process; an assign/seek restarts it."""
    events = sorted([(i, p, None) for i, p in d.resets] + list(d.reads), key=lambda e: e[0])
    last: dict = {}  # process -> (offset, index of the read that returned it)
    known = d.known_offsets
    out = []
    for index, process, recs in events:
        if recs is None:
            last.pop(process, None)
            continue
        for offset, _ in recs:
            prev = last.get(process)
            last[process] = (offset, index)
            if prev is None:
                continue
            p_off, p_idx = prev
            idx = (p_idx, index) if p_idx != index else (index,)
            if offset <= p_off:
                out.append(Anomaly(
                    "nonmonotonic-poll", idx,
                    f"process {process} read {d.topic}/{d.partition} offset {p_off} (index {p_idx}) "
                    f"then offset {offset} (index {index}) without an assign or seek",
                    details={**_where(d), "process": process, "from": p_off, "to": offset}))
            elif offset > p_off + 1:
                k = bisect.bisect_right(known, (p_off, float("inf")))
                if k < len(known) and known[k][0] < offset:
                    skipped, proof = known[k]
                    out.append(Anomaly(
                        "poll-skip", tuple(sorted({*idx, proof})),
                        f"process {process} read {d.topic}/{d.partition} offset {p_off} (index {p_idx}) "
                        f"then offset {offset} (index {index}), skipping offset {skipped} "
                        f"which exists (index {proof})",
                        details={**_where(d), "process": process, "from": p_off, "to": offset,
                                 "skipped": skipped}))
    return out


# --- linearisability of the append-only log ---------------------------------------------

def _placed_sends(d: Digest) -> list[tuple[Send, int]]:
    """Sends whose offset is known: acknowledged, or proven by a read of their value.

    An unread `info` send may not have happened; it constrains nothing and is left out
    (the WGL view: it linearises as a no-op). A value read at several offsets has no
    single position; `duplicate` reports it."""
    out = []
    for s in d.sends:
        if s.offset is not None:
            out.append((s, s.offset))
        elif s.type in ("ok", "info", "pending"):
            offsets = d.by_value.get(s.value, {})
            if len(offsets) == 1 and s.value in d.read_values:
                out.append((s, next(iter(offsets))))
    return out


def _inversions(placed: list[tuple[Send, int]]) -> list[tuple[Send, int, Send, int]]:
    """Pairs (a, b): a returned before b was called, yet b sits at a lower offset."""
    by_ret = sorted(placed, key=lambda p: p[0].ret)
    out, k, best = [], 0, None
    for s, off in sorted(placed, key=lambda p: p[0].call):
        while k < len(by_ret) and by_ret[k][0].ret < s.call:
            if best is None or by_ret[k][1] > best[1]:
                best = by_ret[k]
            k += 1
        if best is not None and best[1] > off:
            out.append((best[0], best[1], s, off))
    return out


def send_order(d: Digest, budget: int) -> list[Anomaly]:
    placed = _placed_sends(d)
    ops = [linearize.Op(i, s.call, s.ret, off) for i, (s, off) in enumerate(placed)]
    offsets = sorted(off for _, off in placed)

    def step(state, op):  # the next op must take the next offset of the log
        return (state + 1,) if state < len(offsets) and offsets[state] == op.input else ()

    out, start, failed = [], 0, False
    for window in linearize.windows(ops):
        if len(window) == 1:  # nothing overlaps it: no search needed
            failed |= not step(start, window[0])
        else:
            res = linearize.check(window, linearize.Model(start, step), budget=budget)
            if res.ok is None:
                first = placed[window[0].id][0]
                out.append(Anomaly(UNKNOWN, (first.invoke,),
                                   f"{d.topic}/{d.partition}: {res.reason}", details=_where(d)))
            failed |= res.ok is False
        start += len(window)
    if failed:
        for a, a_off, b, b_off in _inversions(placed):
            out.append(Anomaly(
                "inconsistent-offset", tuple(sorted({a.invoke, a.done, b.invoke, b.done} - {None})),
                f"send of {b.value!r} (index {b.invoke}) was called after the send of {a.value!r} "
                f"was acknowledged at {d.topic}/{d.partition} offset {a_off} (index {a.done}), "
                f"yet landed at lower offset {b_off}: offset {b_off} was rewritten",
                details={**_where(d), "offset": b_off}))
    return out


class PartitionHistoryRule:
    """The client-visible log checks of one topic-partition (see module docstring)."""

    anomalies = HISTORY_ANOMALIES
    #: `check_group` reads its records once, in order: engines may pass a one-pass
    #: iterable (records decoded as they stream by) instead of a list
    one_pass = True

    def __init__(self, budget: int = 1_000_000):
        self.budget = budget  # WGL steps per window before the verdict becomes unknown

    def group_keys(self, record: dict) -> Iterable[str]:
        f, v = record["f"], record["value"]
        if f in ("send", "seek"):
            return (partition_key(v["topic"], v["partition"]),)
        if f == "poll" and record["type"] == "ok":
            return {partition_key(r[0], r[1]) for r in v["records"]}
        if f == "assign":
            return {partition_key(t, p) for t, p in v.get("partitions", ())}
        return ()

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """The record's groups (the keys of `group_keys`, sorted), each with only what
        `check_group` reads of it: a poll keeps that partition's records (the filter
        `digest` applies). See `checks.verdict.keyed`."""
        f, v = record["f"], record["value"]
        if f == "poll":
            if record["type"] != "ok":
                return []
            recs = v["records"]
            by: dict = {}
            exact = True
            for rec in recs:
                t, p = rec[0], rec[1]
                if type(t) is not str or type(p) is not int:
                    exact = False
                    break
                part = by.get((t, p))
                if part is None:
                    by[(t, p)] = [rec]
                else:
                    part.append(rec)
            if not exact:  # odd types: the very filter `digest` applies, key by key
                out = []
                for key in sorted(self.group_keys(record)):
                    topic, _, partition = key.rpartition("/")
                    partition = int(partition)
                    mine = [rec for rec in recs if rec[0] == topic and rec[1] == partition]
                    out.append((key, {**record, "value": {"records": mine}}))
                return out
            out = [(partition_key(t, p), {**record, "value": {"records": part}}) for (t, p), part in by.items()]
            if len(out) > 1:
                out.sort(key=lambda kv: kv[0])
            return out
        if f == "send" or f == "seek":  # one group: nothing to share, the record as it is
            return [(partition_key(v["topic"], v["partition"]), record)]
        if f == "assign":
            return [(key, {**record, "value": {"partitions": [tp for tp in v.get("partitions", ())
                                                              if partition_key(tp[0], tp[1]) == key]}})
                    for key in sorted(set(self.group_keys(record)))]
        return []

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        return self.check_group(_common_key(self, records), records, profile) if records else []

    def check_group(self, key: str, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """`check` with the group key the engine already knows (see checks.verdict.run_rule)."""
        topic, _, partition = key.rpartition("/")
        d = digest(records, topic, int(partition))
        return (lost_writes(d) + duplicates(d) + inconsistent_offsets(d) + continuity(d)
                + send_order(d, self.budget))


def _common_key(rule: PartitionHistoryRule, records: Sequence[dict]) -> str:
    """The one key every record of the group shares (for callers of plain `check`)."""
    keys: set | None = None
    for r in records:
        keys = set(rule.group_keys(r)) if keys is None else keys & set(rule.group_keys(r))
        if len(keys) == 1:
            return next(iter(keys))
    raise ValueError(f"records do not name one partition: {sorted(keys or ())}")


HISTORY_RULES = (PartitionHistoryRule(),)
