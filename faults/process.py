"""Process faults on Kafka nodes: kill -9, SIGSTOP pause, controlled shutdown, rolling restart.

Each inject leaves the node down (or frozen) for the fault's window; the heal brings it
back. Heal-all restarts every node that is not running and continues every paused one,
then waits until the brokers are registered and the workload topic has a full ISR.
"""
from __future__ import annotations

from kipcheck.effects import LOSES_STATE, OWN_NODE, STOPS_NODE, TRUNCATES
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.errors import KipcheckError
from kipcheck.faults.targets import resolve_node, wait_full_isr

START_TIMEOUT = 120.0  # two cores shared by several clusters: a JVM start can be slow


def start(node) -> None:
    """Start a stopped node (formatting first if its log directory was wiped) and wait until it listens."""
    if not node.formatted():
        node.format()
    node.start_node()
    node.wait_listening(START_TIMEOUT)


def start_stopped(ctx: FaultContext, node_ids) -> None:
    """Start those of the given nodes that are not running (the heal of every node-down fault)."""
    for node_id in node_ids:
        node = ctx.cluster.node(node_id)
        if not node.alive():
            start(node)


def wait_healthy(ctx: FaultContext, timeout: float = START_TIMEOUT) -> None:
    ctx.admin().wait_brokers(len(ctx.cluster.brokers), timeout)
    wait_full_isr(ctx, timeout)


def heal_processes(ctx: FaultContext) -> None:
    changed = False
    for node in ctx.cluster.nodes:
        if node.alive():
            if node.paused():
                node.resume()
                changed = True
        else:
            start(node)
            changed = True
    if changed:
        wait_healthy(ctx)


class _NodeDown:
    """Take one node down at inject and start it again at heal; subclasses say how it goes down."""

    name = ""
    default_target = "leader"
    heal_all = staticmethod(heal_processes)

    def take_down(self, node, spec: FaultSpec) -> None:
        raise NotImplementedError

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_node(ctx, spec, self.default_target)
        self.take_down(ctx.cluster.node(victim), spec)
        return {"targets": [victim]}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        start_stopped(ctx, injected["targets"])


class Kill(_NodeDown):
    """kill -9: no controlled shutdown, unflushed page cache survives (the kernel keeps it)."""

    name = "kill"
    effects = frozenset({STOPS_NODE, LOSES_STATE, TRUNCATES, OWN_NODE})  # a torn tail is recovered away

    def take_down(self, node, spec):
        node.stop_node(clean_shutdown=False)


class Restart(_NodeDown):
    """Controlled shutdown (SIGTERM: leadership moves away first), restarted at heal."""

    name = "restart"
    # the node starts again from its checkpoints (an HWM below the one it served); recovery may cut its tail
    effects = frozenset({STOPS_NODE, LOSES_STATE, TRUNCATES, OWN_NODE})

    def take_down(self, node, spec):
        node.stop_node(clean_shutdown=True, timeout=float(spec.params.get("grace", 30)))


class Pause(_NodeDown):
    """SIGSTOP: the process holds its sockets but answers nothing, like a long GC pause."""

    name = "pause"
    effects = frozenset({STOPS_NODE, OWN_NODE})  # resumed, it holds all it held

    def take_down(self, node, spec):
        node.pause()

    def heal(self, ctx, spec, injected):
        for t in injected["targets"]:
            node = ctx.cluster.node(t)
            if node.alive():
                node.resume()


class RollingRestart:
    """Controlled restart of every broker in turn, waiting for a full ISR before the next.

    The whole roll happens at inject (heal has nothing left to undo); it stops early when
    the run ends, and heal-all restarts whatever is still down."""

    name = "rolling-restart"
    # every broker in turn: each leaves, the window is no one node's
    effects = frozenset({LOSES_STATE, TRUNCATES})
    heal_all = staticmethod(heal_processes)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        ids = [n.spec.node_id for n in ctx.cluster.brokers]
        k = int(spec.params.get("rotate", 0)) % len(ids)
        order = ids[k:] + ids[:k]
        stop = ctx.stop_event
        done = []
        for node_id in order:
            if stop is not None and stop.is_set():
                break
            node = ctx.cluster.node(node_id)
            node.stop_node(clean_shutdown=True, timeout=30)
            start(node)
            done.append(node_id)
            try:
                wait_healthy(ctx)
            except KipcheckError:  # wait_healthy's own, or the admin client's (a HarnessError)
                if stop is None or not stop.is_set():
                    raise
        return {"targets": done, "order": order}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        pass


PROCESS_KINDS = (Kill(), Pause(), Restart(), RollingRestart())
