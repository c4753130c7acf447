"""Immutable state values shared by the KIP modules.

Every field that an observer may not know is `Optional`: `None` means *unknown*,
and every rule must then allow every outcome that some value would allow. This is
what lets the checker build a state from partial observations and still flag only
what is proven.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1
NO_SESSION = 0  # KIP-227 "Fetch Session ID": 0 = no session
INITIAL_EPOCH = 0  # KIP-227 request table: 0 = full request that may create a session
FINAL_EPOCH = -1  # KIP-227 request table: -1 = full request that uses/creates no session
NO_PREFERENCE = -1  # KIP-392 PreferredReadReplica: -1 = read from the leader
UNKNOWN_OFFSET = -1

# Kafka error names, as the history writes them.
NONE = "NONE"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
OFFSET_NOT_AVAILABLE = "OFFSET_NOT_AVAILABLE"
OFFSET_MOVED_TO_TIERED_STORAGE = "OFFSET_MOVED_TO_TIERED_STORAGE"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
FETCH_SESSION_ID_NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
INVALID_FETCH_SESSION_EPOCH = "INVALID_FETCH_SESSION_EPOCH"


@dataclass(frozen=True)
class Replica:
    """One replica's log as the KIP-392 diagram draws it (plus KIP-1023's local start).

    `hwm` is the high watermark *this* replica knows, which on a follower lags the
    leader's (KIP-392 "High watermark propagation")."""

    broker: int
    rack: str | None = None
    log_start: int | None = 0
    leo: int | None = 0
    hwm: int | None = 0
    lso: int | None = None  # last stable offset; None = unknown or equal to hwm
    local_log_start: int | None = None  # KIP-1023 Lx; None = same as log_start

    def with_(self, **changes) -> "Replica":
        return replace(self, **changes)


@dataclass(frozen=True)
class PartitionState:
    """What the leader of one partition knows, in one leader epoch."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    replicas: tuple[Replica, ...]
    #: KIP-207/KIP-392: a new leader whose HWM still lags the start of its epoch
    hwm_pending: bool = False

    def replica(self, broker: int) -> Replica | None:
        return next((r for r in self.replicas if r.broker == broker), None)

    @property
    def leader_replica(self) -> Replica:
        r = self.replica(self.leader)
        if r is None:
            raise ValueError(f"leader {self.leader} is not among the replicas")
        return r

    def with_replica(self, new: Replica) -> "PartitionState":
        return replace(self, replicas=tuple(new if r.broker == new.broker else r for r in self.replicas))


@dataclass(frozen=True)
class CachedPartition:
    """KIP-227 "Cached data about each partition" (the fields an observer sees)."""

    topic: str
    partition: int
    fetch_offset: int
    hwm: int = UNKNOWN_OFFSET  # last HWM the session sent to the fetcher
    log_start: int = UNKNOWN_OFFSET  # last leader log start the session sent

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Session:
    """KIP-227 "Fetch Sessions": id, epoch, cached partitions (in rotation order),
    privileged bit, creation and last-use times (ms)."""

    id: int
    epoch: int
    privileged: bool
    partitions: tuple[CachedPartition, ...] = ()
    created_ms: int = 0
    last_used_ms: int = 0

    @property
    def size(self) -> int:
        return len(self.partitions)


@dataclass(frozen=True)
class SessionCache:
    """KIP-227 "Fetch Session Caching": a bounded set of sessions on one broker."""

    slots: int = 1000  # max.incremental.fetch.session.cache.slots
    eviction_ms: int = 120_000  # min.incremental.fetch.session.eviction.ms
    sessions: tuple[Session, ...] = field(default_factory=tuple)
    #: number of independent shards; None = as the profile says (1, or 8 for Kafka 4.x)
    shards: int | None = None

    def get(self, session_id: int) -> Session | None:
        return next((s for s in self.sessions if s.id == session_id), None)

    def without(self, session_id: int) -> "SessionCache":
        return replace(self, sessions=tuple(s for s in self.sessions if s.id != session_id))

    def with_session(self, session: Session) -> "SessionCache":
        return replace(self, sessions=self.without(session.id).sessions + (session,))


@dataclass(frozen=True)
class TieredLog:
    """KIP-1023 "High-Level Design": the leader's offsets for a tiered partition.

    Lx = local_log_start, Ly = lso, Lz = leo, Rx = remote_log_start,
    Ry = last_tiered (-1: nothing uploaded / unknown to the leader)."""

    log_start: int
    local_log_start: int
    lso: int
    leo: int
    hwm: int
    remote_log_start: int = UNKNOWN_OFFSET
    last_tiered: int = UNKNOWN_OFFSET
    max_timestamp_offset: int = UNKNOWN_OFFSET
