"""Leadership faults by the Admin API: preferred and unclean elections, partition reassignment.

Elections go through confluent-kafka's `AdminClient.elect_leaders`. confluent-kafka has
no AlterPartitionReassignments, so reassignment uses kafka-python's admin client.
An election is not undone (its heal does nothing); a reassignment's heal puts the
original replica order back and elects the preferred leaders again.
"""
from __future__ import annotations

import time

from confluent_kafka import ElectionType, KafkaException, TopicPartition

from kipcheck.effects import ELECTS, MOVES_REPLICAS, TRUNCATES
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.targets import describe, partition_of, view


def _partitions(ctx: FaultContext, spec: FaultSpec) -> list[tuple[str, int]]:
    """The spec's partition, or with `partition: "all"` every partition of its topic."""
    topic = spec.params.get("topic", ctx.topic)
    if spec.params.get("partition") == "all":
        return [(topic, p.partition) for p in describe(ctx, topic)]
    return [partition_of(spec, ctx)]


def elect(ctx: FaultContext, partitions: list[tuple[str, int]], election: ElectionType) -> dict[str, str]:
    """Run one election; per "topic/partition" the broker's answer ("NONE", "ELECTION_NOT_NEEDED", ...)."""
    admin = ctx.admin()
    # no timeout arguments: confluent-kafka 2.16's C binding fails on any keyword argument of elect_leaders
    # (SystemError "more argument specifiers than keyword list entries"); the admin's socket timeout applies
    fut = admin.client.elect_leaders(election, [TopicPartition(t, p) for t, p in partitions])
    try:
        result = fut.result(timeout=40)
    except KafkaException as e:
        raise FaultError(f"{election.name.lower()} election failed: {e.args[0].str()}") from None
    out = {}
    for tp, err in result.items():
        if isinstance(err, KafkaException):
            err = err.args[0]
        out[f"{tp.topic}/{tp.partition}"] = "NONE" if err is None else err.name()  # a KafkaError per partition
    return out


def leaders(ctx: FaultContext, partitions: list[tuple[str, int]]) -> dict[str, int]:
    by_topic = {}
    for t, p in partitions:
        if t not in by_topic:
            by_topic[t] = {x.partition: x.leader for x in describe(ctx, t)}
    return {f"{t}/{p}": by_topic[t].get(p, -1) for t, p in partitions}


class Elect:
    """A preferred (or unclean) leader election for the spec's partition(s).

    A preferred election moves leadership back to the first replica when a fault moved
    it away; otherwise it is ELECTION_NOT_NEEDED. An unclean election only acts on a
    partition with no leader and no in-sync replica left, which a schedule rarely makes:
    then too the answer is recorded."""


    def __init__(self, name: str, election: ElectionType):
        self.name, self.election = name, election
        # an unclean leader's log is the partition's from then on: the others truncate to it
        self.effects = frozenset({ELECTS, TRUNCATES}) if election == ElectionType.UNCLEAN else frozenset({ELECTS})

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        parts = _partitions(ctx, spec)
        before = leaders(ctx, parts)
        results = elect(ctx, parts, self.election)
        after = leaders(ctx, parts)
        deadline = time.monotonic() + 15  # metadata trails the controller's answer a little
        while time.monotonic() < deadline and any(
                results[k] == "NONE" and after[k] == before[k] for k in results):
            time.sleep(0.5)
            after = leaders(ctx, parts)
        moved = sorted({x for k in before if before[k] != after[k] for x in (before[k], after[k]) if x >= 0})
        return {"targets": moved, "results": results, "leaders_before": before, "leaders_after": after}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        pass

    @staticmethod
    def heal_all(ctx: FaultContext) -> None:
        pass


def _kafka_python_admin(ctx: FaultContext):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=ctx.cluster.bootstrap_servers().split(","),
                            request_timeout_ms=30000, client_id="kipcheck-nemesis")


#: per-partition answers a reassignment may get without failing: a topic deleted meanwhile (the
#: observer's propagation topics come and go), a cancel of a move that already finished
TOLERATED_REASSIGN_ERRORS = frozenset({"UnknownTopicOrPartitionError", "NoReassignmentInProgressError"})


def reassign(ctx: FaultContext, assignments: dict[tuple[str, int], list[int] | None], timeout: float = 120.0,
             must_finish: bool = True) -> bool:
    """Submit reassignments (None cancels one) and wait until none of them is in progress: True then;
    past `timeout` a FaultError, or False when the moves need not finish (`must_finish` false).
    A partition the controller refuses is a FaultError (kafka-python returns those errors, never raises)."""
    from kafka import TopicPartition as KTP
    admin = _kafka_python_admin(ctx)
    try:
        answers = admin.alter_partition_reassignments({KTP(t, p): r for (t, p), r in assignments.items()})
        refused = sorted(f"{tp.topic}/{tp.partition}: {err.__name__}" for tp, err in answers.items()
                         if err is not None and err.__name__ not in TOLERATED_REASSIGN_ERRORS)
        if refused:
            raise FaultError(f"reassignment refused for {len(refused)} partition(s): {'; '.join(refused[:3])}")
        deadline = time.monotonic() + timeout
        while True:
            pending = admin.list_partition_reassignments([KTP(t, p) for t, p in assignments])
            if not pending:
                return True
            if time.monotonic() > deadline:
                if not must_finish:
                    return False
                raise FaultError(f"reassignment still in progress after {timeout:.0f} s: {sorted(map(str, pending))}")
            time.sleep(0.5)
    finally:
        admin.close()


def heal_reassignments(ctx: FaultContext) -> None:
    """Cancel every reassignment in progress on the workload topic."""
    from kafka import TopicPartition as KTP
    admin = _kafka_python_admin(ctx)
    try:
        pending = admin.list_partition_reassignments({ctx.topic: [p.partition for p in describe(ctx, ctx.topic)]})
        if pending:
            admin.alter_partition_reassignments({KTP(tp.topic, tp.partition): None for tp in pending})
    finally:
        admin.close()


class Reassign:
    """Reorder a partition's replicas (rotate by `rotate`, default 1) and elect the new first replica.

    With as many brokers as replicas this moves leadership, not data; with more brokers
    `replace: true` swaps the last replica for a broker outside the set, which copies the log."""

    name = "reassign"
    effects = frozenset({MOVES_REPLICAS, ELECTS})
    heal_all = staticmethod(heal_reassignments)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        topic, partition = partition_of(spec, ctx)
        p = view(ctx, topic, partition)
        original = list(p.replicas)
        k = int(spec.params.get("rotate", 1)) % len(original) or 1
        new = original[k:] + original[:k]
        spare = [n.spec.node_id for n in ctx.cluster.brokers if n.spec.node_id not in original]
        if spec.params.get("replace") and spare:
            new[-1] = spare[0]
        reassign(ctx, {(topic, partition): new})
        results = elect(ctx, [(topic, partition)], ElectionType.PREFERRED)
        after = view(ctx, topic, partition).leader
        return {"targets": sorted({p.leader, after}), "replicas_before": original, "replicas_after": new,
                "leader_before": p.leader, "leader_after": after, "results": results}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        topic, partition = partition_of(spec, ctx)
        reassign(ctx, {(topic, partition): injected["replicas_before"]})
        elect(ctx, [(topic, partition)], ElectionType.PREFERRED)


ELECTION_KINDS = (Elect("elect", ElectionType.PREFERRED), Elect("elect-unclean", ElectionType.UNCLEAN), Reassign())
