"""KIP-1023 offsets judged from ListOffsets answers: `tiered-offset-violation`.

The model (`kip1023.offset_order`, `kip1023.answers_consistent`) holds the inequalities:
log start (-2) <= local log start (-4) <= LSO (-1 read_committed) <= HWM (-1) <= LEO,
last tiered (-5) <= LSO, earliest pending upload (-6) = last tiered + 1 (Kafka: also
>= log start), and no quantity going back within a leader epoch. ListOffsets returns
one value per request, so the rule compares pairs of answers of one broker in one leader
epoch, the later asked after the earlier was answered, with no fault that truncates or
restarts that broker in between (then the earlier, never-decreasing, quantity still
held at the later moment). The rule only gathers the answers and reports.

The leader epoch of an answer: the request's `current_leader_epoch` when the broker
accepted it (error NONE: Kafka checks it against its own), else the broker's own
metadata answers on both sides (`observe.proven_epoch`).
"""
from __future__ import annotations

import bisect
from typing import Iterable, Sequence

from kipcheck import effects
from kipcheck.reference_model import kip1023

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.log_bounds import Extremes
from kipcheck.checks.rules.observe import EpochIndex, Op, answered, as_int, broker_ids, known_as, proven_epoch, verdict

#: a broker's offsets may go back after a fault that cost it its in-memory state or cut its log
#: (a kill or restart replays the log: recovery may drop a torn tail; an unclean election
#: truncates to the new leader's log)
RESETS_OFFSETS = (effects.LOSES_STATE, effects.TRUNCATES)


def offset_kind(v: dict) -> str | None:
    """Which KIP-1023 quantity a ListOffsets answer is ("List Offsets API")."""
    ts = as_int(v.get("timestamp"))
    if ts == kip1023.LATEST:
        if as_int(v.get("replica_id"), -1) >= 0:
            return "leo"
        return "lso" if v.get("isolation_level") == "read_committed" else "hwm"
    return {
        kip1023.EARLIEST: "log_start",
        kip1023.EARLIEST_LOCAL: "local_log_start",
        kip1023.LAST_TIERED: "last_tiered",
        kip1023.EARLIEST_PENDING_UPLOAD: "pending_upload",
    }.get(ts)


class TieredOffsetRule(BaseRule):
    anomalies = ("tiered-offset-violation",)
    fs = frozenset(("list_offsets", "metadata", "fault"))

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        f = record.get("f")
        if f in ("list_offsets", "metadata"):
            yield f"tiered:{v.get('broker')}"
        elif f == "fault" and not effects.of(v).isdisjoint(RESETS_OFFSETS):
            yield from (f"tiered:{b}" for b in sorted(broker_ids(v.get("targets"))))

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        epochs = EpochIndex(answered(records, ["metadata"]))
        faults = sorted(r.get("time", 0) for r in records if r.get("f") == "fault")
        by_partition: dict[tuple, list[tuple[Op, str, int, int]]] = {}
        for op in answered(records, ["list_offsets"]):
            v = op.value
            kind, offset = offset_kind(v), as_int(v.get("offset"), -1)
            if kind is None or v.get("error", "NONE") != "NONE" or offset < 0:
                continue
            epoch = proven_epoch(op, {"topic": v.get("topic"), "partition": v.get("partition")}, epochs)
            if epoch is not None:
                by_partition.setdefault((v.get("topic"), v.get("partition"), epoch), []).append((op, kind, offset))
        out = []
        for (topic, partition, epoch), obs in by_partition.items():
            out += self._pairs(topic, partition, epoch, obs, faults, profile)
        return out

    @staticmethod
    def _pairs(topic, partition, epoch, obs, faults, profile) -> list[Anomaly]:
        """Each answer against the highest earlier answer of every kind in its stretch
        of time between faults (an answer with a fault inside its own interval pairs with
        none). Every bound is "earlier <= later + slack", so the highest earlier answer of
        a kind is the one that can prove a violation."""
        stretches: dict[int, list] = {}
        for o in obs:
            s = bisect.bisect_right(faults, o[0].invoked)
            if bisect.bisect_right(faults, o[0].completed) == s:
                stretches.setdefault(s, []).append(o)
        out = []
        for ops in stretches.values():
            done, i, best = sorted(ops, key=lambda o: o[0].completed), 0, {}
            # the lowest log start (or local log start, above it) answered after a moment
            starts = Extremes(((o[0].invoked, o[2]) for o in ops if o[1] in ("log_start", "local_log_start")), min)
            for b in sorted(ops, key=lambda o: o[0].invoked):
                while i < len(done) and done[i][0].completed < b[0].invoked:
                    a = done[i]
                    if a[1] not in best or a[2] > best[a[1]][2]:
                        best[a[1]] = a
                    i += 1
                out += [x for a in best.values()
                        for x in TieredOffsetRule._judge(topic, partition, epoch, a, b, profile,
                                                         starts.after(a[0].completed))]
        return out

    @staticmethod
    def _judge(topic, partition, epoch, a, b, profile, log_start_after=None) -> list[Anomaly]:
        kind = verdict(lambda p: kip1023.answers_consistent(a[1], a[2], b[1], b[2], p, log_start_after), profile)
        if kind is None:
            return []
        broke = "the offset went back" if a[1] == b[1] else f"{a[1]} <= {b[1]} is broken"
        return [Anomaly(
            "tiered-offset-violation", tuple(sorted(set(a[0].indices + b[0].indices))),
            f"broker {b[0].value.get('broker')} answered {b[1]} {b[2]} for {topic}/{partition} after it had "
            f"answered {a[1]} {a[2]} in leader epoch {epoch}: KIP-1023 allows no such pair ({broke})",
            known=(kind == "known"),
            details={"topic": topic, "partition": partition, "leader_epoch": epoch, "earlier": a[1],
                     "earlier_value": a[2], "later": b[1], "later_value": b[2],
                     **known_as(kind), RULE: "kip1023.offset_order"})]
