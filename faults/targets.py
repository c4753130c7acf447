"""Which nodes a fault hits: names in a FaultSpec ("leader", "follower", a node id) resolved at inject time.

Specs name roles, not node ids, because a schedule is made before the cluster exists
and leadership moves during a run; the resolved ids are what the history records.
"""
from __future__ import annotations

import base64
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
#: Kafka's offsets.topic.num.partitions default (GroupCoordinatorConfig); kipcheck's clusters keep it
OFFSETS_PARTITIONS = 50
#: Kafka's share.coordinator.state.topic.num.partitions default (ShareCoordinatorConfig); kept too
SHARE_STATE_PARTITIONS = 50


def java_partition_for(key: str, partitions: int) -> int:
    """Utils.abs(key.hashCode()) % partitions: how Kafka's coordinators place a key on their state
    topic's partitions (Java String.hashCode over UTF-16 code units; Utils.abs maps MIN_VALUE to 0)."""
    h = 0
    for unit in key.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def transaction_state_partition(transactional_id: str, partitions: int = TRANSACTION_STATE_PARTITIONS) -> int:
    """The `__transaction_state` partition whose leader coordinates `transactional_id`:
    Kafka's TransactionStateManager.partitionFor."""
    return java_partition_for(transactional_id, partitions)


def group_coordinator_partition(group: str, partitions: int = OFFSETS_PARTITIONS) -> int:
    """The `__consumer_offsets` partition whose leader is the group coordinator of `group`, a share
    group too (its heartbeats go there): Kafka 4.3's GroupCoordinatorService.partitionFor."""
    return java_partition_for(group, partitions)


def share_state_partition(group: str, topic_id: str, partition: int, partitions: int = SHARE_STATE_PARTITIONS) -> int:
    """The `__share_group_state` partition whose leader, the share coordinator, holds the state of
    share-partition (group, topic, partition): Kafka 4.3's ShareCoordinatorService.partitionFor over
    SharePartitionKey.asCoordinatorKey, "group:topicId:partition" (`topic_id` as Uuid.toString, base64)."""
    return java_partition_for(f"{group}:{topic_id}:{partition}", partitions)


def kafka_uuid_string(msb: int, lsb: int) -> str:
    """Kafka's Uuid.toString from its two halves (signed or not): URL-safe base64 without padding."""
    raw = (msb & (1 << 64) - 1).to_bytes(8, "big") + (lsb & (1 << 64) - 1).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _param(spec: FaultSpec, name: str, target: str) -> str:
    if not spec.params.get(name):
        raise FaultError(f"fault target {target!r} needs the param {name!r}")
    return str(spec.params[name])


def _coordinator(ctx: FaultContext, spec: FaultSpec, target: str) -> int:
    """The leader of the state partition that makes a broker `target`'s coordinator."""
    if target == "coordinator":
        return view(ctx, "__transaction_state",
                    transaction_state_partition(_param(spec, "transactional_id", target))).leader
    group = _param(spec, "group", target)
    if target == "group-coordinator":
        return view(ctx, "__consumer_offsets", group_coordinator_partition(group)).leader
    topic, partition = partition_of(spec, ctx)
    return view(ctx, "__share_group_state", share_state_partition(group, ctx.admin().topic_id(topic), partition)).leader


COORDINATOR_TARGETS = ("coordinator", "group-coordinator", "share-coordinator")


def resolve_node(ctx: FaultContext, spec: FaultSpec, default: str = "leader") -> int:
    """One node id: a number, "leader" or "follower" (the `index`-th in-sync follower) of the spec's
    partition, or a coordinator: "coordinator", the transaction coordinator of the spec's
    `transactional_id`; "group-coordinator", the group coordinator of the share (or consumer) group
    `group`; "share-coordinator", the share coordinator holding `group`'s state of the spec's
    topic and partition. Each is the leader of its state topic's partition for that key."""
    target = spec.params.get("target", default)
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    if target in COORDINATOR_TARGETS:
        return _coordinator(ctx, spec, target)
    p = view(ctx, *partition_of(spec, ctx))
    if target == "leader":
        return p.leader
    if target == "follower":
        followers = [r for r in p.isr if r != p.leader] or [r for r in p.replicas if r != p.leader]
        if not followers:
            raise FaultError(f"{p.topic}-{p.partition} has no follower")
        return followers[int(spec.params.get("index", 0)) % len(followers)]
    raise FaultError(f"unknown fault target {target!r} (a node id, 'leader', 'follower', 'coordinator', "
                     f"'group-coordinator' or 'share-coordinator')")


def all_node_ids(ctx: FaultContext) -> list[int]:
    return [n.spec.node_id for n in ctx.cluster.nodes]


def wait_full_isr(ctx: FaultContext, timeout: float = 120.0) -> None:
    """Destructive faults wait for this first: wiping the only in-sync copy is data loss by us, not Kafka."""
    ctx.admin().wait_full_isr(ctx.topic, timeout)
