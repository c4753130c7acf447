"""Network partitions: iptables DROP rules in the nodes' own namespaces.

Rules live in each namespace's KIPCHECK chain (see harness.network), so heal is a
flush of that chain and a deleted namespace takes its rules with it.
"""
from __future__ import annotations

from harness.network import CHAIN
from faults.base import FaultContext, FaultSpec


def resolve_target(ctx: FaultContext, spec: FaultSpec) -> int:
    """The node a spec names: a node id, or "leader" of (topic, partition) at inject time."""
    target = spec.params.get("target", "leader")
    if target == "leader":
        return ctx.leader_of(spec.params.get("topic", ctx.topic), spec.params.get("partition", 0))
    return int(target)


def drop_between(ctx: FaultContext, a: list[int], b: list[int]) -> None:
    """Drop every packet between the node groups a and b, in both directions."""
    for x in a:
        for y in b:
            _drop(ctx, x, y)
            _drop(ctx, y, x)


def _drop(ctx: FaultContext, node_id: int, peer_id: int) -> None:
    host = ctx.cluster.node(node_id).spec.host
    peer = ctx.cluster.node(peer_id).spec.host.address
    host.iptables("-A", CHAIN, "-s", peer, "-j", "DROP")
    host.iptables("-A", CHAIN, "-d", peer, "-j", "DROP")


class IsolateNode:
    """Cut one node (by default the leader of a partition) off from every other node.

    Clients in the root namespace still reach it: the isolated leader keeps taking
    requests it can no longer replicate, the interesting case for acks=all."""

    name = "partition"

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        victim = resolve_target(ctx, spec)
        others = [n.spec.node_id for n in ctx.cluster.nodes if n.spec.node_id != victim]
        drop_between(ctx, [victim], others)
        return {"targets": [victim], "isolated_from": others}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        self.heal_all(ctx)

    def heal_all(self, ctx: FaultContext) -> None:
        for node in ctx.cluster.nodes:
            if node.spec.host.netns:
                node.spec.host.iptables("-F", CHAIN, check=False)
