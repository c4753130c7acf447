"""A recorded history seen through the facts mutation operators choose positions by."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Iterator

from kipcheck.checks.rules.observe import as_int


@dataclass(frozen=True)
class Mutation:
    """One planted change: the mutated records (indices renumbered to positions), the
    indices that carry the proof a checker must name, and what was done."""

    operator: str
    records: list
    planted: tuple
    note: str


def tp_of(entry: dict) -> tuple:
    return (entry.get("topic"), entry.get("partition"))


@dataclass
class History:
    """Records in index order plus the indexes operators need. Operators never modify
    `records`: `edited` copies a record into a new list."""

    records: list
    #: the run's liveness bound (checks/recovery.py): a heal's window must outlast it for
    #: a missing recovery to be provable
    liveness_bound_s: float = 102.0
    invoke_of: dict = field(default_factory=dict)  # completion index -> its invoke's index

    def __post_init__(self):
        pending = {}
        for r in self.records:
            k = (r.get("process"), r.get("f"))
            if r["type"] == "invoke":
                pending[k] = r["index"]
            elif k in pending:
                self.invoke_of[r["index"]] = pending.pop(k)

    def ok(self, f: str) -> Iterator[dict]:
        return (r for r in self.records if r["f"] == f and r["type"] == "ok")

    def proof(self, *completions: int) -> tuple:
        """The completions and their invokes: the indices a proof is named by."""
        out = set(completions)
        out.update(self.invoke_of[c] for c in completions if c in self.invoke_of)
        return tuple(sorted(out))

    def read_values(self) -> dict:
        """(topic, partition, offset) -> value, from every ok poll and fetch answer."""
        seen = {}
        for r in self.records:
            if r["type"] != "ok":
                continue
            if r["f"] == "poll":
                for t, p, o, val, *_ in r["value"].get("records") or []:
                    seen[(t, p, o)] = val
            elif r["f"] == "fetch":
                for e in fetch_entries(r["value"]):
                    for o, val, *_ in e.get("records") or []:
                        seen[(e.get("topic"), e.get("partition"), o)] = val
        return seen

    def acked(self, transactional: bool = True) -> dict:
        """(topic, partition, offset) -> the ok send's index (`transactional` False: only
        sends outside transactions)."""
        return {(v["topic"], v["partition"], v["offset"]): r["index"]
                for r in self.ok("send") if as_int((v := r["value"]).get("offset")) is not None
                and (transactional or v.get("txn") is None)}


def fetch_entries(value: dict) -> list:
    """The per-partition entries of a fetch value, as the live dicts (inline: the value)."""
    return value["partitions"] if "partitions" in value else [value]


def consumer_answers(h: History) -> Iterator[tuple[dict, dict]]:
    """(record, entry) of every ok consumer fetch answer without a top-level error."""
    for r in h.ok("fetch"):
        v = r["value"]
        if as_int(v.get("replica_id"), -1) < 0 and v.get("top_error", "NONE") == "NONE":
            for e in fetch_entries(v):
                if not e.get("omitted"):
                    yield r, e


class Edit:
    """Copy-on-write over a history's records: `take(i)` gives a deep copy of record i
    placed in the new list; `done` renumbers indices if records were inserted or removed."""

    def __init__(self, h: History):
        self.h = h
        self.records = list(h.records)
        self.inserted = False

    def take(self, i: int) -> dict:
        r = self.records[i]
        if r is self.h.records[i]:
            r = self.records[i] = copy.deepcopy(r)
        return r

    def insert_after(self, i: int, new: list) -> None:
        """Put `new` records after position i (only once per edit: indices shift)."""
        self.records[i + 1:i + 1] = new
        self.inserted = True

    def done(self, operator: str, planted, note: str) -> Mutation:
        if self.inserted:
            for pos, r in enumerate(self.records):
                if r["index"] != pos:
                    r = self.records[pos] = {**r, "index": pos}
        return Mutation(operator, self.records, tuple(sorted(set(planted))), note)
