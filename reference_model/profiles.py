"""Profiles: the KIP text, and what Kafka release lines are known to do instead.

A profile is a set of *deviations*. Each deviation names a place where a release
answers differently from the KIP text, with the Kafka class and method that show it.
Rules ask `profile.allows(DEVIATION)`; the checker runs every observation against
both `kip` and the chosen profile, and a difference accepted only by the profile is
reported as *known*.

Evidence was read in apache/kafka trunk at commit 1eb7644 (October 2024, the 4.0
development line). The later 4.x lines are assumed unchanged on these points; that
is recorded here, not verified. KIP-1023 and KIP-1166 code was not in that snapshot,
so no deviation is claimed for them: the 4.x profiles follow the KIP text there.
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
#: above LEO is OFFSET_OUT_OF_RANGE (case 4 handling). This *narrows* the KIP.
HWM_CAPPED_AT_LEO = "hwm-capped-at-leo"
#: OffsetsForLeaderEpoch answers consumers with the epoch's end offset up to LEO,
#: not capped at the HWM, and never OFFSET_NOT_AVAILABLE for a lagging new leader.
OFFSETS_FOR_LEADER_EPOCH_UNCAPPED = "offsets-for-leader-epoch-uncapped"
# --- KIP-227 -------------------------------------------------------------------
#: An incremental request that forgets the session's last partition closes the
#: session; the response carries session id 0.
EMPTY_SESSION_CLOSED = "empty-session-closed"
#: Incremental responses also carry partitions with an error, a preferred read
#: replica or a diverging epoch, not only HWM / log start changes and new data.
INCREMENTAL_EXTRA_PARTITIONS = "incremental-extra-partitions"
#: The broker picks one definite eviction victim: the least recently used session if
#: idle too long, else the smallest (privileged, size, id) eligible one. Narrows the KIP.
EVICT_SMALLEST = "evict-smallest"

EVIDENCE: dict[str, str] = {
    FETCH_ABOVE_HWM_EMPTY: "kafka.log.UnifiedLog.read bounds the read by fetchHighWatermarkMetadata for "
    "FetchIsolation.HIGH_WATERMARK; kafka.log.LocalLog.read returns emptyFetchDataInfo when "
    "startOffset >= maxOffsetMetadata and only throws OffsetOutOfRangeException above the log end offset; "
    "Partition.readRecords/fetchRecords add no error.",
    OUT_OF_RANGE_WITHOUT_OFFSETS: "kafka.server.ReplicaManager.readFromLog (inner read) catches "
    "OffsetOutOfRangeException into handleOffsetOutOfRangeError, which outside tiered storage calls "
    "createLogReadResult(e) with highWatermark and leaderLogStartOffset = UnifiedLog.UnknownOffset (-1).",
    HWM_CAPPED_AT_LEO: "kafka.log.UnifiedLog.updateHighWatermark bounds the new HWM by the log start "
    "offset below and the log end offset above.",
    OFFSETS_FOR_LEADER_EPOCH_UNCAPPED: "KafkaApis.handleOffsetForLeaderEpochRequest -> "
    "ReplicaManager.lastOffsetForLeaderEpoch -> Partition.lastOffsetForLeaderEpoch -> "
    "UnifiedLog.endOffsetForEpoch(cache.endOffsetFor(epoch, logEndOffset)); no replica id or HWM is consulted.",
    EMPTY_SESSION_CLOSED: "kafka.server.FetchManager.newContext: after session.update, "
    "if session.isEmpty the session is removed and a SessionlessFetchContext (session id 0) answers.",
    INCREMENTAL_EXTRA_PARTITIONS: "kafka.server.CachedPartition.maybeUpdateResponseData: mustRespond also "
    "for a preferred replica, an error code or a diverging epoch.",
    EVICT_SMALLEST: "kafka.server.FetchSessionCacheShard.tryEvict: evicts lastUsed.firstEntry if idle > "
    "evictionMs, else the first entry of evictableByPrivileged/evictableByAll ordered by "
    "EvictableKey(privileged, size, id), if the new key is not smaller.",
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
        }


KIP = Profile("kip", frozenset(), "The KIP texts (KIP-392, KIP-227, KIP-1023, KIP-1166) as written.")

_KAFKA_4 = frozenset(EVIDENCE)
PROFILES: dict[str, Profile] = {"kip": KIP}
for _minor in range(4):
    _name = f"kafka-4.{_minor}"
    PROFILES[_name] = Profile(
        _name,
        _KAFKA_4,
        f"Apache Kafka 4.{_minor}: deviations read in trunk 1eb7644 (4.0 development); "
        "later lines assumed unchanged. KIP-1023/KIP-1166 follow the KIP text (no source evidence read).",
    )


def get(name: str | Profile) -> Profile:
    """The profile called `name` (a Profile passes through)."""
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; known: {sorted(PROFILES)}") from None


def for_version(version: str | None) -> str:
    """The profile name for a Kafka version string such as "4.3.1"; `kip` if none fits."""
    if not version:
        return "kip"
    parts = version.split(".")
    name = f"kafka-{parts[0]}.{parts[1]}" if len(parts) >= 2 else ""
    return name if name in PROFILES else "kip"
