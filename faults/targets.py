"""Which nodes a fault hits: names in a FaultSpec ("leader", "follower", a node id) resolved at inject time.

Specs name roles, not node ids, because a schedule is made before the cluster exists
and leadership moves during a run; the resolved ids are what the history records.
"""
from __future__ import annotations

import time

from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError


def partition_of(spec: FaultSpec, ctx: FaultContext) -> tuple[str, int]:
    return spec.params.get("topic", ctx.topic), int(spec.params.get("partition", 0))


def describe(ctx: FaultContext, topic: str, timeout: float = 30.0, pred=lambda parts: True):
    """The topic's partitions, asked again while the call fails or `pred` does not hold.

    During a fault, or just after a restart, the broker that answers may time out or not
    know the topic yet."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while True:
        try:
            parts = ctx.admin().partitions(topic)
            if pred(parts):
                return parts
            last = "; ".join(f"p{p.partition} leader={p.leader}" for p in parts)
        except Exception as e:
            last = str(e)
        if time.monotonic() > deadline:
            raise FaultError(f"{topic}: no usable description within {timeout:.0f} s ({last})")
        time.sleep(0.5)


def view(ctx: FaultContext, topic: str, partition: int, timeout: float = 30.0):
    """The partition's replicas, ISR and leader, once it has a leader."""
    def led(parts):
        return any(p.partition == partition and p.leader >= 0 for p in parts)
    return next(p for p in describe(ctx, topic, timeout, led) if p.partition == partition)


#: Kafka's transaction.state.log.num.partitions default (TransactionLogConfig)
TRANSACTION_STATE_PARTITIONS = 50


def transaction_state_partition(transactional_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS) -> int:
    """The `__transaction_state` partition whose leader coordinates `transactional_id`:
    Kafka's TransactionStateManager.partitionFor, Utils.abs(id.hashCode) % partitions."""
    h = 0
    for unit in transactional_id.encode("utf-16-be").hex(" ", 2).split():  # Java String.hashCode over UTF-16
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def resolve_node(ctx: FaultContext, spec: FaultSpec, default: str = "leader") -> int:
    """One node id: a number, "leader" or "follower" (the `index`-th in-sync follower) of the spec's
    partition, or "coordinator": the transaction coordinator of the spec's `transactional_id` (the
    leader of its `__transaction_state` partition)."""
    target = spec.params.get("target", default)
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    if target == "coordinator":
        return view(ctx, "__transaction_state", transaction_state_partition(spec.params["transactional_id"])).leader
    p = view(ctx, *partition_of(spec, ctx))
    if target == "leader":
        return p.leader
    if target == "follower":
        followers = [r for r in p.isr if r != p.leader] or [r for r in p.replicas if r != p.leader]
        if not followers:
            raise FaultError(f"{p.topic}-{p.partition} has no follower")
        return followers[int(spec.params.get("index", 0)) % len(followers)]
    raise FaultError(f"unknown fault target {target!r} (a node id, 'leader', 'follower' or 'coordinator')")


def all_node_ids(ctx: FaultContext) -> list[int]:
    return [n.spec.node_id for n in ctx.cluster.nodes]


def wait_full_isr(ctx: FaultContext, timeout: float = 120.0) -> None:
    """Destructive faults wait for this first: wiping the only in-sync copy is data loss by us, not Kafka."""
    ctx.admin().wait_full_isr(ctx.topic, timeout)
