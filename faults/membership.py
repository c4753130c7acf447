"""Broker membership: a broker decommissioned for the window, added back and reassigned onto at the heal.

The inject does what an operator does to retire a broker in KRaft: move every replica it holds
(every topic, internal ones too) onto the other brokers with AlterPartitionReassignments, wait
until the moves are done, shut it down (controlled), and UnregisterBroker it. The heal adds it
back: started again it registers anew, and the replicas that left it are reassigned onto it
(their logs copied back from the leaders) and their preferred leaders elected.

It provokes leadership and replica moves under load, fetch sessions and preferred read
replicas (KIP-227, KIP-392) on a broker that leaves the cluster, and followers catching up
from an empty log. Moving a replica needs a broker outside its set: with a replication factor
of 3 the cluster needs a fourth broker (`MIN_BROKERS`), so the kind is opt-in.
"""
from __future__ import annotations

import time
from collections import Counter
from contextlib import suppress

from confluent_kafka import ElectionType

from kipcheck.effects import CHANGES_MEMBERSHIP, ELECTS, LOSES_STATE, MOVES_REPLICAS, STOPS_NODE
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.election import elect, reassign
from kipcheck.faults.errors import FaultError
from kipcheck.faults.process import heal_processes, start, wait_healthy
from kipcheck.faults.targets import partition_of, resolve_node, view

#: a replication factor of 3 plus one broker for the replicas to move to
MIN_BROKERS = 4
#: moves are asked again for topics created while the last ones ran (the observer's KIP-1166
#: probe topics come and go every few seconds); what a broker still holds after these rounds is
#: recorded (`left_on_broker`), and a fenced broker gets no new replicas
MOVE_ROUNDS = 3

#: how long the brokers' metadata may take to list a finished reassignment
METADATA_SEEN_S = 30.0

Assignment = dict[tuple[str, int], list[int]]


def moves_off(assignment: Assignment, victim: int, brokers: list[int]) -> Assignment:
    """The new replica list of every partition that has a replica on `victim`: the victim's place
    taken by the broker outside the set with the fewest replicas so far (ties: the lowest id),
    so the moved replicas spread over the others. Deterministic for one assignment."""
    load = Counter(r for replicas in assignment.values() for r in replicas if r != victim)
    moves = {}
    for tp in sorted(assignment):
        replicas = assignment[tp]
        if victim not in replicas:
            continue
        spare = [b for b in brokers if b != victim and b not in replicas]
        if not spare:
            raise FaultError(f"{tp[0]}-{tp[1]} has replicas on {sorted(replicas)} and no other broker to move to")
        to = min(spare, key=lambda b: (load[b], b))
        load[to] += 1
        moves[tp] = [to if r == victim else r for r in replicas]
    return moves


def assignment_of(ctx: FaultContext) -> Assignment:
    """Every partition's replicas, internal topics included, from the cluster's metadata."""
    meta = ctx.admin().client.list_topics(timeout=30)
    return {(t, p): list(pm.replicas) for t, tm in meta.topics.items() for p, pm in tm.partitions.items()}


class BrokerDecommission:
    """Decommission one broker (`target` "leader"/"follower" of the spec's partition, or a node id)
    for the window; the heal adds it back and reassigns its replicas onto it."""

    name = "broker-decommission"
    # its replicas move off, then it stops (cleanly) until the heal starts it from its checkpoints
    effects = frozenset({MOVES_REPLICAS, ELECTS, CHANGES_MEMBERSHIP, STOPS_NODE, LOSES_STATE})
    min_brokers = MIN_BROKERS
    heal_all = staticmethod(heal_processes)  # a decommissioned broker is a stopped node: started, it registers

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        brokers = sorted(n.spec.node_id for n in ctx.cluster.brokers)
        if len(brokers) < MIN_BROKERS:
            raise FaultError(f"decommissioning a broker needs {MIN_BROKERS} brokers (replicas must move to one "
                             f"outside their set); the cluster has {len(brokers)}")
        victim = resolve_node(ctx, spec, "leader")
        if victim not in brokers:
            raise FaultError(f"node {victim} is no broker of this cluster (brokers: {brokers})")
        before, moves, left = {}, {}, []
        try:
            for _ in range(MOVE_ROUNDS):
                # partitions already moved are left out: metadata read right after a move may still
                # list the adding and removing replicas together (seen: [1, 2, 3, 4])
                now = {tp: r for tp, r in assignment_of(ctx).items() if tp not in moves}
                more = moves_off(now, victim, brokers)
                if not more:
                    break
                reassign(ctx, more)
                for tp, replicas in more.items():
                    before.setdefault(tp, now[tp])
                    moves[tp] = replicas
            left = sorted(f"{t}/{p}" for (t, p), replicas in assignment_of(ctx).items()
                          if victim in replicas and (t, p) not in moves)
        except BaseException:
            with suppress(Exception):  # nothing half done outlives a failed inject; the first error is the one told
                _move_back(ctx, before)
            raise
        ctx.cluster.node(victim).stop_node(clean_shutdown=True)
        ctx.cluster.unregister_broker(victim)
        registered = sorted(ctx.admin().broker_ids())
        if victim in registered:
            raise FaultError(f"broker {victim} is still registered after UnregisterBroker ({registered})")
        return {"targets": [victim], "brokers_before": brokers, "brokers_after": registered,
                "moved": {f"{t}/{p}": [before[(t, p)], moves[(t, p)]] for t, p in sorted(moves)},
                **({"left_on_broker": left} if left else {})}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        [victim] = injected["targets"]
        node = ctx.cluster.node(victim)
        if not node.alive():
            start(node)
        wait_healthy(ctx)  # registered again, every broker, before replicas move onto it
        originals = {}
        for key, (original, _during) in injected["moved"].items():
            topic, partition = key.rsplit("/", 1)
            originals[(topic, int(partition))] = original
        _move_back(ctx, originals)


def _move_back(ctx: FaultContext, originals: Assignment) -> None:
    """Moved partitions back to their original replicas (those whose topic still exists), preferred leaders elected."""
    now = assignment_of(ctx)
    back = {tp: replicas for tp, replicas in originals.items() if tp in now}
    if back:
        reassign(ctx, back)
        elect(ctx, sorted(back), ElectionType.PREFERRED)
        _wait_assignment_seen(ctx, back)


def _wait_assignment_seen(ctx: FaultContext, wanted: Assignment, timeout: float = METADATA_SEEN_S) -> None:
    """Until the brokers' metadata lists `wanted`: the controller ends a reassignment before every
    broker has applied the record that ends it, and a client reading right after may still see the
    replicas of the move (CI 2026-11-28: the heal's partitions read back unchanged for a moment)."""
    deadline = time.monotonic() + timeout
    while True:
        now = assignment_of(ctx)
        differ = sorted(f"{t}/{p}" for (t, p), r in wanted.items() if (t, p) in now and now[(t, p)] != r)
        if not differ:
            return
        if time.monotonic() > deadline:
            raise FaultError(f"{len(differ)} partition(s) not back on their replicas {timeout:.0f} s after the "
                             f"reassignment ended: {', '.join(differ[:3])}")
        time.sleep(0.5)


class ReassignWhileDown:
    """Move a partition off one follower onto a spare broker while its other follower is stopped
    (cleanly), and hold the stop for `hold` seconds at most while the move may complete.

    KIP-455 completes a move once every target replica is in the ISR, so with a kept replica
    down the move must wait for it; Kafka 3.3-3.7 completed it once the spare had caught up
    (KAFKA-15665), which the metadata log shows (`premature-reassignment-completion`). The heal
    starts the stopped broker, lets the move finish and moves the partition back."""

    name = "reassign-while-down"
    effects = frozenset({MOVES_REPLICAS, ELECTS, STOPS_NODE, LOSES_STATE})
    min_brokers = MIN_BROKERS
    heal_all = staticmethod(heal_processes)  # a stopped broker is started; moves left over are cancelled
                                             # by the reassign kind's heal-all

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        topic, partition = partition_of(spec, ctx)
        p = view(ctx, topic, partition)
        original, brokers = list(p.replicas), sorted(n.spec.node_id for n in ctx.cluster.brokers)
        followers = [r for r in original if r != p.leader]
        spares = [b for b in brokers if b not in original]
        if len(followers) < 2 or not spares:
            raise FaultError(f"moving {topic}/{partition} off a follower while another is down needs two followers "
                             f"and a broker outside its replicas {original} (brokers: {brokers})")
        down = followers[int(spec.params.get("index", 0)) % 2]
        moved = next(f for f in followers if f != down)
        target = [spares[0] if r == moved else r for r in original]
        ctx.cluster.node(down).stop_node(clean_shutdown=True, timeout=30)
        _wait_out_of_isr(ctx, topic, partition, down)
        t0 = time.monotonic()
        finished = reassign(ctx, {(topic, partition): target}, timeout=float(spec.params.get("hold", 10)),
                            must_finish=False)
        return {"targets": [down], "spare": spares[0], "moved_off": moved, "replicas_before": original,
                "replicas_after": target, "completed_while_down": finished,
                **({"completed_after_s": round(time.monotonic() - t0, 3)} if finished else {})}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        topic, partition = partition_of(spec, ctx)
        node = ctx.cluster.node(injected["targets"][0])
        if not node.alive():
            start(node)
        wait_healthy(ctx)
        reassign(ctx, {(topic, partition): injected["replicas_after"]})  # finishes once the kept replica is back
        _move_back(ctx, {(topic, partition): injected["replicas_before"]})


def _wait_out_of_isr(ctx: FaultContext, topic: str, partition: int, broker: int, timeout: float = 30.0) -> None:
    """Until the partition's ISR lacks `broker` (a controlled shutdown takes it out at once)."""
    deadline = time.monotonic() + timeout
    while broker in view(ctx, topic, partition).isr:
        if time.monotonic() > deadline:
            raise FaultError(f"broker {broker} still in the ISR of {topic}/{partition} {timeout:.0f} s after it stopped")
        time.sleep(0.3)


MEMBERSHIP_KINDS = (BrokerDecommission(), ReassignWhileDown())
