"""Seeded broker bugs: the table of slips the Java agent in harness/backends/seeded_bugs/ plants in brokers.

The agent (Byte Buddy advice, `harness/backends/seeded_bugs/src/main/java/kipcheck/seeded/Slips.java`)
is loaded into every broker with `-javaagent:JAR=control=FILE,report={node_dir}/seeded-bugs.json`
(`ClusterOptions.broker_jvm_args`). Every bug is off at start; the agent polls the control
file and switches on the one bug named in it (empty: none). Each broker writes its report
every 500 ms: which bugs matched their Kafka method ("installed"), which targets were
missing from the class Kafka loaded ("missing"), and how often each bug fired.

`agent_jar()` builds the agent with Maven into the kipcheck cache, keyed by a hash of its
sources, so it is rebuilt only when they change (scripts/install.sh warms it).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends import maven_build

SOURCES = Path(__file__).resolve().parent / "seeded_bugs"  # shipped in the package (pyproject package data)
REPORT_NAME = "seeded-bugs.json"


@dataclass(frozen=True)
class SeededBug:
    name: str  # the bug's own name (the agent's switch); also the anomaly unless `expects` names another
    kafka_method: str  # the Kafka 4.3.1 class and method the slip changes
    slip: str  # what the slip does
    rule: str  # the rule it breaks (KIP section or Kafka contract)
    tiered: bool = False  # its window needs a tiered topic (remote storage on)
    min_window: float = 0.0  # seconds its window needs at least (the probe that can see it comes late)
    clients: bool = True  # its window runs the producers and consumers (False: only the prober and observer)
    workload: str = "default"  # its window's workload (WorkloadOptions.workload): "txn", "share" for those slips
    expects: str = ""  # the anomaly the checker must flag, when it is not `name` (a second slip of one family)
    provoke: str = ""  # what its window must make happen (harness.provocations.PROVOCATIONS): "" for nothing
    # its window's subscribers rejoin after this many seconds of each membership (WorkloadOptions.rejoin_after_s):
    # None keeps the workload's 10-20 s, which a short window may never reach
    rejoin_after_s: tuple[float, float] | None = None
    # seconds its window's subscribers stay out of the group between two memberships (WorkloadOptions.rejoin_gap_s)
    rejoin_gap_s: float = 0.0

    @property
    def anomaly(self) -> str:
        return self.expects or self.name


#: the share slips' windows: their share consumers get records only ~6 s after subscribing (measured 2026-11-29 on
#: 4.3.1: the assignment comes with a later heartbeat, group.share.heartbeat.interval.ms is 5 s by default)
SHARE_WINDOW_S = 15.0
#: the commit slips' subscriber stays: each membership's OffsetFetch comes a few seconds after the last one's commits
REJOIN_SOON_S = (1.5, 2.5)
#: the ownership slip's stays: long enough that a member is still there when the next one joins, so partitions
#: move by revocation (the handoff the slip breaks), not only by a member leaving with all of them
REJOIN_OVERLAP_S = (3.0, 5.0)
#: ...and the pause before each rejoin. A subscriber that rejoins at once (0.1-0.5 s) joins before the member still
#: there heartbeats: Kafka 4.3 computes the target when the newcomer joins, and its sticky assignor gives the
#: newcomer exactly what its predecessor freed. No owned partition moved, so the slipped lookup was never asked
#: about a held one: 0 fires in CI's 45 s window (2026-11-29); the only fires came from the two first joins.
#: After a pause, the member still there has taken the freed partitions (at its next heartbeat, within the
#: selftest's 2 s interval, once Kafka's group.consumer.assignment.interval.ms, 1 s, passed since the last target),
#: and the newcomer's join computes a target that moves some of them: the slipped lookup frees them at once.
REJOIN_GAP_S = 4.0

# Same names and targets as Agent.TARGETS (tests/test_seeded_bugs.py keeps them in step).
BUGS: tuple[SeededBug, ...] = (
    SeededBug("lost-write", "org.apache.kafka.storage.internals.log.LocalLog.append",
              "the segment write of one client batch in ten is skipped while the append is still acknowledged",
              "acks=all durability: an acknowledged write is in the log of every ISR member"),
    SeededBug("duplicate", "kafka.cluster.Partition.checkEnoughReplicasReachOffset",
              "one committed batch in three is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND (min-ISR comparison "
              "inverted), so a non-idempotent producer's retry appends it again",
              "produce contract: a retriable error after the append is only for an ISR below min.insync.replicas"),
    SeededBug("inconsistent-offset", "org.apache.kafka.server.LogAppendResult$LogAppendSummary.firstOffset",
              "the produce response's base offset is one past the batch's first offset (one append in five)",
              "produce contract: the acknowledged offset holds the acknowledged record"),
    SeededBug("poll-skip", "org.apache.kafka.storage.internals.log.UnifiedLog.read",
              "one consumer read in four starts at fetch offset + 1",
              "fetch contract: records are returned from the fetch offset on"),
    SeededBug("uncommitted-read", "org.apache.kafka.storage.internals.log.UnifiedLog.read",
              "consumer reads are bounded by the log end offset instead of the high watermark",
              "KIP-392: consumers read only committed data (below the HWM), from any replica"),
    SeededBug("hwm-regression", "kafka.cluster.Partition.readRecords",
              "every other consumer read reports a high watermark lagging by up to 3",
              "KIP-392/KIP-1166: the HWM a replica reports never goes back within a leader epoch"),
    # The original slip (issue 21 §4): only the out-of-range check moved from the log end to the HWM.
    SeededBug("wrong-fetch-error-case1", "org.apache.kafka.storage.internals.log.UnifiedLog.read",
              "the out-of-range check compares the fetch offset with the HWM (>=) instead of the log end (>): "
              "a consumer fetch in [HWM, LEO] fails with OFFSET_OUT_OF_RANGE",
              "KIP-392 case 1: an offset in [HWM, LEO] is not out of range", expects="wrong-fetch-error",
              # under the release's profile only the prober's case-1 probe names it: a 6 s window of the CI
              # matrix on a loaded machine held 8 prober fetches, none of case 1 (2026-11-28); alone, 1.2 s
              min_window=10.0),
    # The widened slip: the original plus a second branch above the log end.
    SeededBug("wrong-fetch-error", "org.apache.kafka.storage.internals.log.UnifiedLog.read",
              "the two out-of-range branches are swapped and bounded by the HWM: a consumer fetch in [HWM, LEO] "
              "fails with OFFSET_OUT_OF_RANGE, one above the log end with OFFSET_NOT_AVAILABLE",
              "KIP-392 cases 1 and 4: an offset in [HWM, LEO] is not out of range; one above HWM and LEO is",
              min_window=10.0),  # as the original slip's
    SeededBug("preferred-replica-violation", "org.apache.kafka.common.replica.RackAwareReplicaSelector.select",
              "the rack comparison is inverted: a follower in another rack is preferred over the client's rack",
              "KIP-392: the preferred read replica is an in-sync replica in the client's rack when one exists"),
    SeededBug("aborted-read", "org.apache.kafka.storage.internals.log.UnifiedLog.read",
              "a read_committed read is bounded by the high watermark and collects no aborted transactions "
              "(isolation TXN_COMMITTED read as HIGH_WATERMARK)",
              "KIP-98: read_committed readers see only committed transactions (LSO bound, aborted-transaction list)",
              workload="txn", min_window=20.0),  # transactional ids and __transaction_state come up first
    SeededBug("lso-violation", "kafka.cluster.Partition.readRecords",
              "every other consumer read reports a last stable offset one above its high watermark (the cap "
              "of UnifiedLog.lastStableOffset at the HWM dropped)",
              "KIP-98: the LSO is at most the high watermark"),
    SeededBug("fetch-session-violation", "org.apache.kafka.server.FetchSession.setEpoch",
              "a consumer session's epoch is advanced twice, so the client's correct next epoch is refused",
              "KIP-227: an incremental fetch carrying the session's epoch + 1 is accepted"),
    SeededBug("tiered-offset-violation", "org.apache.kafka.storage.internals.log.UnifiedLog.fetchEarliestPendingUploadOffset",
              "ListOffsets -6 answers the highest remote offset instead of that offset + 1 (the '+ 1' dropped)",
              "KIP-1023: earliest pending upload offset = last tiered offset + 1", tiered=True,
              min_window=10.0),  # a segment must roll and be uploaded first: flagged 2.7-3.9 s after switching on
    # The original slip (issue 21 §4): only the first of KIP-1166's two lines reverted; a HWM change still
    # releases the FETCHes parked before it, so only a FETCH that arrives after the change waits.
    SeededBug("hwm-propagation-delay-hwm-check", "org.apache.kafka.raft.KafkaRaftClient.isHighWatermarkUpdated",
              "the 'request HWM is behind' check always answers false, so an empty KRaft FETCH that only lacks "
              "the new HWM is parked up to the fetch max wait (the pre-KIP-1166 behaviour)",
              "KIP-1166: park a FETCH only when the response is empty and the remote HWM >= the leader's",
              min_window=30.0, clients=False, expects="hwm-propagation-delay"),  # as the widened slip's window
    # The widened slip: both lines reverted.
    SeededBug("hwm-propagation-delay", "org.apache.kafka.raft.KafkaRaftClient.isHighWatermarkUpdated "
              "+ org.apache.kafka.raft.internals.ThresholdPurgatory.completeAll",
              "KIP-1166's two lines reverted: the 'request HWM is behind' check always answers false, and a HWM "
              "change no longer releases parked FETCHes, so an empty KRaft FETCH that only lacks the new HWM "
              "waits for the next append or the fetch max wait (the pre-KIP-1166 behaviour)",
              "KIP-1166: park a FETCH only when the response is empty and the remote HWM >= the leader's; "
              "complete parked FETCHes when the leader's HWM changes",
              # >= 20 counted metadata changes (kip1166.MIN_CHANGES) even on a loaded machine. The slip is in
              # the metadata log, which no producer or consumer touches: without them the observer's changes
              # come faster (35 in 30 s beside a cluster test) and the window's history stays small.
              min_window=30.0, clients=False),
    # KIP-848 offset commits: the subscribers' OffsetFetch at each assignment. Their windows make the
    # subscribers rejoin soon (`rejoin_after_s`): an answer proves a slip only after an acknowledged commit
    SeededBug("committed-offset-regression", "org.apache.kafka.coordinator.group.OffsetMetadataManager.fetchOffsets",
              "OffsetFetch answers each stored committed offset as the last offset consumed (stored - 1): a member "
              "that takes a partition over starts below the group's last acknowledged commit",
              "KIP-848 offset commit and fetch: the committed offset is the last one committed, never lower",
              rejoin_after_s=REJOIN_SOON_S),
    SeededBug("resume-skip", "org.apache.kafka.coordinator.group.OffsetMetadataManager.fetchOffsets",
              "OffsetFetch answers each stored committed offset advanced by one (stored + 1): a member that takes a "
              "partition over skips the record at the group's committed offset",
              "KIP-848 offset commit and fetch: a member resumes at the group's committed offset",
              rejoin_after_s=REJOIN_SOON_S),
    # KIP-848 reconciliation and liveness: both need members leaving and joining within the window
    SeededBug("group-ownership-violation",
              "org.apache.kafka.coordinator.group.modern.consumer.CurrentAssignmentBuilder.withCurrentPartitionEpoch "
              "+ org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup.addPartitionEpochs",
              "the lookup of which member still holds a partition answers 'free' for every partition, and a partition "
              "epoch set below the one it is held at is skipped instead of refused: the coordinator gives a partition "
              "to its new member before its owner revoked it (or was even asked to)",
              "KIP-848 reconciliation: a partition is revoked from its owner before it is assigned to another member",
              # a handoff shows only when the new member hears of its assignment before the owner of its
              # revocation (each hears at its own heartbeat). Rejoining at once, only the two first joins raced
              # (1-2 fires a window, none in one CI window); with REJOIN_GAP_S the newcomer's own join takes a
              # held partition, before the owner's next heartbeat: 4-5 fires in 45 s, each one flagged (2026-11-29)
              rejoin_after_s=REJOIN_OVERLAP_S, rejoin_gap_s=REJOIN_GAP_S, min_window=45.0),
    SeededBug("slow-rebalance", "org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup.maybeUpdatePartitionEpoch",
              "the assignment tombstone of a member that left (or whose session expired) no longer releases its "
              "partitions' epochs, so they stay held by no one and every member the target assignment gives them "
              "to waits for their release",
              "KIP-848 membership rules (liveness): a partition freed by a leaving member is owned again within "
              "the session timeout plus a heartbeat interval",
              # a freeing is judged only once a member stayed past its deadline (the selftest cluster's session
              # timeout plus heartbeat interval, SELFTEST_GROUP_CONFIG: 22 s): a window that long after the first leaves
              rejoin_after_s=REJOIN_SOON_S, min_window=40.0),
    # last: its provocation stops and restarts a broker, and when that restart fails every later window's topic
    # lacks the broker. 2026-11-29, with another checkout building its own agent on the machine (cached_jar prunes
    # other source hashes from the shared cache): one matrix's restart failed on the pruned jar, and in another
    # the window after this one found its ISR a broker short for 60 s (cause not kept, likely the same)
    SeededBug("ineligible-leader", "org.apache.kafka.controller.PartitionChangeBuilder.isValidNewLeader",
              "every replica the controller could make leader at all (registered, unfenced, not shutting down) "
              "passes as a valid new leader, in the ISR or not: an election takes the first in replica order and "
              "writes it as a clean one",
              "KIP-966: a clean election picks from the ISR, or from the ELR when the ISR is empty",
              # a healthy window elects nobody: the window makes an election with a live replica outside the
              # ISR (harness.provocations.outsider_election, 35 s measured; the window waits for it). The
              # proof is in the controller's metadata log, which no client touches: no producers, no consumers
              provoke="outsider-election", min_window=20.0, clients=False),
    # KIP-932 share groups: their windows run the share workload (harness.clients.share_workload: five share
    # consumers, 5 s locks, delivery limit 3, set on the brokers: `share_broker_config`)
    SeededBug("share-double-acquire", "kafka.server.share.SharePartition.scheduleAcquisitionLockTimeout",
              "every acquisition lock's timer is scheduled with a fifth of the group's record lock duration (1 s of "
              "5 s): a record its consumer still holds becomes available and another member's fetch acquires it",
              "KIP-932: an acquired record is not available to another consumer for the duration of its lock",
              # a double acquisition is provable only for a stalled poll's fresh records (selftest.SHARE_OPTIONS):
              # 15 s windows held about a dozen such polls after the consumers' ~6 s start, and missed 1 in 2 even
              # at 300 records/s (2026-11-29); 30 s give the stalls twice the fresh records
              workload="share", min_window=2 * SHARE_WINDOW_S),
    SeededBug("share-accepted-redelivered", "kafka.server.share.SharePartition.acknowledge",
              "on one acknowledgement call in three that carries an ACCEPT, ACCEPT is decoded as RELEASE: the "
              "records go back to AVAILABLE and the call is answered without error",
              "KIP-932: an accepted record is Acknowledged, a final state: it is not delivered again",
              workload="share", min_window=SHARE_WINDOW_S),
    SeededBug("share-delivery-limit-exceeded", "org.apache.kafka.server.share.fetch.InFlightState.tryUpdateState",
              "the delivery-count limit check is off by one (count > limit for >=): a record released or timed out "
              "after its limit-th delivery is made available and delivered once more instead of archived",
              "KIP-932: a record is delivered at most group.share.delivery.count.limit times",
              workload="share", min_window=SHARE_WINDOW_S),
    SeededBug("share-record-lost", "kafka.server.share.SharePartition.acquireNewBatchRecords",
              "on one first acquisition in five of a range of new records, the range starts one past its first "
              "offset: that record never enters the in-flight cache while the share-partition end offset moves "
              "past it, so no fetch asks for it again and no consumer is given it",
              "KIP-932 in-flight records: every record up to the share-partition end offset is delivered or "
              "archived after a delivery",
              # a record is proven lost only by a later offset acquired two locks and 1 s (11 s) after it was
              # available (kip932.available_record_delivered): in a 15 s window the first losses (~13 s in) had
              # no acquisition late enough after them (measured 2026-11-29: 8 fires, 8 records missing, missed)
              workload="share", min_window=2 * SHARE_WINDOW_S),
    SeededBug("share-session-violation", "kafka.server.share.SharePartitionManager.newContext",
              "a ShareFetch that continues a share session with an epoch the session does not expect is taken as "
              "the expected one: answered NONE and the session moved on (client libraries never send a wrong "
              "epoch: the prober's share round does)",
              "KIP-932 share sessions: a request whose epoch is not the session's next gets "
              "INVALID_SHARE_SESSION_EPOCH and leaves the session unchanged",
              # the prober's share round comes second in its cycle and waits for its own group's assignment
              workload="share", min_window=SHARE_WINDOW_S),
)
BY_NAME = {b.name: b for b in BUGS}


def bug(name: str) -> SeededBug:
    if name not in BY_NAME:
        raise HarnessError(f"unknown seeded bug {name!r}; known: {', '.join(BY_NAME)}")
    return BY_NAME[name]


def agent_jar() -> Path:
    """The agent jar for the current sources: from the cache, or built by Maven once."""
    return maven_build.cached_jar(SOURCES, "seeded-bugs", "the seeded-bug agent")


def jvm_args(jar: Path, control: Path) -> tuple[str, ...]:
    """The broker JVM argument that loads the agent (ClusterOptions.broker_jvm_args)."""
    return (f"-javaagent:{jar}=control={control},report={{node_dir}}/{REPORT_NAME}",)


def switch(control: Path, name: str | None) -> None:
    """Switch one bug on (every broker polls `control` every 200 ms), or all off with None."""
    if name is not None:
        bug(name)
    tmp = control.with_suffix(".tmp")
    tmp.write_text(name or "")
    os.replace(tmp, control)


def read_reports(node_dirs) -> dict:
    """Every broker's agent report, merged: installed/missing targets and fire counts summed."""
    merged = {"installed": {}, "missing": {}, "fired": {}, "active": set(), "nodes": 0}
    for d in node_dirs:
        try:
            rep = json.loads((Path(d) / REPORT_NAME).read_text())
        except (OSError, ValueError):
            continue
        merged["nodes"] += 1
        merged["installed"].update(rep.get("installed", {}))
        merged["missing"].update(rep.get("missing", {}))
        merged["active"].add(rep.get("active", ""))
        for k, v in rep.get("fired", {}).items():
            merged["fired"][k] = merged["fired"].get(k, 0) + int(v)
    return merged


if __name__ == "__main__":  # `python -m harness.backends.seeded`: build (or find) the agent (used by install.sh)
    maven_build.print_jar("seeded-bug agent", agent_jar)
