"""Profiles: the KIP text, and what Kafka release lines are known to do instead.

A profile is a set of *deviations*. Each deviation names a place where a release
answers differently from the KIP text, with the Kafka class and method that show it.
Rules ask `profile.allows(DEVIATION)`; the checker runs every observation against
both `kip` and the chosen profile, and a difference accepted only by the profile is
reported as *known*.

Evidence was read in the Apache Kafka 4.3.1 source jars from Maven Central
(kafka_2.13, kafka-server, kafka-storage, kafka-raft, kafka-clients 4.3.1:sources).
`RELEASE_NOTES` records, per release line, what was checked in which sources.
`kipcheck profile read X.Y.Z` (harness/profile_read.py) reads a release for every deviation
here; tests/test_profile_read.py holds each profile against it (docs/releases.md).
"""
from __future__ import annotations

from dataclasses import dataclass

# --- KIP-392 -------------------------------------------------------------------
#: Case 1: a consumer fetch at an offset in [HWM, LEO] gets error NONE and no records,
#: not OFFSET_NOT_AVAILABLE.
FETCH_ABOVE_HWM_EMPTY = "fetch-above-hwm-empty"
#: OFFSET_OUT_OF_RANGE fetch responses carry high watermark -1 and log start -1, not
#: the replica's current values.
OUT_OF_RANGE_WITHOUT_OFFSETS = "out-of-range-without-offsets"
#: A replica's HWM never exceeds its LEO, so KIP-392 case 2 never arises: a fetch
#: above LEO is OFFSET_OUT_OF_RANGE (case 4 handling). It says what Kafka never does; a profile
#: never forbids the KIP's answer, so consumer fetches keep case 2's OFFSET_NOT_AVAILABLE.
HWM_CAPPED_AT_LEO = "hwm-capped-at-leo"
#: OffsetsForLeaderEpoch answers consumers with the epoch's end offset up to LEO,
#: not capped at the HWM, and never OFFSET_NOT_AVAILABLE for a lagging new leader.
OFFSETS_FOR_LEADER_EPOCH_UNCAPPED = "offsets-for-leader-epoch-uncapped"
#: A fetch response's high watermark is sampled before the log read, and the read is
#: bounded by the HWM at read time; when the HWM advances in between, the response
#: carries records at or above the HWM it reports (they were committed when read).
RESPONSE_HWM_SAMPLED_BEFORE_READ = "response-hwm-sampled-before-read"
#: A follower copies the HWM in the leader's fetch response as it is. After a leader
#: election the new leader's HWM can lag the one the follower already had, so within
#: the new epoch a follower's HWM (and what it serves consumers) goes back once.
FOLLOWER_HWM_FOLLOWS_LEADER = "follower-hwm-follows-leader"
# --- KIP-405 (with KIP-392 fetch from follower) ---------------------------------
#: A follower rebuilding its log from remote storage answers a consumer fetch in its tiered
#: range [log start, local log start) with OFFSET_OUT_OF_RANGE (HWM and log start -1): the
#: rebuild empties its leader-epoch cache before assigning the epochs read from the tier, and
#: a remote read that finds no epoch for the offset reports OffsetOutOfRange.
TIERED_READ_OUT_OF_RANGE = "tiered-read-out-of-range"
# --- KIP-98 --------------------------------------------------------------------
#: A fetch response's last stable offset is sampled before the log read, and a
#: read_committed read is bounded by the LSO at read time; when a transaction ends in
#: between, a read_committed answer carries records at or above the LSO it reports.
RESPONSE_LSO_SAMPLED_BEFORE_READ = "response-lso-sampled-before-read"
# --- KIP-734 -------------------------------------------------------------------
#: ListOffsets for the largest timestamp (-3) answers the offset the segment recorded for its
#: largest timestamp, which for a LogAppendTime or compressed batch is the batch's last offset,
#: not the first record stamped with it (KAFKA-16310, fixed in 3.8.0).
MAX_TIMESTAMP_SHALLOW_OFFSET = "max-timestamp-shallow-offset"
# --- KIP-455 -------------------------------------------------------------------
#: The controller completes a reassignment once the *adding* replicas are in the ISR, though a
#: target replica it keeps is out of it (KAFKA-15665, fixed in 3.8.0).
REASSIGNMENT_COMPLETES_ON_ADDING = "reassignment-completes-on-adding"
# --- KIP-227 -------------------------------------------------------------------
#: An incremental request that forgets the session's last partition closes the
#: session; the response carries session id 0.
EMPTY_SESSION_CLOSED = "empty-session-closed"
#: Incremental responses also carry partitions with an error, a preferred read
#: replica or a diverging epoch, not only HWM / log start changes and new data.
INCREMENTAL_EXTRA_PARTITIONS = "incremental-extra-partitions"
#: The broker picks one definite eviction victim: the least recently used session if
#: idle too long, else the smallest (privileged, size, id) eligible one, where a
#: session's eligibility ("older than the eviction time") was fixed when it was last
#: used, not re-evaluated at eviction time. Narrows the KIP.
EVICT_SMALLEST = "evict-smallest"
#: The session cache is split into 8 shards of slots/8 entries. A new session goes to
#: the next shard round-robin (unknown to an observer) and may only evict within it;
#: an existing session's shard is its id / (2^31-1 // 8). So a new session can be
#: refused while other shards have free slots.
SHARDED_SESSION_CACHE = "sharded-session-cache"
# --- KIP-1023 ------------------------------------------------------------------
#: ListOffsets -6 (earliest pending upload) is resolved by the leader: with nothing
#: uploaded and local log start == log start it answers the log start offset (not -1),
#: and otherwise max(last tiered + 1, log start), never below the log start. The
#: follower's "pending < log start" fallback of the KIP therefore never triggers.
PENDING_UPLOAD_RESOLVED_BY_LEADER = "pending-upload-resolved-by-leader"

#: The empty-follower bootstrap does not exist: the replica fetcher always takes the
#: old path (leader's log start on OFFSET_OUT_OF_RANGE, local log start on
#: OFFSET_MOVED_TO_TIERED_STORAGE), whatever follower.fetch.last.tiered.offset.enable says.
FOLLOWER_BOOTSTRAP_ABSENT = "follower-bootstrap-absent"

#: Number of fetch session cache shards (`SHARDED_SESSION_CACHE`).
SESSION_CACHE_SHARDS = 8
# --- KIP-1166 ------------------------------------------------------------------
#: No HighWatermark in KRaft FETCH: the leader parks every empty FETCH until the next
#: append or its 500 ms max wait, even when the fetcher's HWM lags, so a committed
#: metadata change reaches a broker up to one parking window late. Bounded: the upper
#: quartile of the post-commit lags stays within one window plus the KIP allowance
#: (`kip1166.parked_once_bound_ns`).
KRAFT_FETCH_PARKS_WITHOUT_HWM = "kraft-fetch-parks-without-hwm"

EVIDENCE: dict[str, str] = {
    RESPONSE_LSO_SAMPLED_BEFORE_READ: "Kafka 4.3.1 (same in 4.2.1 and 4.1.2): kafka.cluster.Partition.readRecords "
    "takes initialLastStableOffset = localLog.lastStableOffset before calling localLog.read and returns it in "
    "LogReadInfo; UnifiedLog.read bounds a TXN_COMMITTED read by fetchLastStableOffsetMetadata() at read time. "
    "Seen live (txn workload, seed 1, 2026-11-25): a read_committed fetch answered offset 407 with LSO 407. "
    "It samples initialHighWatermark before initialLastStableOffset, so the HWM may advance in between and an "
    "answer's LSO exceed its own HWM: seen live (--faults kill --seed 25, 2026-11-25, no transactions), broker 3 "
    "answered LSO 8743 with HWM 8686.",
    FETCH_ABOVE_HWM_EMPTY: "Kafka 4.3.1: org.apache.kafka.storage.internals.log.UnifiedLog.read bounds a "
    "FetchIsolation.HIGH_WATERMARK read by fetchHighWatermarkMetadata(); LocalLog.read throws "
    "OffsetOutOfRangeException only when startOffset > the log end offset and returns emptyFetchDataInfo when "
    "startOffset >= maxOffsetMetadata; kafka.cluster.Partition.readRecords adds no error.",
    OUT_OF_RANGE_WITHOUT_OFFSETS: "Kafka 4.3.1: kafka.server.ReplicaManager.readFromLog catches "
    "OffsetOutOfRangeException into handleOffsetOutOfRangeError, which (outside the tiered range "
    "[logStartOffset, localLogStartOffset) of a remote-enabled log) answers new LogReadResult(error): "
    "org.apache.kafka.storage.internals.log.LogReadResult(Errors) sets highWatermark and leaderLogStartOffset "
    "to UnifiedLog.UNKNOWN_OFFSET (-1).",
    HWM_CAPPED_AT_LEO: "Kafka 4.3.1: org.apache.kafka.storage.internals.log.UnifiedLog.updateHighWatermark "
    "(called by maybeUpdateHighWatermark, the follower path) bounds the new HWM by logStartOffset below and "
    "the log end offset above.",
    OFFSETS_FOR_LEADER_EPOCH_UNCAPPED: "Kafka 4.3.1: KafkaApis.handleOffsetForLeaderEpochRequest -> "
    "ReplicaManager.lastOffsetForLeaderEpoch (fetchOnlyFromLeader = true) -> Partition.lastOffsetForLeaderEpoch "
    "-> UnifiedLog.endOffsetForEpoch(leaderEpochCache.endOffsetFor(epoch, logEndOffset())); no replica id, "
    "HWM or epoch-start check is consulted (that check exists only in Partition.fetchOffsetForTimestamp).",
    RESPONSE_HWM_SAMPLED_BEFORE_READ: "Kafka 4.3.1 (same in 4.2.1 and 4.0.1): kafka.cluster.Partition.readRecords "
    "takes initialHighWatermark = localLog.highWatermark before calling localLog.read, and returns it in "
    "LogReadInfo; org.apache.kafka.storage.internals.log.UnifiedLog.read bounds a HIGH_WATERMARK read by "
    "fetchHighWatermarkMetadata() at read time. Seen live: a fetch at 61 answered offsets 61..81 with HWM 81.",
    FOLLOWER_HWM_FOLLOWS_LEADER: "Kafka 4.3.1: kafka.server.ReplicaFetcherThread.processPartitionData calls "
    "log.maybeUpdateHighWatermark(partitionData.highWatermark); UnifiedLog.updateHighWatermarkMetadata accepts a "
    "lower value and only logs WARN 'Non-monotonic update of high watermark'. Seen live after a leader change "
    "(3 -> 1, epoch 1): follower 2 went from HWM 1710 to 1708 and served reads capped at 1708.",
    TIERED_READ_OUT_OF_RANGE: "Kafka 4.3.1: kafka.server.TierStateMachine.buildRemoteLogAuxState calls "
    "Partition.truncateFullyAndStartAt (UnifiedLog.truncateFullyAndStartAt: leaderEpochCache.clearAndFlush, "
    "localLogStartOffset = the leader's local log start, logStartOffset = the leader's log start) and only later "
    "leaderEpochCache.assign(readLeaderEpochCheckpoint(...)). Meanwhile ReplicaManager.handleOffsetOutOfRangeError "
    "sends a consumer fetch at an offset in [logStartOffset, localLogStartOffset) to RemoteLogManager.read, which "
    "throws OffsetOutOfRangeException when leaderEpochCache.epochForOffset(offset) is empty ('leader epoch NOT "
    "AVAILABLE ... does not exist in remote tier'); RemoteLogReader.call catches it without logging, and "
    "DelayedRemoteFetch.onComplete answers new LogReadResult(Errors.forException(e)), i.e. HWM and log start -1. "
    "Seen live (--tiered --faults kill --seed 2, 2026-11-27): restarted follower 1 answered kipcheck/2 @104 and "
    "kipcheck/0 @204 OFFSET_OUT_OF_RANGE -1/-1 between 'Deleting segments as part of log truncation' and 'Updated "
    "the epoch cache from remote tier', then served both offsets from the tier (docs/findings.md section 1).",
    MAX_TIMESTAMP_SHALLOW_OFFSET: "Kafka 3.3.2 to 3.7.2: kafka.log.UnifiedLog.fetchOffsetByTimestamp answers "
    "MAX_TIMESTAMP with the segment's maxTimestampAndOffsetSoFar (3.7: readMaxTimestampAndOffsetSoFar) as it is; "
    "LogSegment.append records the batch's shallowOffsetOfMaxTimestamp, its last offset for a LogAppendTime v2 "
    "batch (LogValidator) and for a compressed one. 3.8.1 and later look the batch up and answer "
    "batch.offsetOfMaxTimestamp(), the first record stamped with its maximum (KAFKA-16310). Seen live: 3.3.1, "
    "3.3.2 and 3.7.2 runs (2026-11-28) answered the last of up to 19 records read in one poll with one "
    "LogAppendTime stamp; 3.8.1, 4.0.2, 4.1.2 and 4.3.1 runs never did.",
    REASSIGNMENT_COMPLETES_ON_ADDING: "Kafka 3.3.2 to 3.7.2: org.apache.kafka.controller."
    "PartitionReassignmentReplicas.maybeCompleteReassignment completes when every replica of `adding` is in the "
    "target ISR (less the removing replicas); 3.8.1 and later ask newTargetIsr.containsAll(newTargetReplicas), "
    "every target replica (KAFKA-15665). PartitionChangeBuilder calls it on every change, an ISR expansion "
    "included, so a move that adds one broker while a kept replica is down completes without it.",
    EMPTY_SESSION_CLOSED: "Kafka 4.3.1: org.apache.kafka.server.FetchManager.newContext: after session.update, "
    "if session.isEmpty() the session is removed from its shard and a SessionlessFetchContext "
    "(response session id INVALID_SESSION_ID = 0) answers.",
    INCREMENTAL_EXTRA_PARTITIONS: "Kafka 4.3.1: org.apache.kafka.server.FetchSession.CachedPartition."
    "maybeUpdateResponseData: mustRespond also for FetchResponse.isPreferredReplica, a non-NONE error code "
    "(which also resets the cached HWM to -1) or FetchResponse.isDivergingEpoch.",
    EVICT_SMALLEST: "Kafka 4.3.1: org.apache.kafka.server.FetchSessionCacheShard.tryEvict evicts "
    "lastUsed.firstEntry() if idle > evictionMs, else the first entry of evictableByPrivileged (new session "
    "privileged) or evictableByAll, ordered by FetchSession.EvictableKey(privileged, size, id), unless the new "
    "key (privileged, size, 0) compares smaller. FetchSessionCacheShard.touch puts a session into "
    "evictableByAll only if now - creationMs > evictionMs at that touch, into evictableByPrivileged also if "
    "it is not privileged; maybeCreateSession touches a new session at creation.",
    SHARDED_SESSION_CACHE: "Kafka 4.3.1: kafka.server.BrokerServer builds KafkaBroker.NumFetchSessionCacheShards "
    "(= 8) FetchSessionCacheShard(maxIncrementalFetchSessionCacheSlots / 8, ..., sessionIdRange = "
    "Int.MaxValue / 8, shardNum); FetchContext.FullFetchContext.updateAndGenerateResponseData creates the "
    "session in FetchSessionCache.getNextCacheShard() (a global round-robin counter); getCacheShard(id) = "
    "id / sessionIdRange; tryEvict looks only at its own shard.",
    PENDING_UPLOAD_RESOLVED_BY_LEADER: "Kafka 4.3.1: org.apache.kafka.storage.internals.log.UnifiedLog."
    "fetchEarliestPendingUploadOffset: remote storage off -> -1; highestOffsetInRemoteStorage() == -1 -> "
    "the EARLIEST answer (logStartOffset) when localLogStartOffset() == logStartOffset(), else -1; otherwise "
    "max(highest remote offset + 1, logStartOffset()). kafka.server.AbstractFetcherThread."
    "fetchEarliestPendingUploadOffset keeps the KIP's -1 fallbacks (local start if it equals log start, else "
    "OffsetNotAvailableException = retry) and TierStateMachine.start builds auxiliary state below it.",
    FOLLOWER_BOOTSTRAP_ABSENT: "Kafka 4.2.1: kafka.server.AbstractFetcherThread has no "
    "shouldFetchFromLastTieredOffset / fetchEarliestPendingUploadOffset (both present in 4.3.1); "
    "handleOffsetsMovedToTieredStorage always restarts from leader.fetchEarliestLocalOffset.",
    KRAFT_FETCH_PARKS_WITHOUT_HWM: "Kafka 4.0.1: org.apache.kafka.raft.KafkaRaftClient.handleFetchRequest answers "
    "at once only for an error, records, maxWaitMs == 0, a diverged or snapshotted partition (no "
    "isHighWatermarkUpdated), else fetchPurgatory.await(fetchOffset, maxWaitMs) with maxWaitMs = "
    "MAX_FETCH_WAIT_MS = 500; onUpdateLeaderHighWatermark does not complete the fetch purgatory (4.1.2 and 4.3.1 "
    "call fetchPurgatory.completeAll there); only updateLeaderEndOffsetAndTimestamp's "
    "fetchPurgatory.maybeComplete(endOffset) on an append does, and QuorumController.registerWriteNoOpRecord "
    "appends a NoOpRecord every metadata.max.idle.interval.ms (KRaftConfigs default 500).",
}

#: How far each deviation reaches: beyond its bound an answer is an anomaly under every
#: profile (docs/model.md, "bound"). The rules gather the observations each bound names.
BOUNDS: dict[str, str] = {
    RESPONSE_LSO_SAMPLED_BEFORE_READ: "Only records stable when read: every record at or above the reported LSO "
    "belongs to a transaction whose commit or abort was called before the fetch completed "
    "(transactions.lso_sampled_before_read); anything else is an lso-violation under every profile. An LSO above "
    "its own answer's HWM: at most every later HWM the same broker reports for the partition in the same leader "
    "epoch and life (the HWM when the LSO was sampled is at most those); a lower one makes it an lso-violation.",
    FETCH_ABOVE_HWM_EMPTY: "Only up to the LEO (LocalLog.read throws OffsetOutOfRangeException above it): the fetch "
    "offset is at most an upper bound of the LEO while the broker answered: the highest offset proven by the answer's "
    "completion + 1 + the appends of the sends invoked by then, less the idempotent sends acknowledged before the "
    "request (kip392.LogBounds.leo_max, checks.rules.log_bounds.SendBound).",
    OUT_OF_RANGE_WITHOUT_OFFSETS: "Only outside [log start, LEO]: not below a LEO the broker proved earlier in the "
    "same epoch and life (an HWM it reported, a record it returned) while at or above every log start it reported "
    "later in that life, nor — on a follower in the ISR of that epoch — at or below the HWM the epoch's leader "
    "reported before (kip392.LogBounds.leo_min / log_start_max, kip392.leo_reached_leader_hwm).",
    HWM_CAPPED_AT_LEO: "Allows nothing new: the KIP's case-2 OFFSET_NOT_AVAILABLE stays allowed (a profile never "
    "forbids the KIP's answer); it shapes only the model's follower_learns_hwm and kip227.may_omit.",
    OFFSETS_FOR_LEADER_EPOCH_UNCAPPED: "Only up to the LEO at answer time (UnifiedLog.endOffsetForEpoch answers the "
    "LEO for the latest epoch): never above the partition's LEO upper bound (kip392.epoch_end_offset_possible).",
    RESPONSE_HWM_SAMPLED_BEFORE_READ: "Only records committed when read: the read is bounded by the HWM at read time "
    "(UnifiedLog.read, fetchHighWatermarkMetadata), which is <= every HWM that broker sampled later for the partition in "
    "the same leader epoch and life; so no answer of it invoked after the fetch completed may be at or below the record "
    "(kip392.records_committed), and no other record may be committed at its offset, as another answer below its HWM or "
    "an acks=all send shows (kip392.read_value_committed).",
    FOLLOWER_HWM_FOLLOWS_LEADER: "Only on a known follower, after a leader-epoch change in the same life, once per "
    "epoch (after the first drop the follower follows the new leader, whose HWM does not go back), and only from the "
    "HWM it carried into the epoch (not after it rose in it), and no deeper than the new leader's HWM could have been "
    "when the follower copied it: the HWM it held from the epoch before, in its life (kip392.hwm_may_go_back's "
    "leader_floor). Not its answers in the new epoch: it reads a follower's fetch (Partition.fetchRecords) before "
    "that fetch moves its HWM (updateFollowerFetchState), so the copy may be older than any of them by the "
    "response's time in flight (seed-25 run, docs/findings.md section 3).",
    TIERED_READ_OUT_OF_RANGE: "Only on a replica not proven to be the partition's leader in that epoch (a leader "
    "never runs TierStateMachine). Only at an offset below L, the first EARLIEST_LOCAL (-4) answer the epoch's leader "
    "gave after the fetch completed, in the same leader epoch and the leader's life: the follower restarted its local "
    "log at the leader's local log start, which within a leader's life only grows, so its local log start is <= L. "
    "Only while every HWM that replica reported for the partition earlier in its life is <= L: the rebuild runs only "
    "while the follower's log is behind the leader's local log start. Beyond this, or with no such -4 answer (tiered "
    "storage not proven), it is a wrong-fetch-error under every profile (kip392.tiered_read_out_of_range).",
    MAX_TIMESTAMP_SHALLOW_OFFSET: "Only within the run of records stamped alike that the answer's record ends: at or "
    "above the first record proven to carry its stamp. The record the answer names is still stamped with the "
    "timestamp the answer gives (within 2 ms, BY_TIME_TOLERANCE_MS); one stamped otherwise is a "
    "time-offset-violation under every profile (kip734.max_timestamp_answer_allowed).",
    EMPTY_SESSION_CLOSED: "Only when the request left the session without partitions.",
    INCREMENTAL_EXTRA_PARTITIONS: "Only partitions of the session.",
    EVICT_SMALLEST: "The one victim kip227 computes.",
    SHARDED_SESSION_CACHE: "Within one shard of slots / 8.",
    PENDING_UPLOAD_RESOLVED_BY_LEADER: "Never below the log start; above the last tiered offset + 1 only when it is the "
    "log start (max(last tiered + 1, log start)), so never above a log start or local log start the leader answers "
    "later in the same epoch and life (kip1023.pending_upload_resolved).",
    FOLLOWER_BOOTSTRAP_ABSENT: "The old fetcher path only.",
    KRAFT_FETCH_PARKS_WITHOUT_HWM: "One parking window W = min(MAX_FETCH_WAIT_MS 500, metadata.max.idle.interval.ms) "
    "at most: the upper quartile of the post-commit lags over >= 20 changes <= W + W/2 (kip1166.parked_once_bound_ns); "
    "beyond is hwm-propagation-delay under this profile too.",
}

#: What was verified, per release line, and where.
RELEASE_NOTES: dict[str, str] = {
    "kafka-4.4": "Read by `kipcheck profile read 4.4.0` (harness/profile_read.py) in the 4.4.0 binary jars "
    "(kafka_2.13, kafka-server, kafka-storage, kafka-raft, kafka-clients, kafka-server-common): Maven Central "
    "publishes no 4.4.0 source jars, so each deviation's methods were compared instruction for instruction "
    "(javap -c) with 4.3.1's, whose sources the reader matched. Identical: UnifiedLog.read / updateHighWatermark / "
    "updateHighWatermarkMetadata / endOffsetForEpoch / fetchEarliestPendingUploadOffset, LocalLog.read, "
    "Partition.readRecords, ReplicaManager.handleOffsetOutOfRangeError / lastOffsetForLeaderEpoch, LogReadResult(Errors), "
    "FetchManager.newContext, FetchSession.CachedPartition.maybeUpdateResponseData, FetchSessionCacheShard.tryEvict / "
    "touch. Changed but read by hand to the same code: ReplicaFetcherThread.processPartitionData (only ReplicaQuota "
    "moved to org.apache.kafka.server.quota; still log.maybeUpdateHighWatermark(partitionData.highWatermark)), "
    "BrokerServer.startup (Int.MaxValue / NumFetchSessionCacheShards, maxIncrementalFetchSessionCacheSlots / "
    "NumFetchSessionCacheShards per FetchSessionCacheShard; KafkaBroker NumFetchSessionCacheShards = 8), "
    "KafkaRaftClient.handleFetchRequest (returns CompletionStage; isHighWatermarkUpdated still answers at once). "
    "As in 4.3.1: AbstractFetcherThread has shouldFetchFromLastTieredOffset / fetchEarliestPendingUploadOffset "
    "(the follower bootstrap exists), follower.fetch.last.tiered.offset.enable exists, Fetch v18, ListOffsets v11.",
    "kafka-4.3": "All deviations read in the 4.3.1 source jars. KIP-1023 (follower.fetch.last.tiered.offset.enable, "
    "ReplicationConfigs, default false; ReplicaFetcherThread.shouldFetchFromLastTieredOffset: enabled, remote "
    "storage on, not compacted, follower LEO == 0, leader LEO != 0; ListOffsets v11 for -6) and KIP-1166 "
    "(FetchRequest v18 tagged HighWatermark, default max int64; KafkaRaftClient.handleFetchRequest answers at "
    "once when isHighWatermarkUpdated, i.e. request HWM < leader HWM (-1 if unknown); "
    "onUpdateLeaderHighWatermark completes all parked fetches) follow the KIP text apart from "
    "pending-upload-resolved-by-leader. tiered-read-out-of-range (KIP-405 with KIP-392) was read in the 4.3.1 "
    "binary jars (javap -c: TierStateMachine, UnifiedLog.truncateFullyAndStartAt, RemoteLogManager.read, "
    "RemoteLogReader.call, DelayedRemoteFetch.onComplete) after a live run showed it; `kipcheck profile read` "
    "finds the same code in 4.0.2, 4.1.2, 4.2.2 and 4.4.0 (their profiles carry it); the 3.x lines' probe finds no "
    "Java TierStateMachine there (3.6-3.9 have ReplicaFetcherTierStateMachine: not read for it).",
    "kafka-4.2": "Read in the 4.2.1 source jars (kafka_2.13, kafka-server, kafka-storage, kafka-raft): the KIP-392 "
    "and KIP-227 deviations are the same code (FetchSession still in Scala, kafka.server.FetchSession.scala, "
    "same tryEvict/touch/sharding, NumFetchSessionCacheShards = 8); UnifiedLog.fetchEarliestPendingUploadOffset "
    "is identical (ListOffsets -6 exists, v11); the follower bootstrap is absent; KafkaRaftClient has the "
    "KIP-1166 isHighWatermarkUpdated check.",
    "kafka-4.1": "Read in the 4.1.2 source jars (kafka_2.13, kafka-server, kafka-storage, kafka-raft; the newest "
    "4.1 patch on Maven Central): the KIP-392/KIP-227 deviations are the same code as 4.0.1 and 4.3.1 "
    "(kafka.cluster.Partition.readRecords samples initialHighWatermark before localLog.read; LocalLog.read throws "
    "OffsetOutOfRangeException only for startOffset > endOffset and answers empty at/above maxOffsetMetadata; "
    "ReplicaManager.handleOffsetOutOfRangeError -> createLogReadResult(e) with UnifiedLog.UNKNOWN_OFFSET; "
    "UnifiedLog.updateHighWatermark capped at the log end offset, updateHighWatermarkMetadata accepts a lower "
    "value with WARN 'Non-monotonic update of high watermark' and ReplicaFetcherThread.processPartitionData calls "
    "log.maybeUpdateHighWatermark(partitionData.highWatermark); ReplicaManager.lastOffsetForLeaderEpoch "
    "fetchOnlyFromLeader = true -> UnifiedLog.endOffsetForEpoch(leaderEpochCache.endOffsetFor(epoch, "
    "logEndOffset())); kafka.server.FetchSession.scala: session.isEmpty closes, maybeUpdateResponseData also for "
    "isPreferredReplica / error / isDivergingEpoch, tryEvict/touch as 4.0, BrokerServer NumFetchSessionCacheShards "
    "= 8 with getNextCacheShard). Like 4.0.1: no ListOffsets -6 (no EARLIEST_PENDING_UPLOAD) and no follower "
    "bootstrap (AbstractFetcherThread lacks shouldFetchFromLastTieredOffset). Unlike 4.0.1: KafkaRaftClient has "
    "the KIP-1166 isHighWatermarkUpdated check (request HWM < leader HWM answers at once), as in 4.2.1 and 4.3.1.",
    "kafka-4.0": "Read in the 4.0.1 source jars: the KIP-392/KIP-227 deviations are the same code (LocalLog.read, "
    "ReplicaManager.createLogReadResult(e) with -1 offsets, kafka.log.UnifiedLog.updateHighWatermark capped at LEO, "
    "lastOffsetForLeaderEpoch fetchOnlyFromLeader, FetchSession.scala isEmpty/touch/tryEvict, 8 shards). Not in "
    "4.0.1: ListOffsets -6 (no EARLIEST_PENDING_UPLOAD_TIMESTAMP) and KIP-1166 (FetchRequest validVersions 4-17, no "
    "isHighWatermarkUpdated: an empty KRaft FETCH always parks, the deviation kraft-fetch-parks-without-hwm); the "
    "missing -6 is not modelled as a deviation yet.",
}

@dataclass(frozen=True)
class Profile:
    name: str
    deviations: frozenset[str]
    description: str

    def allows(self, deviation: str) -> bool:
        return deviation in self.deviations

    def describe(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "deviations": {d: EVIDENCE[d] for d in sorted(self.deviations)},
            "bounds": {d: BOUNDS[d] for d in sorted(self.deviations)},
        }


KIP = Profile("kip", frozenset(), "The KIP texts (KIP-392, KIP-227, KIP-1023, KIP-1166) as written.")

_KIP392_227 = frozenset({
    FETCH_ABOVE_HWM_EMPTY, OUT_OF_RANGE_WITHOUT_OFFSETS, HWM_CAPPED_AT_LEO, OFFSETS_FOR_LEADER_EPOCH_UNCAPPED,
    RESPONSE_HWM_SAMPLED_BEFORE_READ, FOLLOWER_HWM_FOLLOWS_LEADER,
    EMPTY_SESSION_CLOSED, INCREMENTAL_EXTRA_PARTITIONS, EVICT_SMALLEST, SHARDED_SESSION_CACHE,
})
_BY_MINOR = {  # the LSO deviation read in 4.1.2, 4.2.1 and 4.3.1 by hand, in 4.0.2 and 3.x by `kipcheck profile read`
    0: _KIP392_227 | {FOLLOWER_BOOTSTRAP_ABSENT, KRAFT_FETCH_PARKS_WITHOUT_HWM, RESPONSE_LSO_SAMPLED_BEFORE_READ, TIERED_READ_OUT_OF_RANGE},
    1: _KIP392_227 | {FOLLOWER_BOOTSTRAP_ABSENT, RESPONSE_LSO_SAMPLED_BEFORE_READ, TIERED_READ_OUT_OF_RANGE},
    2: _KIP392_227 | {FOLLOWER_BOOTSTRAP_ABSENT, PENDING_UPLOAD_RESOLVED_BY_LEADER, RESPONSE_LSO_SAMPLED_BEFORE_READ, TIERED_READ_OUT_OF_RANGE},
    3: _KIP392_227 | {PENDING_UPLOAD_RESOLVED_BY_LEADER, RESPONSE_LSO_SAMPLED_BEFORE_READ, TIERED_READ_OUT_OF_RANGE},
    4: _KIP392_227 | {PENDING_UPLOAD_RESOLVED_BY_LEADER, RESPONSE_LSO_SAMPLED_BEFORE_READ, TIERED_READ_OUT_OF_RANGE},
}
PROFILES: dict[str, Profile] = {"kip": KIP}
for _minor, _devs in _BY_MINOR.items():
    _name = f"kafka-4.{_minor}"
    PROFILES[_name] = Profile(_name, frozenset(_devs), RELEASE_NOTES[_name])


def get(name: str | Profile) -> Profile:
    """The profile called `name` (a Profile passes through)."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; known: {sorted(PROFILES)}") from None


def _line(version: str) -> tuple[int, int] | None:
    """"4.4.0" -> (4, 4); None when it is not X.Y[.Z]."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def newest_read_line() -> tuple[int, int]:
    """The newest release line with a profile of its own (read in its sources)."""
    return max(line for name in PROFILES if name.startswith("kafka-") and (line := _line(name[len("kafka-"):])))


def inherited(version: str | None) -> dict | None:
    """For a release newer than every read profile: {"release", "line", "profile", "note"}, the
    newest read profile it is judged under and the line that says so; None otherwise.

    A new release mostly keeps the code of the one before it, so judging it under the KIP text
    would flag every deviation it still has (seen: 4.4.0 under `kip`, 254 wrong-fetch-error on
    a run 4.3's profile finds valid). Its profile's deviations are inherited, not confirmed:
    the verdict, CLI, report and conformance table say so until `kipcheck profile read` has
    read the release and a profile of its own is added."""
    line = _line(version or "")
    newest = newest_read_line()
    if line is None or line <= newest:
        return None
    profile = f"kafka-{newest[0]}.{newest[1]}"
    unread = f"{line[0]}.{line[1]}"
    return {"release": version, "line": unread, "profile": profile, "read": False,
            "short": f"inherited from {profile}, not confirmed for {unread}",
            "note": f"judged as {profile}: {unread} not read (Kafka {version} is newer than every read "
                    f"profile; the deviations {profile} accepts are inherited, not confirmed for {unread}; "
                    f"`kipcheck profile read {version}` reads them)"}


def profile_for(version: str | None) -> tuple[str, str | None]:
    """(profile name, fallback note) for a Kafka version string such as "4.3.1".

    A release line with a profile gets it and no note. A release newer than every read line is
    judged under the newest read profile (`inherited`). Any other version (an older unread
    line, an unknown or unparseable one) is judged by the KIP texts, `kip`, with a note:
    another line's deviations were read in another line's code and are not verified for it."""
    if not version:
        return "kip", "the Kafka version is unknown: checked against the KIP texts alone (kip)"
    line = _line(version)
    if line is None:
        return "kip", f"{version!r} is not a Kafka version X.Y[.Z]: checked against the KIP texts alone (kip)"
    name = f"kafka-{line[0]}.{line[1]}"
    if name in PROFILES:
        return name, None
    newer = inherited(version)
    if newer:
        return newer["profile"], newer["note"]
    return "kip", (f"Kafka {version} has no profile of its own ({name} was not read): checked against the "
                   f"KIP texts alone (kip), so its release's known deviations show as anomalies")


def for_version(version: str | None) -> str:
    """The profile name for a Kafka version string (see `profile_for`)."""
    return profile_for(version)[0]


# --- Kafka 3.x release lines (added by helper "versions"; kept apart from the 4.x tables) ---
# Only the deviations read in that release's own source jar (kafka_2.13-X:sources); every
# other 4.x deviation is unread for 3.x and stays an anomaly there until someone reads it.
# 3.3 and 3.9 were read by hand; 3.4 ... 3.8 by a script now grown into `kipcheck profile read`
# (harness/profile_read.py), which looks for the same code in the same class and method of each
# release's source jars. That reader also finds the KIP-227 deviations (and from 3.8 the sharded
# session cache), taken into these profiles on 2026-11-28 (`_KIP227_3X`), and follower-bootstrap-absent
# and kraft-fetch-parks-without-hwm in 3.x code, which are not in them
# (tests/test_profile_read.py lists those two as UNPROFILED_3X).
_READ_IN_3X = frozenset({OUT_OF_RANGE_WITHOUT_OFFSETS, RESPONSE_HWM_SAMPLED_BEFORE_READ, FETCH_ABOVE_HWM_EMPTY,
                         HWM_CAPPED_AT_LEO, OFFSETS_FOR_LEADER_EPOCH_UNCAPPED, FOLLOWER_HWM_FOLLOWS_LEADER,
                         RESPONSE_LSO_SAMPLED_BEFORE_READ})
_3X_COMMON = (
    "response-hwm-sampled-before-read: kafka.cluster.Partition.readRecords takes initialHighWatermark = "
    "localLog.highWatermark before localLog.read, and kafka.log.UnifiedLog.read bounds a high-watermark read by "
    "fetchHighWatermarkMetadata at read time. fetch-above-hwm-empty: kafka.log.LocalLog.read throws "
    "OffsetOutOfRangeException only when startOffset > endOffset (the log end) and answers emptyFetchDataInfo "
    "when startOffset >= maxOffsetMetadata (a consumer read's HWM bound). hwm-capped-at-leo: "
    "kafka.log.UnifiedLog.updateHighWatermarkMetadata bounds the new HWM by logStartOffset below and the log end "
    "offset above. offsets-for-leader-epoch-uncapped: kafka.server.ReplicaManager.lastOffsetForLeaderEpoch calls "
    "Partition.lastOffsetForLeaderEpoch(fetchOnlyFromLeader = true) -> kafka.log.UnifiedLog.endOffsetForEpoch -> "
    "leader epoch cache endOffsetFor(leaderEpoch, logEndOffset); no replica id or HWM is consulted. "
    "follower-hwm-follows-leader: kafka.server.ReplicaFetcherThread.processPartitionData calls "
    "log.maybeUpdateHighWatermark(partitionData.highWatermark), and kafka.log.UnifiedLog.updateHighWatermarkMetadata "
    "takes a lower value, only logging WARN 'Non-monotonic update of high watermark' (read in every 3.x line on "
    "2026-11-24, after a 3.9.2 -> 4.3.1 upgrade run showed it). response-lso-sampled-before-read: the same "
    "Partition.readRecords takes initialHighWatermark, then initialLastStableOffset, before localLog.read "
    "(read in every 3.x line by `kipcheck profile read` on 2026-11-27, after a 3.3.2 run with no transactions "
    "answered a read_committed probe with a record at or above the LSO it reported).")
_BY_3X_LINE = {
    "kafka-3.3": "Read in the 3.3.2 source jar (kafka_2.13). out-of-range-without-offsets: "
    "kafka.server.ReplicaManager.readFromLocalLog's inner read() catches OffsetOutOfRangeException (with "
    "UnknownTopicOrPartitionException etc.) into LogReadResult(highWatermark = UnifiedLog.UnknownOffset, "
    "leaderLogStartOffset = UnifiedLog.UnknownOffset). " + _3X_COMMON + " No other deviation read for 3.3. "
    "Not in 3.3: tiered storage, ListOffsets -4/-5/-6 (v7 is the newest), KIP-1023, KIP-1166.",
    "kafka-3.9": "Read in the 3.9.2 source jar (kafka_2.13). out-of-range-without-offsets: "
    "kafka.server.ReplicaManager.readFromLocalLog's read() passes OffsetOutOfRangeException to "
    "handleOffsetOutOfRangeError, which outside [logStartOffset, localLogStartOffset) of a remote-enabled log "
    "answers createLogReadResult(e) (highWatermark, leaderLogStartOffset = UnifiedLog.UnknownOffset). "
    + _3X_COMMON + " No other deviation read for 3.9. Not in 3.9: ListOffsets -6 (v9 is the newest), KIP-1023, "
    "KIP-1166.",
}
for _minor, _patch in ((4, "3.4.1"), (5, "3.5.2"), (6, "3.6.2"), (7, "3.7.2"), (8, "3.8.1")):
    _BY_3X_LINE[f"kafka-3.{_minor}"] = (
        f"Read in the {_patch} source jar (kafka_2.13) by harness/profile_read.py: the same code as "
        "3.3.2 and 3.9.2 in the same classes and methods. out-of-range-without-offsets: "
        "kafka.server.ReplicaManager.readFromLocalLog answers OffsetOutOfRangeException with "
        "highWatermark = leaderLogStartOffset = UnifiedLog.UnknownOffset (inline catch, or from 3.6 "
        "handleOffsetOutOfRangeError -> createLogReadResult(e) outside the tiered range). " + _3X_COMMON +
        f" No other deviation read for 3.{_minor}.")
#: KIP-227 as 4.x serves it, in every 3.x line's kafka.server.FetchSession.scala (found by `kipcheck profile
#: read`): taken in after a 3.3.1 run's incremental response carried a partition whose only news was an
#: UNKNOWN_LEADER_EPOCH error (CachedPartition.maybeUpdateResponseData: an error always responds)
_KIP227_3X = frozenset({EMPTY_SESSION_CLOSED, INCREMENTAL_EXTRA_PARTITIONS, EVICT_SMALLEST})
for _name, _notes in _BY_3X_LINE.items():
    _sharded = int(_name.rsplit(".", 1)[1]) >= 8
    _notes += (" empty-session-closed, incremental-extra-partitions, evict-smallest"
               + (", sharded-session-cache" if _sharded else "") + ": kafka.server.FetchSession.scala as in 4.0 "
               "(session.isEmpty closes, maybeUpdateResponseData responds for an error or a preferred replica, "
               "tryEvict/touch" + (", the cache in shards" if _sharded else "") + "), found by `kipcheck profile read` "
               "and taken in on 2026-11-28 (a 3.3.1 session answered a partition whose only news was "
               "UNKNOWN_LEADER_EPOCH).")
    _shallow = int(_name.rsplit(".", 1)[1]) <= 7  # KAFKA-16310, fixed in 3.8.0
    _notes += (" max-timestamp-shallow-offset: UnifiedLog.fetchOffsetByTimestamp answers MAX_TIMESTAMP with the "
               "segment's recorded offset, a batch's last (found by `kipcheck profile read`, taken in on 2026-11-28 "
               "after 3.3.x and 3.7.2 runs answered the last of a batch's records stamped alike; KAFKA-16310)."
               if _shallow else "")
    _notes += (" reassignment-completes-on-adding: PartitionReassignmentReplicas.maybeCompleteReassignment asks only "
               "for the adding replicas in the ISR (found by `kipcheck profile read`, taken in on 2026-11-28; "
               "KAFKA-15665)." if _shallow else "")  # fixed in 3.8.0 as well
    RELEASE_NOTES[_name] = _notes
    PROFILES[_name] = Profile(_name, _READ_IN_3X | _KIP227_3X | ({SHARDED_SESSION_CACHE} if _sharded else set())
                              | ({MAX_TIMESTAMP_SHALLOW_OFFSET, REASSIGNMENT_COMPLETES_ON_ADDING} if _shallow
                                 else set()), _notes)
