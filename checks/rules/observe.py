"""Shared reading of raw-protocol history records for the model-backed rules.

Only observed values are used: an operation's invoke/complete interval, what the
broker answered, and leader epochs that are *proven* for that interval (named in the
request and accepted, or bracketed by the broker's own metadata answers).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterable, Sequence

from kipcheck.reference_model import profiles

from kipcheck.checks.rules.base import DEVIATIONS


@dataclass(frozen=True)
class Op:
    """One answered request: its invoke and completion records."""

    invoke_index: int
    index: int  # the completion's history index
    invoked: int  # ns
    completed: int  # ns
    process: object
    f: str
    value: dict

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(sorted({self.invoke_index, self.index}))


def answered(records: Sequence[dict], fs: Iterable[str]) -> list[Op]:
    """The `ok` completions of operations `fs`, paired with their invokes (a process
    has one operation in flight at a time, docs/history.md)."""
    fs = set(fs)
    pending: dict[tuple, dict] = {}
    out = []
    for r in records:
        if r.get("f") not in fs:
            continue
        k = (r.get("process"), r.get("f"))
        if r.get("type") == "invoke":
            pending[k] = r
        elif r.get("type") in ("ok", "fail", "info"):
            inv = pending.pop(k, None)
            if r.get("type") == "ok":
                out.append(Op(inv["index"] if inv else r["index"], r["index"], (inv or r).get("time", 0),
                              r.get("time", 0), r.get("process"), r["f"], r.get("value") or {}))
    return out


def partitions_of(value: dict) -> list[dict]:
    """The per-partition entries of a fetch (inline single partition or `partitions`)."""
    if "partitions" in value:
        return [dict(p) for p in value["partitions"]]
    keys = ("topic", "partition", "fetch_offset", "error", "high_watermark", "last_stable_offset",
            "log_start_offset", "preferred_read_replica", "records", "omitted", "missing",
            "markers", "aborted_transactions", "batches")
    return [{k: value[k] for k in keys if k in value}]


class Known(str):
    """`verdict`'s "known" (equal to that string), naming the deviations that accept the observation."""

    def __new__(cls, deviations: tuple[str, ...]):
        self = super().__new__(cls, "known")
        self.deviations = deviations
        return self


def verdict(allowed, profile: str) -> str | None:
    """Run `allowed(profile) -> bool` under the chosen profile and under `kip`:
    None (fine), `Known` (only the profile accepts it) or "anomaly"."""
    chosen = profiles.get(profile)
    if allowed(chosen):
        return None if allowed(profiles.KIP) else Known(accepting_deviations(allowed, chosen))
    return "anomaly"


def accepting_deviations(allowed, profile: profiles.Profile) -> tuple[str, ...]:
    """Which of `profile`'s deviations make `allowed` true: each that does alone, else one
    smallest set of them found by leaving out, one at a time, those not needed."""
    def with_only(devs) -> profiles.Profile:
        return profiles.Profile(f"{profile.name} ({', '.join(sorted(devs))})", frozenset(devs), "")

    alone = tuple(d for d in sorted(profile.deviations) if allowed(with_only({d})))
    if alone:
        return alone
    needed = set(profile.deviations)
    for d in sorted(profile.deviations):
        if allowed(with_only(needed - {d})):
            needed.discard(d)
    return tuple(sorted(needed))


def known_as(kind) -> dict:
    """The details naming a known anomaly's deviations (`DEVIATIONS`); none for an anomaly."""
    return {DEVIATIONS: list(kind.deviations)} if isinstance(kind, Known) else {}


def as_int(x, default=None):
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


def broker_ids(targets) -> set[int]:
    """Broker ids named by a fault's targets (ints, "3", "broker-3", "node3")."""
    out = set()
    for t in targets or []:
        if isinstance(t, int):
            out.add(t)
        else:
            digits = "".join(ch for ch in str(t) if ch.isdigit())
            if digits:
                out.add(int(digits))
    return out


class EpochIndex:
    """Leader epochs a broker itself reported for a partition, from its `metadata`
    answers. Epochs on one broker never go back, so an operation bracketed by two
    answers with the same epoch happened in that epoch."""

    def __init__(self, metadata_ops: Iterable[Op]):
        self._by_tp: dict[tuple, list[Op]] = {}
        for op in metadata_ops:
            v = op.value
            if as_int(v.get("leader_epoch"), -1) >= 0:
                self._by_tp.setdefault((v.get("broker"), v.get("topic"), v.get("partition")), []).append(op)
        for ops in self._by_tp.values():
            ops.sort(key=lambda o: o.completed)
        self._done = {k: [o.completed for o in ops] for k, ops in self._by_tp.items()}

    def epoch_during(self, broker, topic, partition, invoked: int, completed: int) -> int | None:
        ops = self._by_tp.get((broker, topic, partition))
        if not ops:
            return None
        i = bisect.bisect_left(self._done[(broker, topic, partition)], invoked) - 1
        before = ops[i] if i >= 0 else None
        after = next((o for o in ops if o.invoked > completed), None)
        if before and after and before.value["leader_epoch"] == after.value["leader_epoch"]:
            return int(before.value["leader_epoch"])
        return None


    def earlier_epoch_seen(self, broker, topic, partition, epoch: int, after: int, before: int) -> bool:
        """Whether `broker` reported an epoch below `epoch` in an answer made between `after` and `before`."""
        return any(o.invoked > after and o.completed < before and as_int(o.value.get("leader_epoch"), epoch) < epoch
                   for o in self._by_tp.get((broker, topic, partition), ()))

    def leader_of_epoch(self, broker, topic, partition, epoch: int) -> int | None:
        """The leader `broker`'s own metadata named for that epoch (None: never seen)."""
        for op in self._by_tp.get((broker, topic, partition), ()):
            if as_int(op.value.get("leader_epoch"), -1) == epoch and as_int(op.value.get("leader"), -1) >= 0:
                return int(op.value["leader"])
        return None


def proven_epoch(op: Op, entry: dict, epochs: EpochIndex) -> int | None:
    """The broker's leader epoch while it answered `op` for `entry`'s partition: the
    request's current_leader_epoch when the answer is not an epoch error, else bracketing."""
    cle = as_int(op.value.get("current_leader_epoch"), -1)
    err = entry.get("error", op.value.get("error", "NONE"))
    if cle >= 0 and err not in ("FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER"):
        return cle
    return epochs.epoch_during(op.value.get("broker"), entry.get("topic"), entry.get("partition"), op.invoked, op.completed)
