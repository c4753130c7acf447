"""A fault is data (what, where, when) plus one inject and one heal (Jepsen's nemesis split).

`FaultSpec` is the data: a schedule is a list of them, made from a seed, and it can
be printed, stored in config.json and replayed. A `FaultKind` knows how to inject
and heal one kind of fault on a live cluster; it never decides *when*.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Protocol

from kipcheck.faults.cluster import Admin, Cluster


@dataclass(frozen=True)
class FaultSpec:
    kind: str  # a FaultKind name: "partition", "latency", "kill", ...
    start: float  # seconds after the workload starts
    duration: float  # seconds until the heal
    params: dict = field(default_factory=dict)  # kind-specific, e.g. {"target": "leader", "topic": "t", "partition": 0}

    def as_json(self) -> dict:
        return {"kind": self.kind, "start": self.start, "duration": self.duration, "params": self.params}


class FaultContext(Protocol):
    """What a fault may touch: the cluster (faults.cluster), an admin client, the workload topic,
    and the event that ends the run (`stop_event`, set by the nemesis that runs on this context;
    None outside a nemesis): long faults (rolling-restart) stop early when it is set."""

    cluster: Cluster
    topic: str
    stop_event: threading.Event | None = None

    def admin(self) -> Admin: ...

    def leader_of(self, topic: str, partition: int) -> int: ...


class FaultKind(Protocol):
    name: str
    # what the fault does (kipcheck.effects): written into each of its history records, read by the checker
    effects: frozenset[str]
    # optional: ClusterOptions fields the cluster must start with (e.g. {"log_dirs": 2}, {"proxied_clients": True});
    # faults.registry.cluster_options
    cluster_options: dict

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        """Apply the fault; return what it resolved (e.g. which nodes), recorded in the history."""

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        """Undo exactly what `inject` did."""

    def heal_all(self, ctx: FaultContext) -> None:
        """Undo every fault of this kind, whatever state the run is in (idempotent).

        Kinds of one family share one function here (flush every chain, reset every
        proxy, restart every stopped node), so heal-all runs each family once."""
