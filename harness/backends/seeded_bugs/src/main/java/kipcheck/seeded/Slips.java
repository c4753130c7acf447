package kipcheck.seeded;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiFunction;

import net.bytebuddy.asm.Advice;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.OffsetNotAvailableException;
import org.apache.kafka.common.errors.OffsetOutOfRangeException;
import org.apache.kafka.common.message.OffsetFetchResponseData;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.replica.ClientMetadata;
import org.apache.kafka.common.replica.PartitionView;
import org.apache.kafka.common.replica.ReplicaView;
import org.apache.kafka.common.requests.FetchMetadata;
import org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup;
import org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroupMember;
import org.apache.kafka.server.share.acknowledge.ShareAcknowledgementBatch;
import org.apache.kafka.server.share.fetch.DeliveryCountOps;
import org.apache.kafka.server.share.fetch.InFlightState;
import org.apache.kafka.server.share.fetch.RecordState;
import org.apache.kafka.server.share.session.ShareSession;
import org.apache.kafka.server.share.session.ShareSessionCache;
import org.apache.kafka.server.share.session.ShareSessionKey;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.storage.internals.log.LogReadInfo;
import org.apache.kafka.storage.internals.log.UnifiedLog;

/**
 * The seeded slips, as Byte Buddy advice inlined into Kafka 4.3.1 methods. Each guard is
 * `Bugs.on(NAME)`: with no bug on, the broker runs its own code unchanged. Every bug names the
 * Kafka class and method it changes and the rule it breaks; harness/seeded.py has the same table.
 */
public final class Slips {
    private Slips() {
    }

    /**
     * org.apache.kafka.storage.internals.log.UnifiedLog.read(long, int, FetchIsolation, boolean):
     * three slips at the top of the consumer read path (isolation HIGH_WATERMARK or TXN_COMMITTED).
     * <ul>
     * <li>uncommitted-read: the bound is the log end, not the HWM (isolation LOG_END for consumers).
     *     Breaks KIP-392 "consumers only read committed data, from any replica".</li>
     * <li>wrong-fetch-error-case1 (the original slip): the out-of-range check compares the start
     *     offset with the high watermark ({@code >=}) instead of the log end ({@code >}), so a fetch at
     *     an offset in [HWM, LEO] fails with OFFSET_OUT_OF_RANGE. Breaks KIP-392 case 1 (offset in
     *     [HWM, LEO]: not out of range; the KIP says OFFSET_NOT_AVAILABLE, Kafka answers NONE and no
     *     records).</li>
     * <li>wrong-fetch-error (the widened slip): the two out-of-range branches are swapped and bounded by the high
     *     watermark: a fetch in [HWM, LEO] fails with OFFSET_OUT_OF_RANGE, one above the log end with
     *     OFFSET_NOT_AVAILABLE. Breaks KIP-392 cases 1 and 4 (in [HWM, LEO]: not out of range, the KIP
     *     says OFFSET_NOT_AVAILABLE and Kafka answers NONE; above HWM and LEO: OFFSET_OUT_OF_RANGE).</li>
     * <li>poll-skip: the read starts one past the fetch offset (on one read in four), so the
     *     record at the fetch offset is never returned to that fetch. Breaks read continuity
     *     (Kafka's fetch contract: records from the fetch offset on).</li>
     * <li>aborted-read: a read_committed read (TXN_COMMITTED) is bounded by the high watermark and
     *     collects no aborted transactions, as a read_uncommitted one. Breaks KIP-98: read_committed
     *     readers see only committed transactions (the LSO bound, the aborted-transaction list).</li>
     * </ul>
     */
    public static final class ConsumerRead {
        @Advice.OnMethodEnter
        public static void enter(@Advice.This UnifiedLog log,
                                 @Advice.Argument(value = 0, readOnly = false) long startOffset,
                                 @Advice.Argument(value = 2, readOnly = false) FetchIsolation isolation) {
            String bug = Bugs.active;
            if (bug.isEmpty() || isolation == FetchIsolation.LOG_END) {
                return;
            }
            if (bug.equals("uncommitted-read")) {
                if (log.highWatermark() < log.logEndOffset()) {
                    Bugs.fired(bug);
                }
                isolation = FetchIsolation.LOG_END;
            } else if (bug.equals("wrong-fetch-error-case1")) {
                if (startOffset >= log.highWatermark() && startOffset <= log.logEndOffset()) {
                    Bugs.fired(bug);
                    throw new OffsetOutOfRangeException("seeded: offset " + startOffset + " >= high watermark");
                }
            } else if (bug.equals("wrong-fetch-error")) {
                if (startOffset > log.logEndOffset()) {
                    Bugs.fired(bug);
                    throw new OffsetNotAvailableException("seeded: offset " + startOffset + " > log end");
                }
                if (startOffset >= log.highWatermark()) {
                    Bugs.fired(bug);
                    throw new OffsetOutOfRangeException("seeded: offset " + startOffset + " >= high watermark");
                }
            } else if (bug.equals("aborted-read")) {
                if (isolation == FetchIsolation.TXN_COMMITTED) {
                    if (log.lastStableOffset() < log.highWatermark() || Bugs.every(bug, 8)) {
                        Bugs.fired(bug);
                    }
                    isolation = FetchIsolation.HIGH_WATERMARK;
                }
            } else if (bug.equals("poll-skip")) {
                if (startOffset >= log.logStartOffset() && startOffset + 1 < log.highWatermark()
                        && Bugs.every(bug, 4)) {
                    startOffset = startOffset + 1;
                    Bugs.fired(bug);
                }
            }
        }
    }

    /**
     * kafka.cluster.Partition.readRecords (private): hwm-regression. On every other consumer read
     * the LogReadInfo carries a high watermark lagging by up to 3 (a stale snapshot). Breaks the
     * monotonic HWM a replica reports within one leader epoch (KIP-392 / KIP-1166 HighWatermark).
     */
    public static final class ReportedHighWatermark {
        @Advice.OnMethodExit(onThrowable = Throwable.class)
        public static void exit(@Advice.Argument(5) FetchIsolation isolation,
                                @Advice.Return(readOnly = false) LogReadInfo info) {
            if (info == null || isolation == FetchIsolation.LOG_END) {
                return;
            }
            if (Bugs.on("lso-violation")) {
                if (Bugs.every("lso-violation", 2)) {
                    info = new LogReadInfo(info.fetchedData(), info.divergingEpoch(), info.highWatermark(),
                            info.logStartOffset(), info.logEndOffset(), info.highWatermark() + 1);
                    Bugs.fired("lso-violation");
                }
                return;
            }
            if (!Bugs.on("hwm-regression")) {
                return;
            }
            long lag = Math.min(3, info.highWatermark() - info.logStartOffset());
            if (lag > 0 && Bugs.every("hwm-regression", 2)) {
                info = new LogReadInfo(info.fetchedData(), info.divergingEpoch(), info.highWatermark() - lag,
                        info.logStartOffset(), info.logEndOffset(), info.lastStableOffset() - lag);
                Bugs.fired("hwm-regression");
            }
        }
    }

    /**
     * org.apache.kafka.server.FetchSession.setEpoch(int) (called by FetchManager.newContext after an
     * incremental fetch): fetch-session-violation. A consumer session's epoch is advanced twice
     * (nextEpoch applied on top of the caller's nextEpoch), so the client's next correct epoch is
     * refused with INVALID_FETCH_SESSION_EPOCH. Breaks KIP-227 "the next request carries epoch + 1".
     * Follower (privileged) sessions are spared so that replication keeps going.
     */
    public static final class SessionEpoch {
        @Advice.OnMethodEnter
        public static void enter(@Advice.FieldValue("privileged") boolean privileged,
                                 @Advice.Argument(value = 0, readOnly = false) int epoch) {
            if (!privileged && Bugs.on("fetch-session-violation")) {
                epoch = FetchMetadata.nextEpoch(epoch);
                Bugs.fired("fetch-session-violation");
            }
        }
    }

    /**
     * kafka.cluster.Partition.checkEnoughReplicasReachOffset(long): duplicate. For a batch the ISR
     * already has (HWM past it) the min-ISR check answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (on one
     * call in three: the inverted comparison of a racy ISR snapshot), so a retrying non-idempotent
     * producer appends the same record again. Breaks the produce contract: an error means "not
     * written" only for errors raised before the append.
     */
    public static final class ReplicaAck {
        @Advice.OnMethodExit
        @SuppressWarnings({"unchecked", "rawtypes"})
        public static void exit(@Advice.Return(readOnly = false) scala.Tuple2 result) {
            if (Bugs.on("duplicate") && result._2() == Errors.NONE && Boolean.TRUE.equals(result._1())
                    && Bugs.every("duplicate", 3)) {
                result = new scala.Tuple2(Boolean.TRUE, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND);
                Bugs.fired("duplicate");
            }
        }
    }

    /**
     * org.apache.kafka.server.LogAppendResult.LogAppendSummary.firstOffset(): inconsistent-offset.
     * The base offset the produce response reports is one past the batch's real first offset (on
     * one append in five), so the producer is told its record sits where the next one will.
     * Breaks the produce contract: the acknowledged offset holds the acknowledged record.
     */
    public static final class ProduceResponseOffset {
        @Advice.OnMethodExit
        public static void exit(@Advice.Return(readOnly = false) long firstOffset) {
            if (firstOffset >= 0 && Bugs.on("inconsistent-offset") && Bugs.every("inconsistent-offset", 5)) {
                firstOffset = firstOffset + 1;
                Bugs.fired("inconsistent-offset");
            }
        }
    }

    /**
     * org.apache.kafka.storage.internals.log.LocalLog.append(long, MemoryRecords): lost-write. The
     * segment write (and log end update) of a client batch appended by a request handler is
     * skipped on one append in ten, while UnifiedLog.append still returns its LogAppendInfo: the
     * producer is acknowledged for a record no replica has. Breaks acks=all durability (an
     * acknowledged write is in the log of every ISR member).
     */
    public static final class LeaderSegmentWrite {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static boolean enter(@Advice.FieldValue("topicPartition") org.apache.kafka.common.TopicPartition tp) {
            if (!Bugs.on("lost-write") || tp.topic().startsWith("__")
                    || !Thread.currentThread().getName().contains("request-handler")) {
                return false;
            }
            if (Bugs.every("lost-write", 10)) {
                Bugs.fired("lost-write");
                return true;
            }
            return false;
        }
    }

    /**
     * org.apache.kafka.common.replica.RackAwareReplicaSelector.select: preferred-replica-violation.
     * The rack comparison is inverted: when a replica in the client's rack was chosen, another
     * rack's in-sync follower is named instead. Breaks KIP-392 "prefer a replica in the client's rack".
     */
    public static final class RackSelector {
        @Advice.OnMethodExit
        public static void exit(@Advice.Argument(1) ClientMetadata client, @Advice.Argument(2) PartitionView view,
                                @Advice.Return(readOnly = false) Optional<ReplicaView> chosen) {
            if (!Bugs.on("preferred-replica-violation") || chosen == null || chosen.isEmpty()
                    || client.rackId() == null || client.rackId().isEmpty()) {
                return;
            }
            if (!client.rackId().equals(chosen.get().endpoint().rack())) {
                return;
            }
            for (ReplicaView r : view.replicas()) {
                if (!r.equals(view.leader()) && !client.rackId().equals(r.endpoint().rack())) {
                    chosen = Optional.of(r);
                    Bugs.fired("preferred-replica-violation");
                    return;
                }
            }
        }
    }

    /**
     * org.apache.kafka.storage.internals.log.UnifiedLog.fetchEarliestPendingUploadOffset (private,
     * ListOffsets -6): tiered-offset-violation. Once segments are uploaded, the answer is the highest
     * offset in remote storage instead of that offset + 1 (the "+ 1" dropped). Breaks KIP-1023
     * "earliest pending upload offset = last tiered offset + 1" (so Ry = EPUO - 1 <= Ly).
     */
    public static final class PendingUploadOffset {
        @Advice.OnMethodExit
        public static void exit(@Advice.This UnifiedLog log,
                                @Advice.Return org.apache.kafka.storage.internals.log.OffsetResultHolder result) {
            if (result == null || !Bugs.on("tiered-offset-violation") || log.highestOffsetInRemoteStorage() < 0) {
                return;
            }
            Optional<org.apache.kafka.common.record.internal.FileRecords.TimestampAndOffset> t = result.timestampAndOffsetOpt();
            if (t.isPresent() && t.get().offset == log.highestOffsetInRemoteStorage() + 1) {
                result.timestampAndOffsetOpt(Optional.of(new org.apache.kafka.common.record.internal.FileRecords.TimestampAndOffset(
                        t.get().timestamp, t.get().offset - 1, t.get().leaderEpoch)));
                Bugs.fired("tiered-offset-violation");
            }
        }
    }

    /**
     * org.apache.kafka.raft.KafkaRaftClient.isHighWatermarkUpdated (private static): hwm-propagation-delay
     * and, alone, its original slip hwm-propagation-delay-hwm-check. The check that a FETCH's
     * HighWatermark field is behind the leader's always answers false, so an empty fetch from a replica
     * that only lacks the new HWM is parked (up to the fetch max wait) instead of answered at once: the
     * pre-KIP-1166 behaviour. Breaks KIP-1166 "park only when the response is empty and the remote HWM
     * is at least the leader's". Alone (the original slip), a HWM change still releases the FETCHes
     * parked before it (ThresholdPurgatory.completeAll), so only one that arrives after the change waits.
     */
    public static final class RaftHighWatermarkUpdated {
        @Advice.OnMethodExit
        public static void exit(@Advice.Return(readOnly = false) boolean updated) {
            String bug = Bugs.active;
            if (updated && (bug.equals("hwm-propagation-delay") || bug.equals("hwm-propagation-delay-hwm-check"))) {
                updated = false;
                Bugs.fired(bug);
            }
        }
    }

    /**
     * org.apache.kafka.raft.internals.ThresholdPurgatory.completeAll: hwm-propagation-delay, the other
     * half of the same regression. KafkaRaftClient.onUpdateLeaderHighWatermark calls it (its only
     * caller) to release every parked FETCH when the leader's HWM moves; the slip drops that call,
     * so a parked FETCH waits for the next append or MAX_FETCH_WAIT_MS. Breaks KIP-1166 "Handling /
     * KRaft": "complete all parked FETCH requests when the leader's HWM changes".
     */
    public static final class RaftParkedFetchRelease {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static boolean enter() {
            if (Bugs.on("hwm-propagation-delay")) {
                Bugs.fired("hwm-propagation-delay");
                return true;
            }
            return false;
        }
    }

    /**
     * org.apache.kafka.controller.PartitionChangeBuilder.isValidNewLeader(int): ineligible-leader:
     * every replica the controller could make leader at all (registered, unfenced, not shutting
     * down: the builder's {@code isAcceptableLeader}) passes as a valid new leader, in the ISR or
     * not. The election then takes the first such replica in replica order, and writes it as a
     * clean election (no RECOVERING state, the ISR left as it was). Breaks KIP-966 "Leader
     * election": a clean election picks from the ISR, or from the ELR when the ISR is empty.
     */
    public static final class ElectionCandidate {
        @Advice.OnMethodExit
        public static void exit(@Advice.Argument(0) int replica,
                                @Advice.FieldValue("isAcceptableLeader") java.util.function.IntPredicate acceptable,
                                @Advice.Return(readOnly = false) boolean valid) {
            if (!valid && Bugs.on("ineligible-leader") && replica >= 0 && acceptable.test(replica)) {
                Bugs.fired("ineligible-leader");
                valid = true;
            }
        }
    }

    /**
     * org.apache.kafka.coordinator.group.OffsetMetadataManager.fetchOffsets(OffsetFetchRequestGroup, long):
     * the group coordinator's OffsetFetch answer for named partitions (classic and consumer groups alike;
     * GroupCoordinatorShard.fetchOffsets calls it). A committed offset is the next offset to consume;
     * each slip moves a stored offset by one on its way out, the store itself untouched.
     * <ul>
     * <li>committed-offset-regression: the offset is answered as the last one consumed (stored - 1), so
     *     the group's committed offset seen by a member that takes a partition over is below its last
     *     acknowledged commit. Breaks KIP-848 "Offset commit and fetch with the member epoch": the
     *     committed offset is the last one committed (reference_model.kip848.committed_offset_kept).</li>
     * <li>resume-skip: the offset is taken for the last one consumed and advanced (stored + 1), so a
     *     member resumes one record past anything the group committed. Breaks the same section: a member
     *     resumes at the group's committed offset (kip848.resume_within_commits).</li>
     * </ul>
     * Only answers carrying a committed offset without error are changed (none stays none).
     */
    public static final class OffsetFetchAnswer {
        @Advice.OnMethodExit
        public static void exit(@Advice.Return OffsetFetchResponseData.OffsetFetchResponseGroup group) {
            String bug = Bugs.active;
            long shift = bug.equals("committed-offset-regression") ? -1 : bug.equals("resume-skip") ? 1 : 0;
            if (shift == 0 || group == null || group.errorCode() != 0) {
                return;
            }
            for (OffsetFetchResponseData.OffsetFetchResponseTopics t : group.topics()) {
                for (OffsetFetchResponseData.OffsetFetchResponsePartitions p : t.partitions()) {
                    if (p.errorCode() == 0 && p.committedOffset() + shift >= 0 && p.committedOffset() >= 0) {
                        p.setCommittedOffset(p.committedOffset() + shift);
                        Bugs.fired(bug);
                    }
                }
            }
        }
    }

    /**
     * org.apache.kafka.coordinator.group.modern.consumer.CurrentAssignmentBuilder.withCurrentPartitionEpoch(BiFunction):
     * group-ownership-violation. The builder asks this function, for each partition the target assignment gives
     * a member, at which epoch another member still holds it; computeNextAssignment withholds a held partition
     * (the member waits in UNRELEASED_PARTITIONS) until its owner has revoked it. The slip hands the builder a
     * function that answers "free" (-1) for every partition, so a partition whose owner has not yet acknowledged
     * its revocation, or not even been asked for it, is given to the new member at once (the higher epoch
     * overwrites the owner's; PartitionEpochConflict is the other half). Breaks KIP-848 "Reconciliation": a
     * partition is revoked from its owner before it is assigned to another member.
     */
    public static final class PartitionEpochLookup {
        @Advice.OnMethodEnter
        public static void enter(@Advice.Argument(value = 0, readOnly = false)
                                 BiFunction<Uuid, Integer, Integer> currentPartitionEpoch) {
            if (Bugs.on("group-ownership-violation") && currentPartitionEpoch != null) {
                currentPartitionEpoch = new EveryPartitionFree(currentPartitionEpoch);
            }
        }
    }

    /** The slipped lookup: what Kafka's answers, except "free"; a fire for each partition it frees that was held. */
    public static final class EveryPartitionFree implements BiFunction<Uuid, Integer, Integer> {
        private final BiFunction<Uuid, Integer, Integer> real;

        public EveryPartitionFree(BiFunction<Uuid, Integer, Integer> real) {
            this.real = real;
        }

        @Override
        public Integer apply(Uuid topicId, Integer partition) {
            Integer epoch = real.apply(topicId, partition);
            if (epoch == null || epoch == -1 || !Bugs.on("group-ownership-violation")) {
                return epoch;
            }
            Bugs.fired("group-ownership-violation");
            return -1;
        }
    }

    /**
     * org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup.addPartitionEpochs(Map, int) (package-private):
     * group-ownership-violation, the second half. Setting a partition's epoch below the one it is held at
     * throws IllegalStateException ("the partition is still owned"), the check that stops a double owner when
     * the previous owner's state is written after the new owner's. The slip keeps the newer epoch instead (as
     * removePartitionEpochs already only logs a mismatch): the previous owner's revocation is then written,
     * and its client told to revoke, after the new owner was given the partition.
     */
    public static final class PartitionEpochConflict {
        @Advice.OnMethodEnter
        public static void enter(@Advice.This ConsumerGroup group, @Advice.Argument(1) int epoch,
                                 @Advice.Argument(value = 0, readOnly = false) Map<Uuid, Map<Integer, Integer>> assignment) {
            if (!Bugs.on("group-ownership-violation") || assignment == null) {
                return;
            }
            Map<Uuid, Map<Integer, Integer>> kept = new java.util.HashMap<>();
            for (Map.Entry<Uuid, Map<Integer, Integer>> t : assignment.entrySet()) {
                Map<Integer, Integer> partitions = new java.util.HashMap<>();
                for (Map.Entry<Integer, Integer> p : t.getValue().entrySet()) {
                    if (group.currentPartitionEpoch(t.getKey(), p.getKey()) < epoch) {
                        partitions.put(p.getKey(), p.getValue());
                    }
                }
                kept.put(t.getKey(), partitions);
            }
            assignment = kept;
        }
    }

    /**
     * org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup.maybeUpdatePartitionEpoch(ConsumerGroupMember,
     * ConsumerGroupMember) (private): slow-rebalance. ConsumerGroup.updateMember calls it to move the epochs of
     * the partitions a member holds from its old state to its new one. A member that leaves, or whose session
     * expires, is removed by tombstones; replaying its current-assignment tombstone updates it to epoch -1
     * (LEAVE_GROUP_MEMBER_EPOCH) with no partitions, and this call releases what it held. The slip skips the call
     * for that update only, so the removed member's partitions stay held at its last epoch by no one: every
     * member the target assignment gives them to waits in UNRELEASED_PARTITIONS for a release that never comes.
     * Breaks KIP-848 "Membership rules" (Liveness): a partition a member leaves with, or loses at its session
     * timeout, is assigned again.
     */
    public static final class RemovedMemberEpochs {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class)
        public static boolean enter(@Advice.Argument(0) ConsumerGroupMember oldMember,
                                    @Advice.Argument(1) ConsumerGroupMember newMember) {
            if (!Bugs.on("slow-rebalance") || oldMember == null || newMember == null || newMember.memberEpoch() != -1) {
                return false;
            }
            if (!oldMember.assignedPartitions().isEmpty() || !oldMember.partitionsPendingRevocation().isEmpty()) {
                Bugs.fired("slow-rebalance");
                return true;
            }
            return false;
        }
    }

    /**
     * kafka.server.share.SharePartition.scheduleAcquisitionLockTimeout(String, long, long, long) (private; every
     * acquisition's lock goes through it): share-double-acquire. The acquisition lock's timer is scheduled
     * with a fifth of the group's record lock duration (1 s of 5 s), so a record a consumer still holds
     * becomes AVAILABLE and the next ShareFetch of another member acquires it. Breaks KIP-932 "Share group
     * concepts": an acquired record is not available to another consumer for the duration of its lock.
     */
    public static final class ShareLockDuration {
        @Advice.OnMethodEnter
        public static void enter(@Advice.Argument(value = 3, readOnly = false) long delayMs) {
            if (Bugs.on("share-double-acquire") && delayMs >= 5) {
                delayMs = delayMs / 5;
                Bugs.fired("share-double-acquire");
            }
        }
    }

    /**
     * kafka.server.share.SharePartition.acknowledge(String, List): share-accepted-redelivered. On one
     * acknowledgement call in three that carries an ACCEPT, its ACCEPT types are decoded as RELEASE:
     * the records go back to AVAILABLE (persisted so) and the call is answered without error, so a
     * record the consumer accepted is acquired and delivered again. Breaks KIP-932 "Record states and
     * transitions": an accepted record is Acknowledged, a final state.
     */
    public static final class ShareAcknowledge {
        @Advice.OnMethodEnter
        public static void enter(@Advice.Argument(value = 1, readOnly = false) List<ShareAcknowledgementBatch> batches) {
            if (!Bugs.on("share-accepted-redelivered") || batches == null) {
                return;
            }
            Byte accept = AcknowledgeType.ACCEPT.id;
            boolean accepts = false;
            for (ShareAcknowledgementBatch b : batches) {
                accepts |= b.acknowledgeTypes().contains(accept);
            }
            if (!accepts || !Bugs.every("share-accepted-redelivered", 3)) {
                return;
            }
            List<ShareAcknowledgementBatch> decoded = new ArrayList<>(batches.size());
            for (ShareAcknowledgementBatch b : batches) {
                List<Byte> types = new ArrayList<>(b.acknowledgeTypes().size());
                for (Byte t : b.acknowledgeTypes()) {
                    types.add(accept.equals(t) ? AcknowledgeType.RELEASE.id : t);
                }
                decoded.add(new ShareAcknowledgementBatch(b.firstOffset(), b.lastOffset(), types));
            }
            batches = decoded;
            Bugs.fired("share-accepted-redelivered");
        }
    }

    /**
     * org.apache.kafka.server.share.fetch.InFlightState.tryUpdateState: share-delivery-limit-exceeded.
     * The delivery-count limit check that archives a record instead of making it AVAILABLE again (on a
     * release or a lock timeout) is off by one ({@code deliveryCount > max} for {@code >=}): a record
     * delivered `limit` times is made available and delivered once more. Breaks KIP-932 "Record states
     * and transitions": a record is delivered at most group.share.delivery.count.limit times.
     */
    public static final class ShareDeliveryLimit {
        @Advice.OnMethodEnter
        public static void enter(@Advice.This InFlightState self, @Advice.Argument(0) RecordState newState,
                                 @Advice.Argument(1) DeliveryCountOps ops,
                                 @Advice.Argument(value = 2, readOnly = false) int maxDeliveryCount) {
            if (Bugs.on("share-delivery-limit-exceeded") && newState == RecordState.AVAILABLE
                    && ops != DeliveryCountOps.DECREASE && self.state() == RecordState.ACQUIRED
                    && self.deliveryCount() == maxDeliveryCount && !self.hasOngoingStateTransition()) {
                maxDeliveryCount = maxDeliveryCount + 1;
                Bugs.fired("share-delivery-limit-exceeded");
            }
        }
    }

    /**
     * kafka.server.share.SharePartition.acquireNewBatchRecords(String, Iterable, boolean, long, long, int, int)
     * (private; records past the share-partition end offset, fetched for the first time, are acquired through
     * it): share-record-lost. On one call in five whose range holds more than one record, the range starts one
     * past the fetched first offset: that record is never put in the in-flight cache, while the end offset
     * (and the start offset, for a first batch) moves past it, so no fetch ever asks for it again and no
     * consumer is given it. Breaks KIP-932 "In-flight records": every record up to the share-partition end
     * offset is available, acquired, acknowledged or archived, and archived only after a delivery.
     */
    public static final class ShareNewBatchStart {
        @Advice.OnMethodEnter
        public static void enter(@Advice.Argument(value = 3, readOnly = false) long firstOffset,
                                 @Advice.Argument(4) long lastOffset) {
            if (Bugs.on("share-record-lost") && lastOffset > firstOffset && Bugs.every("share-record-lost", 5)) {
                firstOffset = firstOffset + 1;
                Bugs.fired("share-record-lost");
            }
        }
    }

    /**
     * kafka.server.share.SharePartitionManager.newContext(String, List, List, String, int, Boolean, String)
     * (every ShareFetch's session step): share-session-violation. A ShareFetch that continues a share
     * session (epoch above 0) with an epoch the session does not expect is taken as if it named the expected
     * one: answered NONE, the session moved on, instead of INVALID_SHARE_SESSION_EPOCH. Client libraries
     * never send a wrong epoch, so only the prober's deliberately wrong one bites. Breaks KIP-932 "Share
     * sessions": a request whose epoch is not the session's next is refused and the session is unchanged.
     */
    public static final class ShareSessionEpochCheck {
        @Advice.OnMethodEnter
        public static void enter(@Advice.FieldValue("cache") ShareSessionCache cache,
                                 @Advice.Argument(0) String groupId, @Advice.Argument(3) String memberId,
                                 @Advice.Argument(value = 4, readOnly = false) int shareSessionEpoch) {
            if (!Bugs.on("share-session-violation") || shareSessionEpoch <= 0 || cache == null) {
                return;
            }
            ShareSession session = cache.get(new ShareSessionKey(groupId, memberId));
            if (session != null && session.epoch() != shareSessionEpoch) {
                shareSessionEpoch = session.epoch();
                Bugs.fired("share-session-violation");
            }
        }
    }
}
