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

from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.targets import resolve_node


def offset_text(seconds: float) -> str:
    """libfaketime's relative offset: "+60", "-300"."""
    return f"{'+' if seconds >= 0 else '-'}{abs(int(seconds))}"


_strobes: dict[int, tuple[threading.Event, threading.Thread]] = {}  # node id -> its running strobe
_strobes_lock = threading.Lock()


def _stop_strobe(node_id: int) -> None:
    """Stop a node's strobe and wait for it, so no late flip outlives the heal."""
    with _strobes_lock:
        running = _strobes.pop(node_id, None)
    if running:
        running[0].set()
        running[1].join(10)


def heal_clocks(ctx: FaultContext) -> None:
    """Stop every strobe and give every node the real clock again (a node without the preload has nothing to undo)."""
    for node_id in list(_strobes):
        _stop_strobe(node_id)
    for node in ctx.cluster.nodes:
        node.set_clock(None)


class ClockSkew:
    """Offset one node's wall clock by `offset` seconds (default 60; negative: behind) for the window."""

    name = "clock-skew"
    cluster_options = {"fake_clocks": True}
    heal_all = staticmethod(heal_clocks)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_node(ctx, spec, "leader")
        offset = offset_text(float(spec.params.get("offset", 60)))
        ctx.cluster.node(victim).set_clock(offset)
        return {"targets": [victim], "skew_s": int(offset), "faketime": offset}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for t in injected["targets"]:
            ctx.cluster.node(t).set_clock(None)


class ClockStrobe(ClockSkew):
    """Jepsen's strobe: the clock jumps `offset` seconds away and back every `period` seconds (default 2).

    libfaketime re-reads its offset once a second, so periods below 1 s are not seen."""

    name = "clock-strobe"

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_node(ctx, spec, "leader")
        node = ctx.cluster.node(victim)
        offset = offset_text(float(spec.params.get("offset", 60)))
        period = max(1.0, float(spec.params.get("period", 2)))
        _stop_strobe(victim)
        node.set_clock(offset)  # refuses at once on a node without the preload
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
        return {"targets": [victim], "skew_s": int(offset), "faketime": offset, "period_s": period}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for t in injected["targets"]:
            _stop_strobe(t)
            ctx.cluster.node(t).set_clock(None)


CLOCK_KINDS = (ClockSkew(), ClockStrobe())
