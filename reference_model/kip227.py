"""KIP-227: Incremental fetch requests and fetch sessions.

Sessions and the cache are immutable values (`state.Session`, `state.SessionCache`);
`handle_request` returns every allowed (response, next cache) pair.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from . import profiles
from .profiles import Profile
from .state import (
    FETCH_SESSION_ID_NOT_FOUND,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_FETCH_SESSION_EPOCH,
    MAX_INT32,
    NO_SESSION,
    NONE,
    CachedPartition,
    Session,
    SessionCache,
)

SESSIONLESS = "sessionless"  # 0 / -1
NEW = "new"  # 0 / 0
CLOSE_AND_NEW = "close-and-new"  # ID / 0
INCREMENTAL = "incremental"  # ID / EPOCH
CLOSE = "close"  # ID / -1


def next_epoch(epoch: int) -> int:
    """KIP-227 "Fetch Epoch": incremented by one per request; after MAX_INT it wraps
    to 1 (epochs are always positive). A negative epoch has no successor."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == MAX_INT32 else epoch + 1


def request_kind(session_id: int, epoch: int) -> str:
    """KIP-227 "FetchRequest Metadata meaning": the row of the session id/epoch table.

    Anything else (e.g. id 0 with a positive epoch) is an incremental request for a
    session that cannot exist."""
    if epoch == FINAL_EPOCH:
        return SESSIONLESS if session_id == NO_SESSION else CLOSE
    if epoch == INITIAL_EPOCH:
        return NEW if session_id == NO_SESSION else CLOSE_AND_NEW
    return INCREMENTAL


@dataclass(frozen=True)
class FetchRequest:
    session_id: int
    epoch: int
    privileged: bool  # KIP-227 "Privileged bit": the fetcher is a follower
    partitions: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, fetch offset)
    forgotten: tuple[tuple[str, int], ...] = ()
    now_ms: int = 0


@dataclass(frozen=True)
class SessionResponse:
    """Top-level answer: error code and session id; `created` marks a new session."""

    error: str
    session_id: int
    created: bool = False


# --- Fetch Session Caching -------------------------------------------------------

def may_evict(existing: Session, new_privileged: bool, new_size: int, now_ms: int, eviction_ms: int) -> bool:
    """KIP-227 "Fetch Session Caching": a new session evicts an existing one iff
    1. the new one is a follower's and the existing one a consumer's, or
    2. the existing one has been inactive longer than the eviction time, or
    3. the existing one is older than the eviction time and the new one has more partitions."""
    if new_privileged and not existing.privileged:
        return True
    if now_ms - existing.last_used_ms > eviction_ms:
        return True
    return now_ms - existing.created_ms > eviction_ms and new_size > existing.size


def kafka_eviction_victim(cache: SessionCache, new_privileged: bool, new_size: int, now_ms: int) -> int | None:
    """Kafka's single choice (profile `evict-smallest`): the least recently used
    session if idle too long; else the smallest (privileged, size, id) session among
    those a new session of its kind may evict, if the new (privileged, size) is not smaller.
    A consumer may evict only sessions that were older than the eviction time when last
    used; a follower also any consumer session."""
    if not cache.sessions:
        return None
    lru = min(cache.sessions, key=lambda s: (s.last_used_ms, s.id))
    if now_ms - lru.last_used_ms > cache.eviction_ms:
        return lru.id
    old = lambda s: s.last_used_ms - s.created_ms > cache.eviction_ms  # noqa: E731
    pool = [s for s in cache.sessions if old(s) or (new_privileged and not s.privileged)]
    if not pool:
        return None
    victim = min(pool, key=lambda s: (s.privileged, s.size, s.id))
    return victim.id if (new_privileged, new_size) > (victim.privileged, victim.size) else None


def session_shard(session_id: int, shards: int) -> int:
    """Kafka's shard of a session id (profile `sharded-session-cache`): id // (2^31-1 // shards)."""
    return session_id // (MAX_INT32 // shards)


def cache_shards(cache: SessionCache, profile: Profile) -> list[SessionCache]:
    """The shards a new session may land in: the whole cache under the KIP; under
    `sharded-session-cache` one cache per shard with slots // shards entries."""
    shards = cache.shards if cache.shards is not None else (
        profiles.SESSION_CACHE_SHARDS if profile.allows(profiles.SHARDED_SESSION_CACHE) else 1)
    if shards == 1:
        return [cache]
    return [
        replace(cache, slots=cache.slots // shards, shards=1,
                sessions=tuple(s for s in cache.sessions if session_shard(s.id, shards) == k))
        for k in range(shards)
    ]


def admission_outcomes(
    cache: SessionCache, privileged: bool, size: int, now_ms: int, profile: Profile, new_id: int | None = None,
) -> frozenset:
    """KIP-227 "Fetch Session Caching": may a new session get a slot, and whom may it
    evict? Results: ("free", None), ("evict", session id) or ("rejected", None).
    With a sharded cache, the union over the shards the session may land in (only the
    shard of `new_id` when the new session's id is known)."""
    out: set = set()
    shards = cache_shards(cache, profile)
    if len(shards) > 1 and new_id:
        shards = [shards[session_shard(new_id, len(shards))]]
    for shard in shards:
        if len(shard.sessions) < shard.slots:
            out.add(("free", None))
        elif profile.allows(profiles.EVICT_SMALLEST):
            victim = kafka_eviction_victim(shard, privileged, size, now_ms)
            out.add(("evict", victim) if victim is not None else ("rejected", None))
        else:
            victims = {s.id for s in shard.sessions if may_evict(s, privileged, size, now_ms, shard.eviction_ms)}
            out |= {("evict", v) for v in victims} or {("rejected", None)}
    return frozenset(out)


def fresh_session_id(cache: SessionCache, requested: int | None = None) -> int:
    """KIP-227 "Fetch Session ID": non-zero and unique on the broker. Replay is
    deterministic, so the id is the one the scenario gives, else max + 1."""
    if requested is not None and requested != NO_SESSION and cache.get(requested) is None:
        return requested
    return max((s.id for s in cache.sessions), default=0) + 1


def _create(cache: SessionCache, req: FetchRequest, profile: Profile, new_id: int | None):
    out = []
    for kind, victim in sorted(admission_outcomes(cache, req.privileged, len(req.partitions), req.now_ms, profile, new_id), key=repr):
        if kind == "rejected":
            out.append((SessionResponse(NONE, NO_SESSION), cache))
            continue
        base = cache.without(victim) if kind == "evict" else cache
        sid = fresh_session_id(base, new_id)
        parts = tuple(CachedPartition(t, p, o) for t, p, o in req.partitions)
        session = Session(sid, next_epoch(INITIAL_EPOCH), req.privileged, parts, req.now_ms, req.now_ms)
        out.append((SessionResponse(NONE, sid, created=True), base.with_session(session)))
    return out


def update_session_partitions(session: Session, req: FetchRequest) -> tuple[CachedPartition, ...]:
    """KIP-227 "Incremental Fetch Requests": listed partitions are added or get their
    new fetch offset (keeping their place in the rotation); forgotten ones leave."""
    by_key = {p.key: p for p in session.partitions}
    order = [p.key for p in session.partitions]
    for t, p, o in req.partitions:
        if (t, p) in by_key:
            by_key[(t, p)] = replace(by_key[(t, p)], fetch_offset=o)
        else:
            by_key[(t, p)] = CachedPartition(t, p, o)
            order.append((t, p))
    gone = set(req.forgotten)
    return tuple(by_key[k] for k in order if k not in gone)


def handle_request(cache: SessionCache, req: FetchRequest, profile: Profile | str = "kip", new_id: int | None = None):
    """KIP-227 "FetchRequest Metadata meaning", the new error codes and "FetchResponse
    Metadata meaning": every allowed (SessionResponse, next cache).

    Wrong epoch: INVALID_FETCH_SESSION_EPOCH, session kept, response id 0 or the
    session's id (docs/history.md). Unknown id: FETCH_SESSION_ID_NOT_FOUND, id 0."""
    profile = profiles.get(profile)
    kind = request_kind(req.session_id, req.epoch)
    if kind == SESSIONLESS:
        return [(SessionResponse(NONE, NO_SESSION), cache)]
    if kind in (CLOSE, CLOSE_AND_NEW):
        cache = cache.without(req.session_id)
        if kind == CLOSE:
            return [(SessionResponse(NONE, NO_SESSION), cache)]
    if kind in (NEW, CLOSE_AND_NEW):
        return _create(cache, req, profile, new_id)
    session = cache.get(req.session_id)
    if session is None:
        return [(SessionResponse(FETCH_SESSION_ID_NOT_FOUND, NO_SESSION), cache)]
    if session.epoch != req.epoch:
        return [
            (SessionResponse(INVALID_FETCH_SESSION_EPOCH, NO_SESSION), cache),
            (SessionResponse(INVALID_FETCH_SESSION_EPOCH, session.id), cache),
        ]
    parts = update_session_partitions(session, req)
    if not parts and profile.allows(profiles.EMPTY_SESSION_CLOSED):
        return [(SessionResponse(NONE, NO_SESSION), cache.without(session.id))]
    updated = replace(session, partitions=parts, epoch=next_epoch(session.epoch), last_used_ms=req.now_ms)
    return [(SessionResponse(NONE, session.id), cache.with_session(updated))]


# --- Incremental requests and responses -------------------------------------------

def incremental_request_contents(session: Session, wanted: dict[tuple[str, int], int]):
    """KIP-227 "Incremental Fetch Requests": send only partitions that are new or whose
    fetch offset changed, and forget those no longer wanted.
    Returns (partitions to send as (topic, partition, offset), forgotten keys)."""
    cached = {p.key: p.fetch_offset for p in session.partitions}
    send = tuple((t, p, o) for (t, p), o in wanted.items() if cached.get((t, p)) != o)
    forget = tuple(k for k in cached if k not in wanted)
    return send, forget


@dataclass(frozen=True)
class PartitionResponse:
    error: str = NONE
    hwm: int = -1
    log_start: int = -1
    has_records: bool = False
    preferred_read_replica: int = -1


def must_include(cached: CachedPartition, resp: PartitionResponse, profile: Profile | str = "kip") -> bool:
    """KIP-227 "Incremental Fetch Responses": a partition is in an incremental response
    iff its HWM or log start changed since the session last sent them, or there is new
    data. Kafka also sends errors and preferred replicas (`incremental-extra-partitions`)."""
    profile = profiles.get(profile)
    changed = resp.hwm != cached.hwm or resp.log_start != cached.log_start or resp.has_records
    if profile.allows(profiles.INCREMENTAL_EXTRA_PARTITIONS):
        changed = changed or resp.error != NONE or resp.preferred_read_replica >= 0
    return changed


def after_response(cached: CachedPartition, resp: PartitionResponse) -> CachedPartition:
    """KIP-227 "Cached data about each partition": HWM and log start come from the
    leader's latest answer (an error leaves the HWM unknown, so it is sent again)."""
    hwm = -1 if resp.error != NONE else resp.hwm
    return replace(cached, hwm=hwm, log_start=resp.log_start)


def rotate(order: tuple, returned_with_records: tuple) -> tuple:
    """KIP-227 "Handling Partition Size Limits": partitions that returned data move to
    the end of the session's list, in the order they were returned."""
    moved = [k for k in returned_with_records if k in order]
    return tuple(k for k in order if k not in moved) + tuple(moved)


def top_level_error_view(error: str, requested: tuple) -> dict:
    """KIP-227 "Top-level error code": when set, every requested partition is to be
    taken as having received that error."""
    return {key: error for key in requested}


# --- One client's view of a broker's cache ------------------------------------------------

def may_be_evicted(session: Session, now_ms: int, eviction_ms: int, profile: Profile | str = "kip") -> bool:
    """KIP-227 "Fetch Session Caching", for a session whose cache the client cannot see:
    could some new session (any kind, any size) have evicted it by `now_ms`, had the
    cache been full? Rule 1 (a follower's new session) can always evict a consumer's
    session. `evict-smallest` (Kafka): the idle LRU, a consumer session for a follower's
    new session, or a session that was older than the eviction time when last used."""
    profile = profiles.get(profile)
    if profile.allows(profiles.EVICT_SMALLEST):
        return (now_ms - session.last_used_ms > eviction_ms or not session.privileged
                or session.last_used_ms - session.created_ms > eviction_ms)
    return may_evict(session, True, MAX_INT32, now_ms, eviction_ms)


def observer_outcomes(
    known: SessionCache, gone: frozenset, req: FetchRequest, profile: Profile | str = "kip", new_id: int | None = None,
):
    """KIP-227 "FetchRequest Metadata meaning", as one client sees it: it knows its own sessions (`known`) and the ids it
    saw closed or not found (`gone`); the broker's other sessions are unknown, so:

    * every answer `handle_request` allows on the client's own sessions (given room);
    * a new session may also be refused (NONE, session id 0): the cache may be full of
      sessions the client cannot see, none of them evictable ("Fetch Session Caching");
    * a known session may be gone (FETCH_SESSION_ID_NOT_FOUND) when `may_be_evicted`;
    * an incremental request on an id the client never saw may hit anyone's session:
      any answer (returns None: nothing to judge).

    Otherwise every allowed (SessionResponse, next known, next gone)."""
    profile = profiles.get(profile)
    kind = request_kind(req.session_id, req.epoch)
    if kind == INCREMENTAL and known.get(req.session_id) is None and req.session_id not in gone:
        return None
    roomy = replace(known, slots=len(known.sessions) + 1, shards=1)
    out = []
    for resp, cache in handle_request(roomy, req, profile, new_id):
        cache = replace(cache, slots=known.slots, shards=known.shards)
        left = {s.id for s in known.sessions} - {s.id for s in cache.sessions}
        out.append((resp, cache, (gone | left) - {s.id for s in cache.sessions}))
    if kind in (NEW, CLOSE_AND_NEW):
        closed = known.without(req.session_id)
        out.append((SessionResponse(NONE, NO_SESSION), closed, gone | ({req.session_id} - {NO_SESSION})))
    session = known.get(req.session_id)
    if kind == INCREMENTAL and session is not None and may_be_evicted(session, req.now_ms, known.eviction_ms, profile):
        out.append((SessionResponse(FETCH_SESSION_ID_NOT_FOUND, NO_SESSION), known.without(session.id),
                    gone | {session.id}))
    return out


def full_response_partitions(req: FetchRequest) -> frozenset:
    """KIP-227 "Full Fetch Responses": a full response carries every requested partition."""
    return frozenset((t, p) for t, p, _ in req.partitions)


def may_omit(cached: CachedPartition, response_may_be_full: bool, records_seen_at_offset: bool,
             profile: Profile | str = "kip", hwm_floor: int | None = None) -> bool:
    """KIP-227 "Incremental Fetch Responses": a partition with new data must be in the
    response. Committed data at the fetch offset (below the HWM the session last sent)
    is new data unless the response may have hit its size limit ("Handling Partition
    Size Limits": `size_limits_may_empty_read`) or the replica may not hold it: under the KIP a follower's HWM may
    exceed its LEO (KIP-392 case 2), unless records at that offset were already seen;
    with `hwm-capped-at-leo` (Kafka) the HWM never exceeds the LEO, so it holds them.
    See `hwm_changed_since_sent` for the other reason, which no size limit excuses."""
    profile = profiles.get(profile)
    if hwm_changed_since_sent(cached, hwm_floor):
        return False
    if response_may_be_full or cached.hwm < 0 or cached.fetch_offset >= cached.hwm:
        return True
    return not (records_seen_at_offset or profile.allows(profiles.HWM_CAPPED_AT_LEO))


def hwm_changed_since_sent(cached: CachedPartition, hwm_floor: int | None) -> bool:
    """KIP-227 "Incremental Fetch Responses": a partition whose highWatermark changed
    since the session last sent it is in the response. `hwm_floor`: the least HWM the
    broker can have had while it answered, proven before the request was sent (an HWM it
    reported, or past a record it served, in the same leader epoch and life, where the
    HWM cannot go back: KIP-392 "High watermark propagation"; None: nothing proven). The
    HWM travels with every partition whether or not the response's size limit left room
    for its records, so "Handling Partition Size Limits" does not excuse leaving it out.
    An unknown cached HWM (-1 after an error) proves nothing."""
    return hwm_floor is not None and cached.hwm >= 0 and hwm_floor > cached.hwm


# --- Handling Partition Size Limits, as Kafka reads (ReplicaManager.readFromLog) -----------

def size_limits_may_empty_read(first_batch_max: int | None, earlier: Sequence[int | None], partition_max_bytes: int,
                               max_bytes: int, order_known: bool = True) -> bool:
    """KIP-227 "Handling Partition Size Limits" (KIP-74): may the response's size limits have
    left a partition with data at its fetch offset no bytes? Kafka (`ReplicaManager.readFromLog`)
    reads the session's partitions in its order (`rotate`) from a budget of `max_bytes`: until
    one returns bytes each read ignores both limits (`minOneMessage`: at least its first batch,
    alone when larger than the limit); every later read gets min(`partition_max_bytes`, what is
    left) and returns nothing when its first batch is larger (`LogSegment.read`; an incomplete
    first batch is dropped from v3 on). So: not when no partition read before it returned bytes;
    else not when its first batch fits what the earlier ones can have left.

    `first_batch_max`: a bound on its first batch's size; `earlier`: a bound on the first batch
    of each partition read before it that returned bytes, in read order (None: unbounded), or,
    when not `order_known`, of every other partition that returned bytes (any may have been first)."""
    if not earlier:
        return False
    heads = earlier[:1] if order_known else earlier  # the ones that may have been read with minOneMessage
    if first_batch_max is None or any(b is None for b in heads):
        return True
    spent = max(partition_max_bytes, *heads) + partition_max_bytes * (len(earlier) - 1)
    return not read_has_room(first_batch_max, spent, partition_max_bytes, max_bytes)


def read_has_room(first_batch: int, spent: int, partition_max_bytes: int, max_bytes: int) -> bool:
    """KIP-227 "Handling Partition Size Limits" (KIP-74), for a partition read after another
    returned bytes: Kafka (`ReplicaManager.readFromLog`) gives it min(`partition_max_bytes`,
    what the `spent` bytes of the earlier reads left of `max_bytes`), and a first batch larger
    than that comes back as nothing (`LogSegment.read`; an incomplete first batch is dropped
    from Fetch v3 on). So it returns bytes iff its first batch fits."""
    return first_batch <= min(partition_max_bytes, max_bytes - spent)


def first_batch_within_limit(reads: Sequence[tuple]) -> tuple[int, ...]:
    """Which of `reads` prove that the first record batch at one fetch offset is no larger
    than the partition limit every read used (their positions; empty: not proven).

    `reads`: the non-empty reads at that offset of one unchanged log, each (read with
    `minOneMessage`: True, False or None when not known, the offsets it returned). Kafka
    (`ReplicaManager.readFromLog`, `LogSegment.read`): a read without `minOneMessage` returns
    whole batches within the limit, so its first batch fit; a batch above the limit is only
    ever returned alone (with `minOneMessage`), the same offsets each time, so two reads that
    returned different offsets prove it fit too. A batch that fits also bounds what a read
    with `minOneMessage` returns there: at most the limit."""
    for i, (min_one_message, _) in enumerate(reads):
        if min_one_message is False:
            return (i,)
    first: dict = {}
    for i, (_, offsets) in enumerate(reads):
        first.setdefault(tuple(offsets), i)
        if len(first) > 1:
            return tuple(first.values())
    return ()
