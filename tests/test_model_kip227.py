"""KIP-227 rules: session table, epochs, errors, incremental contents, rotation, eviction."""
from hypothesis import given, settings, strategies as st

from kipcheck.reference_model import kip227, profiles
from kipcheck.reference_model.state import MAX_INT32, CachedPartition, Session, SessionCache

KIP, KAFKA = profiles.get("kip"), profiles.get("kafka-4.3")
P = (("t", 0, 5), ("t", 1, 7))


def req(sid, epoch, parts=P, forgotten=(), privileged=False, now=0):
    return kip227.FetchRequest(sid, epoch, privileged, parts, forgotten, now)


def only(results):
    assert len(results) == 1
    return results[0]


def test_request_table():
    assert kip227.request_kind(0, -1) == kip227.SESSIONLESS
    assert kip227.request_kind(0, 0) == kip227.NEW
    assert kip227.request_kind(9, 0) == kip227.CLOSE_AND_NEW
    assert kip227.request_kind(9, 4) == kip227.INCREMENTAL
    assert kip227.request_kind(9, -1) == kip227.CLOSE


def test_epochs_advance_by_one_and_wrap_to_one():
    assert kip227.next_epoch(0) == 1
    assert kip227.next_epoch(41) == 42
    assert kip227.next_epoch(MAX_INT32) == 1
    assert kip227.next_epoch(-1) == -1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, MAX_INT32))
def test_epoch_successor_is_positive_and_one_more_or_wrapped(e):
    n = kip227.next_epoch(e)
    assert n >= 1 and (n == e + 1 or (e == MAX_INT32 and n == 1))


def test_session_lifecycle():
    cache = SessionCache(slots=2)
    resp, c1 = only(kip227.handle_request(cache, req(0, -1)))
    assert resp == kip227.SessionResponse("NONE", 0) and c1 == cache
    resp, c1 = only(kip227.handle_request(cache, req(0, 0), new_id=77))
    assert resp == kip227.SessionResponse("NONE", 77, True)
    assert c1.get(77).epoch == 1 and c1.get(77).size == 2
    resp, c2 = only(kip227.handle_request(c1, req(77, 1, parts=(), now=5)))
    assert resp == kip227.SessionResponse("NONE", 77) and c2.get(77).epoch == 2 and c2.get(77).last_used_ms == 5
    wrong = kip227.handle_request(c2, req(77, 1, parts=()))
    assert {r for r, _ in wrong} == {kip227.SessionResponse("INVALID_FETCH_SESSION_EPOCH", 0),
                                      kip227.SessionResponse("INVALID_FETCH_SESSION_EPOCH", 77)}
    assert all(c == c2 for _, c in wrong)  # session kept
    resp, _ = only(kip227.handle_request(c2, req(78, 1)))
    assert resp == kip227.SessionResponse("FETCH_SESSION_ID_NOT_FOUND", 0)
    resp, c3 = only(kip227.handle_request(c2, req(77, -1)))
    assert resp.session_id == 0 and c3.get(77) is None
    resp, c4 = only(kip227.handle_request(c2, req(77, 0), new_id=80))
    assert resp == kip227.SessionResponse("NONE", 80, True) and c4.get(77) is None and c4.get(80).epoch == 1
    resp, _ = only(kip227.handle_request(cache, req(0, 3)))
    assert resp.error == "FETCH_SESSION_ID_NOT_FOUND"


def test_fresh_ids_are_unique_and_nonzero():
    cache = SessionCache(sessions=(Session(3, 1, False), Session(5, 1, False)))
    assert kip227.fresh_session_id(cache) == 6
    assert kip227.fresh_session_id(cache, 3) == 6
    assert kip227.fresh_session_id(cache, 0) == 6
    assert kip227.fresh_session_id(cache, 9) == 9


def test_forgetting_the_last_partition():
    _, c = only(kip227.handle_request(SessionCache(), req(0, 0), new_id=4))
    resp, after = only(kip227.handle_request(c, req(4, 1, parts=(), forgotten=(("t", 0), ("t", 1))), KIP))
    assert resp.session_id == 4 and after.get(4).size == 0
    resp, after = only(kip227.handle_request(c, req(4, 1, parts=(), forgotten=(("t", 0), ("t", 1))), KAFKA))
    assert resp.session_id == 0 and after.get(4) is None


def test_incremental_request_updates_keep_rotation_order():
    s = Session(1, 1, False, (CachedPartition("t", 0, 5), CachedPartition("t", 1, 7)))
    parts = kip227.update_session_partitions(s, req(1, 1, parts=(("t", 0, 9), ("u", 0, 0)), forgotten=(("t", 1),)))
    assert [(p.topic, p.partition, p.fetch_offset) for p in parts] == [("t", 0, 9), ("u", 0, 0)]
    send, forget = kip227.incremental_request_contents(s, {("t", 0): 5, ("t", 1): 8, ("u", 2): 0})
    assert send == (("t", 1, 8), ("u", 2, 0)) and forget == ()
    send, forget = kip227.incremental_request_contents(s, {("t", 0): 5})
    assert send == () and forget == (("t", 1),)


def test_incremental_response_contents():
    c = CachedPartition("t", 0, 5, hwm=10, log_start=0)
    R = kip227.PartitionResponse
    assert not kip227.must_include(c, R(hwm=10, log_start=0))
    assert kip227.must_include(c, R(hwm=11, log_start=0))
    assert kip227.must_include(c, R(hwm=10, log_start=1))
    assert kip227.must_include(c, R(hwm=10, log_start=0, has_records=True))
    assert not kip227.must_include(c, R(hwm=10, log_start=0, preferred_read_replica=2), KIP)
    assert kip227.must_include(c, R(hwm=10, log_start=0, preferred_read_replica=2), KAFKA)
    assert kip227.must_include(c, R(error="X", hwm=10, log_start=0), KAFKA)
    assert not kip227.must_include(c, R(error="X", hwm=10, log_start=0), KIP)
    assert kip227.after_response(c, R(error="X", hwm=10, log_start=3)).hwm == -1
    assert kip227.after_response(c, R(hwm=12, log_start=3)) == CachedPartition("t", 0, 5, 12, 3)


def test_rotation_and_top_level_error():
    assert kip227.rotate(("a", "b", "c", "d"), ("b", "a")) == ("c", "d", "b", "a")
    assert kip227.rotate(("a", "b"), ("z",)) == ("a", "b")
    assert kip227.top_level_error_view("E", (("t", 0), ("t", 1))) == {("t", 0): "E", ("t", 1): "E"}


def test_eviction_rules():
    s = Session(1, 1, privileged=False, partitions=(CachedPartition("t", 0, 0),) * 3, created_ms=0, last_used_ms=100)
    f = Session(2, 1, privileged=True, partitions=(CachedPartition("t", 0, 0),) * 3, created_ms=0, last_used_ms=100)
    assert kip227.may_evict(s, True, 1, 101, 120)  # rule 1
    assert not kip227.may_evict(f, True, 1, 101, 120)
    assert kip227.may_evict(s, False, 1, 221, 120)  # rule 2: idle > eviction time
    assert not kip227.may_evict(s, False, 1, 220, 120)
    assert kip227.may_evict(s, False, 4, 121, 120)  # rule 3
    assert not kip227.may_evict(s, False, 3, 121, 120)
    assert not kip227.may_evict(s, False, 4, 120, 120)


def shard_test_cache():
    """FetchSessionTest.testSessionCache as facts: one FetchSessionCacheShard of 3 slots,
    eviction time 100 ms."""
    return SessionCache(3, 100, shards=1)


def create(cache, now, privileged, size, profile, new_id):
    parts = tuple(("t", i, 0) for i in range(size))
    return only(kip227.handle_request(cache, req(0, 0, parts, privileged=privileged, now=now), profile, new_id))


def ids(cache):
    return {s.id for s in cache.sessions}


def test_kafka_session_cache_vector():
    c = shard_test_cache()
    for sid, now, size in ((1, 0, 10), (2, 10, 20), (3, 20, 30)):
        _, c = create(c, now, False, size, KAFKA, sid)
    for now, size in ((30, 40), (40, 5)):
        resp, c = create(c, now, False, size, KAFKA, 99)
        assert resp.session_id == 0
    assert ids(c) == {1, 2, 3}
    _, c = only(kip227.handle_request(c, req(1, 1, parts=(), now=200), KAFKA))  # touch 1 at 200
    _, c = create(c, 210, False, 11, KAFKA, 4)
    assert ids(c) == {1, 3, 4}
    for sid, now in ((1, 400), (3, 390), (4, 400)):
        epoch = c.get(sid).epoch
        _, c = only(kip227.handle_request(c, req(sid, epoch, parts=(), now=now), KAFKA))
    _, c = create(c, 410, False, 50, KAFKA, 5)
    assert ids(c) == {3, 4, 5}
    resp, c = create(c, 410, False, 5, KAFKA, 98)
    assert resp.session_id == 0
    _, c = create(c, 410, True, 5, KAFKA, 6)
    assert ids(c) == {3, 5, 6}


def test_privileged_session_handling_vector():
    """FetchSessionTest.testPrivilegedSessionHandling as facts: 2 slots, 1000 ms."""
    c = SessionCache(2, 1000, shards=1)
    _, c = create(c, 0, True, 2, KAFKA, 1)
    _, c = create(c, 500, False, 2, KAFKA, 2)
    _, c = create(c, 1000, True, 2, KAFKA, 3)
    assert ids(c) == {1, 3}  # the follower evicted the consumer
    _, c = create(c, 1501, True, 2, KAFKA, 4)
    assert ids(c) == {3, 4}  # session 1 idle too long
    # the KIP text allows the same here
    k = SessionCache(2, 1000)
    _, k = create(k, 0, True, 2, KIP, 1)
    _, k = create(k, 500, False, 2, KIP, 2)
    _, k = create(k, 1000, True, 2, KIP, 3)
    assert ids(k) == {1, 3}


def test_kip_allows_any_eligible_victim():
    c = SessionCache(2, 100, (Session(1, 1, False, (), 0, 0), Session(2, 1, False, (), 0, 0)), shards=1)
    outs = kip227.admission_outcomes(c, True, 1, 50, KIP)
    assert outs == {("evict", 1), ("evict", 2)}
    assert kip227.admission_outcomes(c, True, 1, 50, KAFKA) == {("evict", 1)}
    assert kip227.admission_outcomes(c, False, 1, 50, KIP) == {("rejected", None)}
    assert kip227.admission_outcomes(SessionCache(3, 100, c.sessions), False, 1, 50, KIP) == {("free", None)}


sessions = st.lists(
    st.tuples(st.booleans(), st.integers(0, 5), st.integers(0, 300), st.integers(0, 300)), min_size=1, max_size=4
)


@settings(max_examples=150, deadline=None)
@given(sessions, st.integers(0, 6), st.integers(0, 400), st.sampled_from([KIP, KAFKA]))
def test_consumer_never_evicts_an_active_follower_session_unless_kip_rule3(existing, size, now, profile):
    cache = SessionCache(
        len(existing), 120,
        tuple(Session(i + 1, 1, p, (CachedPartition("t", 0, 0),) * n, min(c, u), max(c, u)) for i, (p, n, c, u) in enumerate(existing)),
        shards=1,
    )
    for kind, victim in kip227.admission_outcomes(cache, False, size, max(now, 300), profile):
        if kind != "evict":
            continue
        v = cache.get(victim)
        idle = max(now, 300) - v.last_used_ms > 120
        if v.privileged and not idle:
            assert profile is KIP and max(now, 300) - v.created_ms > 120 and size > v.size


def test_kafka_fixes_eviction_eligibility_when_a_session_was_last_used():
    """FetchSessionCacheShard.touch (4.3.1): a session enters the evictable sets only if it
    was older than the eviction time when last used. Created at 0, last used at 60,
    now 150 (eviction 100): old now, not stale, but not evictable in Kafka."""
    c = SessionCache(1, 100, (Session(1, 1, False, (), 0, 60),), shards=1)
    assert kip227.admission_outcomes(c, False, 5, 150, KIP) == {("evict", 1)}  # KIP rule 3
    assert kip227.admission_outcomes(c, False, 5, 150, KAFKA) == {("rejected", None)}
    touched = SessionCache(1, 100, (Session(1, 1, False, (), 0, 101),), shards=1)
    assert kip227.admission_outcomes(touched, False, 5, 150, KAFKA) == {("evict", 1)}
    assert kip227.admission_outcomes(touched, False, 0, 150, KAFKA) == {("rejected", None)}  # not more partitions


SHARD = MAX_INT32 // 8


def test_kafka_cache_is_eight_shards_of_slots_over_eight():
    """BrokerServer/FetchSessionCache (4.3.1): 8 shards of slots/8; a new session lands in
    a round-robin shard and evicts only there; shard of an id = id // (MAX_INT32 // 8)."""
    assert kip227.session_shard(1, 8) == 0 and kip227.session_shard(3 * SHARD + 1, 8) == 3
    assert kip227.session_shard(SHARD - 1, 8) == 0 and kip227.session_shard(SHARD, 8) == 1
    full0 = SessionCache(16, 100, (Session(1, 1, False, (), 0, 50), Session(2, 1, False, (), 0, 50)))
    assert kip227.admission_outcomes(full0, False, 1, 60, KIP) == {("free", None)}
    assert kip227.admission_outcomes(full0, False, 1, 60, KAFKA) == {("free", None), ("rejected", None)}
    assert kip227.admission_outcomes(full0, False, 1, 60, KAFKA, new_id=5) == {("rejected", None)}
    assert kip227.admission_outcomes(full0, False, 1, 60, KAFKA, new_id=3 * SHARD + 1) == {("free", None)}
    # the shard count can be pinned; fewer than 8 slots leaves every Kafka shard without room
    assert kip227.admission_outcomes(SessionCache(3, 100), False, 1, 0, KAFKA) == {("rejected", None)}
    assert kip227.admission_outcomes(SessionCache(3, 100), False, 1, 0, KIP) == {("free", None)}
    assert kip227.admission_outcomes(SessionCache(3, 100, shards=1), False, 1, 0, KAFKA) == {("free", None)}
    resp, after = only(kip227.handle_request(full0, req(0, 0, now=60), KAFKA, new_id=5))
    assert resp == kip227.SessionResponse("NONE", 0) and after == full0
    resp, after = only(kip227.handle_request(full0, req(0, 0, now=60), KAFKA, new_id=2 * SHARD + 7))
    assert resp == kip227.SessionResponse("NONE", 2 * SHARD + 7, True) and after.get(2 * SHARD + 7) is not None


def test_created_session_caches_fetch_offsets_and_rejection_is_plain_none():
    resp, c = only(kip227.handle_request(SessionCache(2, 100, shards=1), req(0, 0), new_id=3))
    assert [(p.topic, p.partition, p.fetch_offset) for p in c.get(3).partitions] == [("t", 0, 5), ("t", 1, 7)]
    full = SessionCache(0, 100, shards=1)
    assert only(kip227.handle_request(full, req(0, 0), new_id=3)) == (kip227.SessionResponse("NONE", 0), full)
    assert only(kip227.handle_request(c, req(0, -1))) == (kip227.SessionResponse("NONE", 0), c)
    _, emptied = only(kip227.handle_request(c, req(3, 1, parts=(), forgotten=(("t", 0), ("t", 1))), KAFKA))
    assert _ == kip227.SessionResponse("NONE", 0) and emptied.get(3) is None


def test_preferred_replica_zero_is_a_broker():
    cp = CachedPartition("t", 0, 0, hwm=5, log_start=0)
    assert kip227.must_include(cp, kip227.PartitionResponse(hwm=5, log_start=0, preferred_read_replica=0), KAFKA)
    assert not kip227.must_include(cp, kip227.PartitionResponse(hwm=5, log_start=0, preferred_read_replica=-1), KAFKA)
