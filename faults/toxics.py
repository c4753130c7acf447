"""Link faults: Toxiproxy toxics on the proxies that front each broker's CLIENT listener.

Needs a cluster started with `ClusterOptions(proxied_clients=True)` (`kipcheck run` does
that when a schedule holds one of these kinds). A spec's `target` is "leader" (the
proxy of the partition's leader), "all", or a node id; `stream` is "downstream"
(broker -> client) or "upstream"; the other params are the toxic's attributes.
Inter-broker traffic is not proxied: partitions match peers by source address, which a
proxy in between would hide (see docs/faults.md).
"""
from __future__ import annotations

from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.cluster import ClientProxy
from kipcheck.faults.errors import FaultError
from kipcheck.faults.targets import resolve_node


def _proxies(ctx: FaultContext, node_ids: list[int]) -> list[ClientProxy]:
    """The client proxies of these brokers; none at all (e.g. the external backend) is an error."""
    proxies = [ctx.cluster.client_proxy(n) for n in node_ids]
    if not proxies or None in proxies:
        raise FaultError("link faults need a cluster with proxied clients (ClusterOptions(proxied_clients=True))")
    return proxies


def heal_toxics(ctx: FaultContext) -> None:
    ctx.cluster.reset_client_proxies()


class LinkToxic:
    needs_proxies = True
    heal_all = staticmethod(heal_toxics)

    def __init__(self, name: str, toxic_type: str, defaults: dict, stream: str = "downstream"):
        self.name, self.toxic_type, self.defaults, self.stream = name, toxic_type, defaults, stream

    @property
    def toxic_name(self) -> str:
        return f"kipcheck-{self.name}"

    def attributes(self, spec: FaultSpec) -> dict:
        return {k: spec.params.get(k, v) for k, v in self.defaults.items()}

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        if spec.params.get("target", "leader") == "all":
            targets = [n.spec.node_id for n in ctx.cluster.brokers]
        else:
            targets = [resolve_node(ctx, spec, "leader")]
        attrs, stream = self.attributes(spec), spec.params.get("stream", self.stream)
        proxies = _proxies(ctx, targets)
        for p in proxies:
            p.add_toxic(self.toxic_name, self.toxic_type, attrs, stream=stream,
                        toxicity=float(spec.params.get("toxicity", 1.0)))
        return {"targets": targets, "proxies": [p.name for p in proxies], "stream": stream, "attributes": attrs}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for p in _proxies(ctx, injected["targets"]):
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
)
