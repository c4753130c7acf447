"""A bounded Wing–Gong–Lowe linearisability search (as in Lowe 2017 and Porcupine).

Given operations with a call time and a return time (infinity for `info` operations,
which may take effect at any time after their call, or never when the model allows a
no-op) and a model, it searches for a total order that respects real time and that the
model accepts. The caller makes the problem P-compositional (one search per
topic-partition) and cuts it at quiescent points (`windows`), which keeps each search
small.

The result is three-valued: True, False, or None when the step budget ran out — the
checker then reports "unknown" with the reason, never a guess.

Memoisation uses Zobrist hashing of the set of linearised operations (128-bit random
keys per operation): O(1) per step instead of copying a bitset. A collision would need
two different sets with the same 128-bit XOR — we accept that 2^-128 risk explicitly.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Sequence

INF = math.inf


@dataclass(frozen=True)
class Op:
    id: int  # unique within one search
    call: float
    ret: float  # INF when the outcome is indeterminate (`info`)
    input: Any = None
    output: Any = None


@dataclass
class Model:
    """A nondeterministic model: `step` returns the possible next states (empty: illegal)."""

    init: Hashable
    step: Callable[[Hashable, Op], Iterable[Hashable]]


@dataclass
class Result:
    ok: bool | None  # None: budget exhausted
    steps: int
    reason: str = ""
    stuck: list[int] = field(default_factory=list)  # op ids that could not be placed


class _Entry:
    __slots__ = ("op", "is_call", "match", "prev", "next")

    def __init__(self, op, is_call):
        self.op, self.is_call = op, is_call
        self.match = self.prev = self.next = None


def _entries(ops: Sequence[Op]) -> _Entry:
    """A doubly linked list of call and return entries in time order; returns its head.

    At equal times calls come before returns: a tie counts as overlap, so the search
    never claims an order that the clock did not prove."""
    events = []
    for op in ops:
        c, r = _Entry(op, True), _Entry(op, False)
        c.match = r
        events.append((op.call, 0, op.id, c))
        events.append((op.ret, 1, op.id, r))
    events.sort(key=lambda e: e[:3])
    head = _Entry(None, True)
    prev = head
    for *_, e in events:
        prev.next, e.prev = e, prev
        prev = e
    return head


def _lift(call: _Entry):
    call.prev.next = call.next
    call.next.prev = call.prev
    ret = call.match
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(call: _Entry):
    ret = call.match
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    call.prev.next = call
    call.next.prev = call


def check(ops: Sequence[Op], model: Model, budget: int = 1_000_000, seed: int = 0) -> Result:
    """Is there a real-time-respecting order of `ops` that `model` accepts?

    The model is made deterministic over sets of states (Porcupine's power-set trick)."""
    if not ops:
        return Result(True, 0)
    rng = random.Random(seed)
    zobrist = {op.id: rng.getrandbits(128) for op in ops}
    head = _entries(ops)
    state: frozenset = frozenset([model.init])
    linearized = 0
    seen: set[tuple[int, frozenset]] = set()
    calls: list[tuple[_Entry, frozenset]] = []
    entry = head.next
    steps = 0
    deepest: list[int] = []
    while head.next is not None:
        steps += 1
        if steps > budget:
            return Result(None, steps, f"linearisation search exceeded its budget of {budget} steps "
                                       f"over {len(ops)} operations")
        if entry.is_call:
            nxt = frozenset(s2 for s in state for s2 in model.step(s, entry.op))
            key = (linearized ^ zobrist[entry.op.id], nxt)
            if nxt and key not in seen:
                seen.add(key)
                calls.append((entry, state))
                state, linearized = nxt, key[0]
                _lift(entry)
                entry = head.next
            else:
                entry = entry.next
        else:
            # a return reached with its call still pending: undo the last choice
            if not calls:
                return Result(False, steps, "no order the model accepts", deepest or [entry.op.id])
            if len(calls) >= len(deepest):
                deepest = [entry.op.id]
            entry, state = calls.pop()
            linearized ^= zobrist[entry.op.id]
            _unlift(entry)
            entry = entry.next
    return Result(True, steps)


def windows(ops: Sequence[Op]) -> list[list[Op]]:
    """Split ops at quiescent points: where every earlier op returned before every later
    op was called. Linearisations of the pieces concatenate, so each piece is checked
    on its own (with the model state carried over by the caller when it matters)."""
    ordered = sorted(ops, key=lambda o: (o.call, o.id))
    out: list[list[Op]] = []
    current: list[Op] = []
    horizon = -INF
    for op in ordered:
        if current and op.call > horizon:
            out.append(current)
            current = []
        current.append(op)
        horizon = max(horizon, op.ret)
    if current:
        out.append(current)
    return out


def window_ids(calls: Sequence, rets: Sequence) -> list[list[int]]:
    """`windows` over plain numbers: op j has call `calls[j]` and return `rets[j]`; the
    windows hold op numbers (ordered by (call, number), cut at the same points), so a
    caller makes `Op`s only for the windows that need a search."""
    out: list[list[int]] = []
    current: list[int] = []
    horizon = -INF
    for j in sorted(range(len(calls)), key=calls.__getitem__):  # stable: ties by number
        call = calls[j]
        if current and call > horizon:
            out.append(current)
            current = []
        current.append(j)
        ret = rets[j]
        if ret > horizon:
            horizon = ret
    if current:
        out.append(current)
    return out
