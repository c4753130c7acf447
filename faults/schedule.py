"""Seeded fault schedules (Jepsen's generator side): the same arguments always give the same list.

A schedule alternates fault windows and quiet gaps; windows never overlap, so two
destructive faults never stack (a kill during a wipe could take the last in-sync copy).
Each kind draws its own parameters from the seed (which node, how much latency, ...).
The last fifth of the run stays quiet so the cluster recovers before the final reads.
"""
from __future__ import annotations

import math
import random

from kipcheck.faults.base import FaultSpec

QUIET_TAIL = 0.2  # fraction of the run left without faults

# (shortest, longest) window in seconds at intensity 1; how long the fault holds.
WINDOWS = {
    "partition": (6, 15), "partition-majority": (6, 15), "partition-bridge": (6, 15), "partition-oneway": (6, 15),
    "latency": (4, 10), "bandwidth": (4, 10), "slow-close": (4, 10), "timeout": (3, 8), "reset-peer": (3, 8),
    "slicer": (4, 10), "limit-data": (4, 10),
    "replication-latency": (4, 10), "replication-bandwidth": (4, 10), "replication-reset": (3, 8),
    "controller-latency": (4, 10),
    "elect": (1, 2), "elect-unclean": (1, 2), "reassign": (3, 8),
    "kill": (5, 15), "pause": (3, 10), "restart": (5, 15), "rolling-restart": (1, 2),
    "wipe": (5, 12), "truncate": (3, 8), "bitflip": (3, 8), "wipe-metadata": (5, 12),
    "clock-skew": (5, 15), "clock-strobe": (5, 15), "log-dir-failure": (5, 12),
    "voter-removal": (5, 15), "broker-decommission": (5, 15), "reassign-while-down": (12, 20),
}
# Kinds after which the cluster needs longer to recover (restarts, re-replication).
SLOW_RECOVERY = {"kill", "restart", "rolling-restart", "wipe", "truncate", "bitflip", "wipe-metadata",
                 "log-dir-failure", "voter-removal", "broker-decommission", "reassign-while-down"}


def _node(rng: random.Random) -> dict:
    return {"target": rng.choice(["leader", "follower"]), "index": rng.randrange(2)}


# Per kind: parameters drawn from the seed (the toxic attributes are Toxiproxy's own names).
PARAMS = {
    "partition": _node,
    "partition-majority": lambda r: {"leader_side": r.choice(["minority", "majority"]), "rotate": r.randrange(4)},
    "partition-bridge": lambda r: {"target": "follower", "index": r.randrange(2), "rotate": r.randrange(4)},
    "partition-oneway": _node,
    "latency": lambda r: {"target": r.choice(["leader", "all"]), "latency": r.choice([50, 100, 200, 500]),
                          "jitter": r.choice([0, 10, 50]), "stream": r.choice(["downstream", "upstream"])},
    "bandwidth": lambda r: {"target": r.choice(["leader", "all"]), "rate": r.choice([16, 64, 256]),
                            "stream": r.choice(["downstream", "upstream"])},
    "slow-close": lambda r: {"target": r.choice(["leader", "all"]), "delay": r.choice([500, 1000, 3000])},
    "timeout": lambda r: {"target": "leader", "timeout": r.choice([0, 1000, 5000])},
    "reset-peer": lambda r: {"target": r.choice(["leader", "all"]), "timeout": r.choice([0, 100, 1000])},
    "slicer": lambda r: {"target": r.choice(["leader", "all"]), "average_size": r.choice([16, 64, 256]),
                         "size_variation": 8, "delay": r.choice([0, 100, 1000])},
    "limit-data": lambda r: {"target": "leader", "bytes": r.choice([1024, 16384, 65536])},
    # a leader's replication listener: its followers' fetches (downstream: the answers) slow down
    "replication-latency": lambda r: {"target": r.choice(["leader", "all"]), "latency": r.choice([100, 500, 2000]),
                                      "jitter": r.choice([0, 50]), "stream": r.choice(["downstream", "upstream"])},
    "replication-bandwidth": lambda r: {"target": r.choice(["leader", "all"]), "rate": r.choice([8, 32, 128])},
    "replication-reset": lambda r: {"target": "leader", "timeout": r.choice([0, 500, 2000])},
    # KRaft: fetches from the quorum, votes, broker heartbeats (one controller, or all of them)
    "controller-latency": lambda r: {"target": r.choice(["controller", "all"]), "index": r.randrange(3),
                                     "latency": r.choice([100, 300, 1000]), "jitter": r.choice([0, 50])},
    "elect": lambda r: {"partition": "all"},
    "elect-unclean": lambda r: {"partition": "all"},
    "reassign": lambda r: {"rotate": r.choice([1, 2])},
    "kill": _node, "pause": _node, "restart": _node,
    "rolling-restart": lambda r: {"rotate": r.randrange(3)},
    "wipe": _node,
    "truncate": lambda r: {**_node(r), "bytes": r.choice([100, 4096, 65536]), "segment": r.choice(["active", "closed"])},
    "bitflip": lambda r: {"target": "follower", "index": r.randrange(2), "segment": r.choice(["active", "closed"]),
                          "file": r.choice(["log", "log", "index"]), "flips": r.choice([1, 8, 64]),
                          "seed": r.randrange(1 << 30)},
    "wipe-metadata": lambda r: {"target": "follower", "index": r.randrange(2)},
    "clock-skew": lambda r: {**_node(r), "offset": r.choice([-600, -120, -30, -5, 5, 30, 120, 600])},  # seconds
    "clock-strobe": lambda r: {**_node(r), "offset": r.choice([-300, -60, 60, 300]), "period": r.choice([1, 2, 4])},
    "log-dir-failure": _node,
    "voter-removal": lambda r: {"target": "controller", "index": r.randrange(3)},
    "broker-decommission": _node,
    # which follower stops (the other one moves to the spare broker); how long the move may complete meanwhile
    "reassign-while-down": lambda r: {"index": r.randrange(2), "hold": r.choice([8, 10])},
}


def single_partition(duration: float, topic: str) -> list[FaultSpec]:
    """The skeleton's schedule: isolate the leader of partition 0 for ~10 s, a third of the way in."""
    length = min(10.0, duration / 3)
    return [FaultSpec("partition", start=duration / 3, duration=length,
                      params={"target": "leader", "topic": topic, "partition": 0})]


#: node and link faults that may hit a coordinator (a transaction's, a share group's) instead of a
#: partition's leader or follower
COORDINATOR_KINDS = {"partition", "partition-oneway", "kill", "pause", "restart", "latency"}
#: Latency on the clients' link to a coordinator (issue 22): longer than the txn producers' request
#: timeout (5 s, harness.clients.workload.PRODUCER_REQUEST_TIMEOUT_MS), so a producer gives up on an
#: AddPartitionsToTxn, EndTxn or produce request and retries it while the first is still on its way
#: (the delayed-commit-lands-on-a-later-transaction case KIP-890 defends against)
COORDINATOR_LATENCY_MS = (6000, 8000)
#: Latency on a share run's client links (issue 31): longer than the record lock (5 s,
#: WorkloadOptions.share_lock_ms), so the lock of records a share consumer acquired expires before
#: its acknowledgement arrives, and a heartbeat answer comes after the records went to another member
SHARE_LATENCY_MS = (6000, 8000)
#: the share group's coordinators: the group coordinator (membership, assignment) and the share
#: coordinator holding a share-partition's state (start offset, delivery counts)
SHARE_COORDINATOR_TARGETS = ("group-coordinator", "share-coordinator")


def generate(seed: int, kinds: list[str], duration: float, topic: str, intensity: float = 1.0,
             partitions: int = 3, transactional_ids: tuple[str, ...] = (),
             share_group: str | None = None) -> list[FaultSpec]:
    """Alternate fault windows and quiet gaps over the first 80% of the run, kinds drawn from `kinds`.

    `intensity` stretches windows and shortens gaps (2.0: twice as long, half the rest). With
    `transactional_ids` (the txn workload) half the node faults of `COORDINATOR_KINDS` hit the
    coordinator of one of them instead, drawn from a second generator so that the times and
    kinds stay those of the seed's schedule without transactions; such a latency is
    `COORDINATOR_LATENCY_MS`, past the producers' request timeout. With `share_group` (the share
    workload) half of them hit its group coordinator or the share coordinator of the spec's
    partition, the same way, and every latency is `SHARE_LATENCY_MS`, past the record lock."""
    specs = _generate(seed, kinds, duration, topic, intensity, partitions)
    if transactional_ids:
        specs = _on_txn_coordinators(specs, random.Random(f"{seed}/coordinator"), transactional_ids)
    if share_group:
        specs = _on_share_coordinators(specs, random.Random(f"{seed}/share-coordinator"), share_group)
    return specs


def _on_txn_coordinators(specs: list[FaultSpec], rng: random.Random,
                         transactional_ids: tuple[str, ...]) -> list[FaultSpec]:
    def on_coordinator(s: FaultSpec) -> FaultSpec:
        params = {**s.params, "target": "coordinator", "transactional_id": rng.choice(transactional_ids)}
        if s.kind == "latency":
            params["latency"] = rng.choice(COORDINATOR_LATENCY_MS)
        return FaultSpec(s.kind, s.start, s.duration, params)
    return [on_coordinator(s) if s.kind in COORDINATOR_KINDS and rng.random() < 0.5 else s for s in specs]


def _on_share_coordinators(specs: list[FaultSpec], rng: random.Random, group: str) -> list[FaultSpec]:
    """Half the `COORDINATOR_KINDS` faults moved to one of the share group's coordinators (the spec's
    topic and partition name the share-partition whose share coordinator it is); every latency
    longer than the lock, wherever it lands (the share consumers fetch from the leaders)."""
    def on_share(s: FaultSpec) -> FaultSpec:
        params = dict(s.params)
        if s.kind in COORDINATOR_KINDS and rng.random() < 0.5:
            params.update(target=rng.choice(SHARE_COORDINATOR_TARGETS), group=group)
        if s.kind == "latency":
            params["latency"] = rng.choice(SHARE_LATENCY_MS)
        return FaultSpec(s.kind, s.start, s.duration, params)
    return [on_share(s) for s in specs]


def _generate(seed: int, kinds: list[str], duration: float, topic: str, intensity: float,
              partitions: int) -> list[FaultSpec]:
    rng = random.Random(seed)
    intensity = max(intensity, 0.1)
    pool = sorted(set(kinds))
    specs, t = [], rng.uniform(3.0, 6.0)
    end = duration * (1 - QUIET_TAIL)
    while t < end and pool:
        kind = rng.choice(pool)
        lo, hi = WINDOWS.get(kind, (4, 12))
        t = round(t, 3)
        length = math.floor(min(rng.uniform(lo, hi) * intensity, end - t) * 1000) / 1000  # never past `end`
        if length < min(lo, 2.0):
            break
        params = {"topic": topic, "partition": rng.randrange(partitions), **PARAMS.get(kind, _node)(rng)}
        specs.append(FaultSpec(kind, start=t, duration=length, params=params))
        gap = rng.uniform(8.0, 15.0) if kind in SLOW_RECOVERY else rng.uniform(3.0, 8.0)
        t += length + gap / intensity
    return specs
