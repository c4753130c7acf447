"""KIP-1023: Follower fetch from tiered offset (and the ListOffsets timestamps)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from . import profiles
from .profiles import Profile
from .state import OFFSET_MOVED_TO_TIERED_STORAGE, OFFSET_OUT_OF_RANGE, UNKNOWN_OFFSET, TieredLog

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LAST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


def earliest_pending_upload(log: TieredLog, profile: Profile | str = "kip") -> int:
    """KIP-1023 "FetchOffet API Changes": the offset after the highest offset on remote
    storage; -1 while the leader does not know it (nothing uploaded or not learnt yet).

    `pending-upload-resolved-by-leader` (Kafka 4.3): nothing uploaded and local log
    start == log start -> the log start; else never below the log start."""
    profile = profiles.get(profile)
    if not profile.allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER):
        return log.last_tiered + 1 if log.last_tiered >= 0 else UNKNOWN_OFFSET
    if log.last_tiered < 0:
        return log.log_start if log.local_log_start == log.log_start else UNKNOWN_OFFSET
    return max(log.last_tiered + 1, log.log_start)


def list_offsets(
    log: TieredLog, timestamp: int, isolation_level: str = "read_uncommitted", replica_id: int = -1,
    profile: Profile | str = "kip",
) -> int:
    """KIP-1023 "List Offsets API": -2 log start, -1 latest (LEO for a replica, LSO for
    read_committed, HWM for other clients: KIP-392 committed-only), -3 offset of the max
    timestamp, -4 local log start, -5 last tiered offset, -6 earliest pending upload."""
    if timestamp == EARLIEST:
        return log.log_start
    if timestamp == LATEST:
        if replica_id >= 0:
            return log.leo
        return log.lso if isolation_level == "read_committed" else log.hwm
    if timestamp == MAX_TIMESTAMP:
        return log.max_timestamp_offset
    if timestamp == EARLIEST_LOCAL:
        return log.local_log_start
    if timestamp == LAST_TIERED:
        return log.last_tiered
    if timestamp == EARLIEST_PENDING_UPLOAD:
        return earliest_pending_upload(log, profile)
    raise ValueError(f"not a special ListOffsets timestamp: {timestamp}")


def inequality_violations(log: TieredLog) -> tuple[str, ...]:
    """KIP-1023 "High-Level Design": Lz >= Ly >= Lx and Ly >= Ry >= Rx (remote values
    only when known, i.e. >= 0). Returns the names of the broken ones."""
    checks = [
        ("Lz>=Ly", log.leo >= log.lso),
        ("Ly>=Lx", log.lso >= log.local_log_start),
    ]
    if log.last_tiered >= 0:
        checks.append(("Ly>=Ry", log.lso >= log.last_tiered))
        if log.remote_log_start >= 0:
            checks.append(("Ry>=Rx", log.last_tiered >= log.remote_log_start))
    return tuple(name for name, ok in checks if not ok)


@dataclass(frozen=True)
class Bootstrap:
    """What an empty follower does next: fetch from `fetch_offset` with `log_start`
    (auxiliary state built for [log_start, fetch_offset)), or `retry` later."""

    action: str  # "fetch" | "retry"
    fetch_offset: int = UNKNOWN_OFFSET
    log_start: int = UNKNOWN_OFFSET


def follower_bootstrap(
    error: str, enabled: bool, follower_empty: bool, leader_log_start: int, leader_local_log_start: int,
    pending_upload: int, profile: Profile | str = "kip",
) -> Bootstrap:
    """KIP-1023 "ReplicaFetcher Changes" (and "Case 2.1/2.2" for the old behaviour).

    Old behaviour (feature off, or follower not empty): OFFSET_OUT_OF_RANGE -> restart
    at the leader's log start; OFFSET_MOVED_TO_TIERED_STORAGE -> at its local log start.
    New: the earliest pending upload offset; if unknown (-1) use the local log start when
    nothing was ever uploaded (log start == local log start), else retry; if below the
    leader's log start, nothing valid is on remote: replicate what the leader has locally.
    `follower-bootstrap-absent` (Kafka before 4.3): always the old behaviour."""
    enabled = enabled and not profiles.get(profile).allows(profiles.FOLLOWER_BOOTSTRAP_ABSENT)
    if not (enabled and follower_empty):
        if error == OFFSET_OUT_OF_RANGE:
            return Bootstrap("fetch", leader_log_start, leader_log_start)
        if error == OFFSET_MOVED_TO_TIERED_STORAGE:
            return Bootstrap("fetch", leader_local_log_start, leader_log_start)
        raise ValueError(f"bootstrap starts from an out-of-range answer, not {error}")
    if pending_upload == UNKNOWN_OFFSET:
        if leader_log_start == leader_local_log_start:
            return Bootstrap("fetch", leader_local_log_start, leader_log_start)
        return Bootstrap("retry")
    if pending_upload < leader_log_start:
        return Bootstrap("fetch", leader_local_log_start, leader_local_log_start)
    return Bootstrap("fetch", pending_upload, leader_log_start)


# --- ListOffsets answers over time -------------------------------------------------------

#: The quantities ListOffsets answers (`list_offsets`), by name.
QUANTITIES = ("log_start", "local_log_start", "last_tiered", "pending_upload", "lso", "hwm", "leo")


def _closure(pairs: set) -> frozenset:
    """Transitive closure of lower <= upper + slack (the smallest slack per pair)."""
    best = {}
    for lo, hi, s in pairs:
        best[(lo, hi)] = min(s, best.get((lo, hi), s))
    changed = True
    while changed:
        changed = False
        for (a, b), s1 in list(best.items()):
            for (c, d), s2 in list(best.items()):
                if b == c and a != d and s1 + s2 < best.get((a, d), s1 + s2 + 1):
                    best[(a, d)] = s1 + s2
                    changed = True
    return frozenset((lo, hi, s) for (lo, hi), s in best.items())


def offset_order(profile: Profile | str = "kip") -> frozenset:
    """KIP-1023 "High-Level Design" and "List Offsets API" as (lower, upper, slack):
    at any one moment the leader's lower <= upper + slack. Log start <= Lx (local log
    start) <= Ly (LSO) <= HWM <= Lz (LEO), Ry (last tiered) <= Ly, and the earliest
    pending upload offset is Ry + 1; `pending-upload-resolved-by-leader` (Kafka):
    max(Ry + 1, log start), so it is >= Ry + 1 and >= the log start, <= Ly + 1.
    Closed transitively."""
    return _order(profiles.get(profile))


@lru_cache(maxsize=None)
def _order(profile: Profile) -> frozenset:
    pairs = {("log_start", "local_log_start", 0), ("local_log_start", "lso", 0), ("lso", "hwm", 0),
             ("hwm", "leo", 0), ("last_tiered", "lso", 0), ("last_tiered", "pending_upload", -1),
             ("pending_upload", "lso", 1)}
    if profile.allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER):
        pairs.add(("log_start", "pending_upload", 0))
    else:
        pairs.add(("pending_upload", "last_tiered", 1))
    return _closure(pairs)


def never_decreasing(kind: str) -> bool:
    """KIP-1023 / KIP-392: within one leader epoch, on the leader, no offset ListOffsets
    reports goes back: log start and local log start only grow (retention, deletion of
    uploaded segments), the last tiered offset by uploads, LSO, HWM and LEO by appends
    and replication. Only a fault that truncates the log may move them back."""
    return kind in QUANTITIES


def answers_consistent(earlier_kind: str, earlier: int, later_kind: str, later: int,
                       profile: Profile | str = "kip", log_start_after: int | None = None) -> bool:
    """Two ListOffsets answers of one leader in one leader epoch, the later one asked
    after the earlier one was answered, no truncating fault between: since the earlier
    quantity never decreases, earlier <= (earlier quantity now) <= later + slack for every
    pair of `offset_order`, and a quantity never goes back. Unknown offsets (< 0) say
    nothing. `log_start_after`: the lowest log start (or local log start) the leader answered
    after the earlier answer, an upper bound of its log start then (`pending_upload_resolved`)."""
    if earlier < 0 or later < 0:
        return True
    if earlier_kind == later_kind:
        return not never_decreasing(earlier_kind) or later >= earlier
    if (earlier_kind, later_kind) == ("pending_upload", "last_tiered"):
        return pending_upload_resolved(earlier, later, profiles.get(profile), log_start_after)
    for lo, hi, slack in offset_order(profile):
        if lo == earlier_kind and hi == later_kind and never_decreasing(lo):
            return earlier <= later + slack
    return True


def pending_upload_resolved(pending: int, last_tiered_later: int, profile: Profile,
                            log_start_after: int | None = None) -> bool:
    """An earliest-pending-upload answer against a last-tiered answer of the same leader
    asked later. KIP-1023 "List Offsets API": pending = last tiered + 1, and the last tiered
    offset never goes back, so pending <= later last tiered + 1. Under
    `pending-upload-resolved-by-leader` Kafka answers max(last tiered + 1, log start)
    (UnifiedLog.fetchEarliestPendingUploadOffset), so a higher pending is its log start then,
    which never exceeds a log start (or local log start) it answers later: beyond
    `log_start_after` the answer is outside the deviation's bound."""
    if pending <= last_tiered_later + 1:
        return True
    return profile.allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER) and (
        log_start_after is None or pending <= log_start_after)

