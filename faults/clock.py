"""Clock faults: one node's JVM wall clock skewed, or strobed back and forth, the host's clock untouched.

The node's JVM preloads libfaketime (a cluster started with `fake_clocks`), whose offset
the fault sets through `Node.set_clock`; the monotonic clock stays real. Kafka reads
the wall clock (`Time.milliseconds`) for most of its timers, so a skewed broker provokes
what a bad NTP step does: ISR shrinks (replica.lag.time.max.ms measured across a jump),
session and heartbeat expiries, LogAppendTime and time-index entries off by the skew,
retention and segment.ms decisions taken early or late. None of that may lose or
reorder an acknowledged write.
"""
from __future__ import annotations

import threading
import time

from kipcheck.effects import MOVES_CLOCK
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.targets import resolve_node


def offset_text(seconds: float) -> str:
    """libfaketime's relative offset: "+60", "-300"."""
    return f"{'+' if seconds >= 0 else '-'}{abs(int(seconds))}"


#: How long after its offset file changed a JVM may still run on the old offset. libfaketime
#: 0.9.10 re-reads the file on the first clock call whose whole second exceeds that of its last
#: read by more than FAKETIME_CACHE_DURATION (1 s, harness/backends/node.py): up to 2 s after
#: the write (measured 1.64 s, docs/findings.md "clock-strobe heal"); 0.25 s more for a JVM
#: thread that read the old offset just before another finished re-reading. A heal returns only
#: after this, so its stop's completion in the history is when the skew really ended (the
#: `settle_ms` its start adds).
REREAD_S = 2.25
SETTLE_MS = int(REREAD_S * 1000)

_strobes: dict[int, tuple[threading.Event, threading.Thread]] = {}  # node id -> its running strobe
_skewed: set[int] = set()  # nodes whose offset a clock fault set and no heal has given back yet
_strobes_lock = threading.Lock()


def _settle() -> None:
    """Wait until every JVM whose offset file just changed must have re-read it."""
    time.sleep(REREAD_S)


def _give_back(ctx: FaultContext, targets) -> None:
    """The real clock again on `targets` (the offset file removed), returning once their JVMs run on it."""
    for t in targets:
        ctx.cluster.node(t).set_clock(None)
    with _strobes_lock:
        _skewed.difference_update(targets)
    _settle()


def _stop_strobe(node_id: int) -> None:
    """Stop a node's strobe and wait for it, so no late flip outlives the heal."""
    with _strobes_lock:
        running = _strobes.pop(node_id, None)
    if running:
        running[0].set()
        running[1].join(10)


def heal_clocks(ctx: FaultContext) -> None:
    """Stop every strobe and give every node the real clock again (a node without the preload has nothing to undo);
    when a clock fault had skewed one, return only once its JVM runs on the real clock."""
    for node_id in list(_strobes):
        _stop_strobe(node_id)
    for node in ctx.cluster.nodes:
        node.set_clock(None)
    with _strobes_lock:
        skewed = bool(_skewed)
        _skewed.clear()
    if skewed:
        _settle()


class ClockSkew:
    """Offset one node's wall clock by `offset` seconds (default 60; negative: behind) for the window."""

    name = "clock-skew"
    effects = frozenset({MOVES_CLOCK})
    cluster_options = {"fake_clocks": True}
    heal_all = staticmethod(heal_clocks)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_node(ctx, spec, "leader")
        offset = offset_text(float(spec.params.get("offset", 60)))
        ctx.cluster.node(victim).set_clock(offset)
        with _strobes_lock:
            _skewed.add(victim)
        return {"targets": [victim], "skew_s": int(offset), "faketime": offset, "settle_ms": SETTLE_MS}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        _give_back(ctx, injected["targets"])


class ClockStrobe(ClockSkew):
    """Jepsen's strobe: the clock jumps `offset` seconds away and back every `period` seconds (default 2).

    libfaketime re-reads its offset every 2 whole seconds at most (REREAD_S), so the JVM sees a
    flip up to 2 s late and periods below that only in part."""

    name = "clock-strobe"

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_node(ctx, spec, "leader")
        node = ctx.cluster.node(victim)
        offset = offset_text(float(spec.params.get("offset", 60)))
        period = max(1.0, float(spec.params.get("period", 2)))
        _stop_strobe(victim)
        node.set_clock(offset)  # refuses at once on a node without the preload
        with _strobes_lock:
            _skewed.add(victim)
        stop = threading.Event()

        def strobe():
            skewed = True
            while not stop.wait(period):
                skewed = not skewed
                node.set_clock(offset if skewed else "+0")

        thread = threading.Thread(target=strobe, name=f"clock-strobe-{victim}", daemon=True)
        with _strobes_lock:
            _strobes[victim] = (stop, thread)
        thread.start()
        return {"targets": [victim], "skew_s": int(offset), "faketime": offset, "period_s": period,
                "settle_ms": SETTLE_MS}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for t in injected["targets"]:
            _stop_strobe(t)
        _give_back(ctx, injected["targets"])


CLOCK_KINDS = (ClockSkew(), ClockStrobe())
