"""The model as a client sees the cluster (the functions behind issue 10's section-3 checks):
KIP-392 replica selection with unknowns, KIP-227 as one client sees it, KIP-1023 ListOffsets
order over time."""
from hypothesis import assume, given, settings, strategies as st

from kipcheck.reference_model import kip227, kip392, kip1023, profiles
from kipcheck.reference_model.state import CachedPartition, PartitionState, Replica, Session, SessionCache, TieredLog

KIP, KAFKA = profiles.get("kip"), profiles.get("kafka-4.3")


# --- KIP-392: unknown log start / LEO may qualify --------------------------------------------

def state(isr=(1, 2, 3), leos=(None, None, None)):
    racks = {1: "a", 2: "b", 3: "b"}
    return PartitionState(1, 5, frozenset(isr), tuple(
        Replica(b, racks[b], log_start=None, leo=leo, hwm=None) for b, leo in zip((1, 2, 3), leos)))


def test_unknown_leo_may_be_the_most_caught_up():
    assert kip392.rack_aware_selector(state(), "b", 10) == {2, 3}
    assert kip392.rack_aware_selector(state(leos=(None, 20, None)), "b", 10) == {2, 3}
    assert kip392.rack_aware_selector(state(leos=(None, 20, 15)), "b", 10) == {2}
    assert kip392.rack_aware_selector(state(leos=(None, 5, None)), "b", 10) == {3}  # 2 ends below the offset


def test_out_of_isr_is_never_preferred():
    assert kip392.preferred_read_replica_outcomes(state(isr=(1, 3)), 1, -1, "b", 10) == {3}
    assert kip392.preferred_read_replica_outcomes(state(isr=(1,)), 1, -1, "b", 10) == {-1}
    assert kip392.preferred_read_replica_outcomes(state(), 2, -1, "b", 10) == {-1}  # not the leader


# --- KIP-227: one client's view ------------------------------------------------------------

def view(privileged=False, created=0, used=0):
    s = Session(42, 3, privileged, (CachedPartition("t", 0, 10, 10, 0),), created, used)
    return SessionCache(sessions=(s,))


def answers(outcomes):
    return {(r.error, r.session_id) for r, _, _ in outcomes}


def req(sid, epoch, now=1000, parts=()):
    return kip227.FetchRequest(sid, epoch, False, parts, (), now)


def test_observer_outcomes():
    assert kip227.observer_outcomes(view(), frozenset(), req(77, 1)) is None  # someone else's, maybe
    assert answers(kip227.observer_outcomes(view(), frozenset({77}), req(77, 1))) == {("FETCH_SESSION_ID_NOT_FOUND", 0)}
    assert answers(kip227.observer_outcomes(view(), frozenset(), req(42, 3))) == {
        ("NONE", 42), ("FETCH_SESSION_ID_NOT_FOUND", 0)}  # a consumer session may be evicted
    assert answers(kip227.observer_outcomes(view(), frozenset(), req(42, 4))) == {
        ("INVALID_FETCH_SESSION_EPOCH", 0), ("INVALID_FETCH_SESSION_EPOCH", 42), ("FETCH_SESSION_ID_NOT_FOUND", 0)}
    created = kip227.observer_outcomes(SessionCache(), frozenset(), req(0, 0, parts=(("t", 0, 5),)), new_id=9)
    assert answers(created) == {("NONE", 9), ("NONE", 0)}  # created, or refused by a full cache
    closed = kip227.observer_outcomes(view(), frozenset(), req(42, -1))
    assert answers(closed) == {("NONE", 0)} and all(42 in gone for _, _, gone in closed)


def test_eviction_of_a_young_busy_follower_session_is_not_allowed_by_the_kip():
    young = view(privileged=True, created=0, used=900)
    for profile in (KIP, KAFKA):
        assert answers(kip227.observer_outcomes(young, frozenset(), req(42, 3), profile)) == {("NONE", 42)}
    idle = view(privileged=True, created=0, used=0)
    assert kip227.may_be_evicted(idle.sessions[0], 200_000, 120_000, KIP)
    assert kip227.may_be_evicted(idle.sessions[0], 200_000, 120_000, KAFKA)
    assert not kip227.may_be_evicted(idle.sessions[0], 110_000, 120_000, KAFKA)


def test_an_hwm_proven_above_the_sessions_must_be_sent():
    """KIP-227 "Incremental Fetch Responses": the HWM changed since the session sent it."""
    at_end = CachedPartition("t", 0, fetch_offset=10, hwm=10)
    assert kip227.may_omit(at_end, True, False, KAFKA, hwm_floor=10)
    for profile in (KIP, KAFKA):
        assert not kip227.may_omit(at_end, True, True, profile, hwm_floor=11)  # no size limit excuses it
    assert kip227.may_omit(CachedPartition("t", 0, fetch_offset=10, hwm=-1), False, False, KIP, hwm_floor=11)


def test_may_omit():
    below = CachedPartition("t", 0, fetch_offset=5, hwm=10)
    assert kip227.may_omit(below, False, False, KIP)  # KIP-392 case 2: the follower may not hold it
    assert not kip227.may_omit(below, False, True, KIP)  # records at that offset were seen
    assert not kip227.may_omit(below, False, False, KAFKA)  # hwm-capped-at-leo: it holds them
    assert kip227.may_omit(below, True, True, KAFKA)  # the response may have been full
    assert kip227.may_omit(CachedPartition("t", 0, fetch_offset=10, hwm=10), False, True, KAFKA)


# --- KIP-1023: ListOffsets over time ---------------------------------------------------------

def answers_of(log: TieredLog, profile) -> dict:
    out = {k: kip1023.list_offsets(log, ts, iso, -1, profile) for k, ts, iso in (
        ("log_start", -2, "read_uncommitted"), ("local_log_start", -4, "read_uncommitted"),
        ("last_tiered", -5, "read_uncommitted"), ("pending_upload", -6, "read_uncommitted"),
        ("lso", -1, "read_committed"), ("hwm", -1, "read_uncommitted"))}
    return out


@st.composite
def growing_logs(draw):
    """Two leader states of one epoch, the second grown from the first."""
    n = st.integers(0, 30)
    ls, dl, dy, dh, dz = (draw(n) for _ in range(5))
    lt = draw(st.integers(-1, ls + dl + dy))
    first = TieredLog(ls, ls + dl, ls + dl + dy, ls + dl + dy + dh + dz, ls + dl + dy + dh, last_tiered=lt)
    g = [draw(n) for _ in range(6)]
    ls2 = ls + g[0]
    local2 = max(ls2, first.local_log_start + g[1])
    lso2 = max(local2, first.lso + g[2])
    hwm2 = max(lso2, first.hwm + g[3])
    lt2 = draw(st.integers(lt, lso2))
    second = TieredLog(ls2, local2, lso2, max(hwm2, first.leo + g[4]), hwm2, last_tiered=lt2)
    return first, second


@settings(max_examples=200, deadline=None)
@given(growing_logs(), st.sampled_from(["kip", "kafka-4.3"]))
def test_answers_of_a_growing_log_are_consistent(logs, profile):
    first, second = logs
    assume(profile == "kafka-4.3" or first.last_tiered + 1 >= first.log_start)  # the KIP's -6 fallback aside
    assume(profile == "kafka-4.3" or second.last_tiered + 1 >= second.log_start)
    a, b = answers_of(first, profile), answers_of(second, profile)
    for k1, v1 in a.items():
        for k2, v2 in b.items():
            assert kip1023.answers_consistent(k1, v1, k2, v2, profile), (k1, v1, k2, v2)


@settings(max_examples=200, deadline=None)
@given(growing_logs(), st.sampled_from(["kip", "kafka-4.3"]), st.integers(1, 5))
def test_a_quantity_going_back_is_inconsistent(logs, profile, back):
    first, _ = logs
    a = answers_of(first, profile)
    for k, v in a.items():
        assume(v >= back)
        assert not kip1023.answers_consistent(k, v, k, v - back, profile)


def test_order_closure():
    order = kip1023.offset_order("kip")
    assert ("log_start", "hwm", 0) in order and ("pending_upload", "lso", 1) in order
    assert ("log_start", "pending_upload", 0) not in order
    assert ("log_start", "pending_upload", 0) in kip1023.offset_order("kafka-4.3")
