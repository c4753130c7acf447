"""Link faults: Toxiproxy toxics on the proxies in front of nodes' listeners.

Client link faults (`latency`, `bandwidth`, ...) act on the proxy in front of each broker's
CLIENT listener, which needs `ClusterOptions(proxied_clients=True)`. Links between nodes
(`replication-*`, `controller-latency`) act on the proxies in front of a node's replication
(INTERNAL) or CONTROLLER listener, which run in the node's own namespace so that its peers'
packets keep their source address and partitions stay exact: `ClusterOptions(proxied_links=True)`.
`kipcheck run` asks for either when a schedule holds such a kind.

A spec's `target` is "leader" (the partition's leader: its replication listener is what its
followers fetch from), "follower", "all", a node id, or for the controller listener
"controller" with an `index` (the index-th controller by id); `stream` is "downstream"
(from the proxied node) or "upstream" (towards it); the other params are the toxic's attributes.
"""
from __future__ import annotations

from kipcheck.effects import SLOWS_LINKS
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.cluster import LinkProxy
from kipcheck.faults.errors import FaultError
from kipcheck.faults.targets import resolve_node

#: the ClusterOptions field that puts proxies in front of each listener
NEEDS = {"client": "proxied_clients", "replication": "proxied_links", "controller": "proxied_links"}


def _proxies(ctx: FaultContext, node_ids: list[int], listener: str) -> list[LinkProxy]:
    """The proxies in front of these nodes' listener; a missing one (e.g. the external backend) is an error."""
    proxies = [ctx.cluster.link_proxy(n, listener) for n in node_ids]
    if not proxies or None in proxies:
        raise FaultError(f"{listener} link faults need a cluster with proxies in front of that listener "
                         f"(ClusterOptions({NEEDS[listener]}=True), native backend)")
    return proxies


def heal_toxics(ctx: FaultContext) -> None:
    ctx.cluster.reset_link_proxies()


class LinkToxic:
    effects = frozenset({SLOWS_LINKS})
    heal_all = staticmethod(heal_toxics)

    def __init__(self, name: str, toxic_type: str, defaults: dict, stream: str = "downstream",
                 listener: str = "client"):
        self.name, self.toxic_type, self.defaults, self.stream = name, toxic_type, defaults, stream
        self.listener = listener

    @property
    def cluster_options(self) -> dict:
        return {NEEDS[self.listener]: True}

    @property
    def toxic_name(self) -> str:
        return f"kipcheck-{self.name}"

    def attributes(self, spec: FaultSpec) -> dict:
        return {k: spec.params.get(k, v) for k, v in self.defaults.items()}

    def _targets(self, ctx: FaultContext, spec: FaultSpec) -> list[int]:
        target = spec.params.get("target", "leader")
        if self.listener == "controller":
            controllers = sorted(n.spec.node_id for n in ctx.cluster.nodes if n.spec.is_controller)
            if target == "all":
                return controllers
            if target == "controller" and controllers:
                return [controllers[int(spec.params.get("index", 0)) % len(controllers)]]
        elif target == "all":
            return [n.spec.node_id for n in ctx.cluster.brokers]
        return [resolve_node(ctx, spec, "leader")]

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        targets = self._targets(ctx, spec)
        attrs, stream = self.attributes(spec), spec.params.get("stream", self.stream)
        proxies = _proxies(ctx, targets, self.listener)
        for p in proxies:
            p.add_toxic(self.toxic_name, self.toxic_type, attrs, stream=stream,
                        toxicity=float(spec.params.get("toxicity", 1.0)))
        return {"targets": targets, "listener": self.listener, "proxies": [p.name for p in proxies],
                "stream": stream, "attributes": attrs}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for p in _proxies(ctx, injected["targets"], self.listener):
            p.remove_toxic(self.toxic_name)


# Defaults are mild enough for a whole run; schedules draw their own (faults.schedule).
TOXIC_KINDS = (
    LinkToxic("latency", "latency", {"latency": 200, "jitter": 50}),  # ms added per chunk, +- jitter
    LinkToxic("bandwidth", "bandwidth", {"rate": 64}),  # KB/s
    LinkToxic("slow-close", "slow_close", {"delay": 2000}),  # ms before a close is passed on
    LinkToxic("timeout", "timeout", {"timeout": 3000}),  # data stops; close after ms (0: never)
    LinkToxic("reset-peer", "reset_peer", {"timeout": 500}),  # TCP RST after ms
    LinkToxic("slicer", "slicer", {"average_size": 64, "size_variation": 32, "delay": 500}),  # bytes, bytes, us
    LinkToxic("limit-data", "limit_data", {"bytes": 65536}),  # close after this many bytes
    # links between nodes: follower fetches (follower lag, HWM lag, ISR shrinks) and KRaft traffic
    # (fetch parking, broker heartbeats, metadata propagation: KIP-1166's bound)
    LinkToxic("replication-latency", "latency", {"latency": 500, "jitter": 50}, listener="replication"),
    LinkToxic("replication-bandwidth", "bandwidth", {"rate": 32}, listener="replication"),
    LinkToxic("replication-reset", "reset_peer", {"timeout": 500}, listener="replication"),
    LinkToxic("controller-latency", "latency", {"latency": 300, "jitter": 50}, listener="controller"),
)
