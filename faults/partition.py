"""Network partitions: iptables DROP rules in the nodes' own namespaces.

A partition is a *grudge* (Jepsen's term): for each node, the peers whose packets it
drops on arrival. A two-way cut between x and y is x dropping y's packets and y
dropping x's; a one-way cut is one side only. Rules are made by the nodes' packet verbs
(faults.cluster.Node; the native backend keeps them in each namespace's KIPCHECK chain):
heal deletes exactly the rules inject added, heal-all flushes them, and a deleted
namespace takes its rules with it. Clients in the root namespace are never cut off: an
isolated leader keeps taking requests it can no longer replicate, the interesting case
for acks=all.
"""
from __future__ import annotations

from kipcheck.effects import CUTS_LINKS
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.targets import all_node_ids, resolve_node

Grudge = dict[int, list[int]]  # node -> peers whose packets it drops


def cut(a: list[int], b: list[int]) -> Grudge:
    """Both directions between groups a and b."""
    grudge: Grudge = {}
    for x in a:
        for y in b:
            grudge.setdefault(x, []).append(y)
            grudge.setdefault(y, []).append(x)
    return grudge


def _hold(ctx: FaultContext, grudge: Grudge, drop: bool) -> None:
    """Make (drop) or drop (not drop) every rule of the grudge."""
    for node_id, peers in grudge.items():
        node = ctx.cluster.node(int(node_id))
        for peer in peers:
            peer_node = ctx.cluster.node(int(peer))
            if drop:
                node.drop_packets_from(peer_node)
            else:
                node.allow_packets_from(peer_node)


def heal_partitions(ctx: FaultContext) -> None:
    for node in ctx.cluster.nodes:
        node.allow_all_packets()


class _Partition:
    """Shared inject/heal: a subclass only says which grudge it holds."""

    name = ""
    effects = frozenset({CUTS_LINKS})
    heal_all = staticmethod(heal_partitions)

    def grudge(self, ctx: FaultContext, spec: FaultSpec) -> tuple[Grudge, list[int], dict]:
        """(grudge, the nodes to name as targets, extra fields for the history)."""
        raise NotImplementedError

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        grudge, targets, extra = self.grudge(ctx, spec)
        for node_id in targets:  # a backend without node access says so, rather than cut nobody
            ctx.cluster.node(node_id)
        _hold(ctx, grudge, drop=True)
        return {"targets": targets, **extra, "grudge": {str(k): v for k, v in grudge.items()}}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        _hold(ctx, injected["grudge"], drop=False)


class IsolateNode(_Partition):
    """Cut one node (by default the leader of a partition: leader against the rest) off from every other node."""

    name = "partition"

    def grudge(self, ctx, spec):
        victim = resolve_node(ctx, spec, "leader")
        others = [n for n in all_node_ids(ctx) if n != victim]
        return cut([victim], others), [victim], {"isolated_from": others}


class MajorityMinority(_Partition):
    """Split the nodes into a minority of floor((n-1)/2) and the majority; `leader_side` says where the leader goes."""

    name = "partition-majority"

    def grudge(self, ctx, spec):
        leader = resolve_node(ctx, spec, "leader")
        nodes = all_node_ids(ctx)
        size = max(1, (len(nodes) - 1) // 2)
        others = _rotated([n for n in nodes if n != leader], spec)
        if spec.params.get("leader_side", "minority") == "minority":
            minority = [leader] + others[:size - 1]
        else:
            minority = others[:size]
        majority = [n for n in nodes if n not in minority]
        return cut(minority, majority), minority, {"minority": minority, "majority": majority}


class Bridge(_Partition):
    """Two halves that cannot reach each other but both reach one bridge node (by default a follower).

    With three nodes: the leader and the other follower lose each other; the bridge keeps both."""

    name = "partition-bridge"

    def grudge(self, ctx, spec):
        bridge = resolve_node(ctx, spec, "follower")
        leader = resolve_node(ctx, FaultSpec(spec.kind, 0, 0, {**spec.params, "target": "leader"}))
        rest = _rotated([n for n in all_node_ids(ctx) if n not in (bridge, leader)], spec)
        left = [leader] + rest[1::2] if leader != bridge else rest[1::2]
        right = [n for n in rest if n not in left]
        return cut(left, right), [bridge], {"bridge": bridge, "halves": [left, right]}


class OneWay(_Partition):
    """Asymmetric: one node (by default a follower) drops every packet arriving from its peers.

    Its own packets still leave, so peers see requests but their answers never arrive
    (over TCP both directions soon stall; the packet loss itself is one-way)."""

    name = "partition-oneway"

    def grudge(self, ctx, spec):
        victim = resolve_node(ctx, spec, "follower")
        others = [n for n in all_node_ids(ctx) if n != victim]
        return {victim: others}, [victim], {"deaf_to": others}


def _rotated(nodes: list[int], spec: FaultSpec) -> list[int]:
    """The nodes in an order drawn by the schedule (`rotate`), so the seed picks who goes where."""
    if not nodes:
        return nodes
    k = int(spec.params.get("rotate", 0)) % len(nodes)
    return nodes[k:] + nodes[:k]


PARTITION_KINDS = (IsolateNode(), MajorityMinority(), Bridge(), OneWay())
