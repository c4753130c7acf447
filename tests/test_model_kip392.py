"""KIP-392 rules of the reference model: cases 1-4, selectors, OffsetsForLeaderEpoch, resets."""
import pytest
from hypothesis import assume, given, settings, strategies as st

from kipcheck.reference_model import kip392, profiles
from kipcheck.reference_model.state import PartitionState, Replica

KIP, KAFKA = profiles.get("kip"), profiles.get("kafka-4.3")


def outcomes(offset, s=2, e=10, h=6, profile=KIP):
    return kip392.consumer_fetch_outcomes(Replica(1, log_start=s, leo=e, hwm=h), offset, profile)


@pytest.mark.parametrize("offset,case", [(1, kip392.CASE3), (2, kip392.READABLE), (5, kip392.READABLE),
                                         (6, kip392.CASE1), (10, kip392.CASE1), (11, kip392.CASE4)])
def test_cases_on_in_sync_replica(offset, case):
    assert kip392.classify_fetch_offset(offset, 2, 10, 6) == case


def test_case2_and_at_end():
    assert kip392.classify_fetch_offset(4, 0, 4, 8) == kip392.CASE2
    assert kip392.classify_fetch_offset(7, 0, 4, 8) == kip392.CASE2
    assert kip392.classify_fetch_offset(8, 0, 4, 8) == kip392.CASE4
    assert kip392.classify_fetch_offset(5, 0, 5, 5) == kip392.AT_END


def test_case_errors_under_kip():
    assert {o.error for o in outcomes(7)} == {"OFFSET_NOT_AVAILABLE"}
    assert {o.error for o in outcomes(1)} == {"OFFSET_OUT_OF_RANGE"}
    (oor,) = outcomes(12)
    assert (oor.error, oor.hwm, oor.log_start) == ("OFFSET_OUT_OF_RANGE", 6, 2)  # carries log start and HWM
    (ok,) = outcomes(3)
    assert (ok.error, ok.records_below, ok.hwm, ok.log_start) == ("NONE", 6, 6, 2)


def test_kafka_answers_empty_between_hwm_and_leo_and_out_of_range_without_offsets():
    # the profile widens the KIP: Kafka's answers beside the KIP's, never instead of them
    assert {(o.error, o.records_below, o.hwm) for o in outcomes(7, profile=KAFKA)} == {
        ("NONE", 7, 6), ("OFFSET_NOT_AVAILABLE", 7, None)}
    assert {(o.hwm, o.log_start) for o in outcomes(12, profile=KAFKA)} == {(-1, -1), (6, 2)}


def test_a_follower_in_case1_may_answer_the_kips_offset_not_available_under_every_profile():
    """Issue 21 §3: under kafka-4.3 the KIP's own answer for case 1 was flagged wrong-fetch-error."""
    r = Replica(2, log_start=0, leo=10, hwm=6)
    for name in profiles.PROFILES:
        assert "OFFSET_NOT_AVAILABLE" in {o.error for o in kip392.consumer_fetch_outcomes(r, 8, name)}, name


def test_case2_stays_the_kips_answer_under_kafka_whose_hwm_is_capped():
    """`hwm-capped-at-leo` only removes states (Kafka never reaches case 2); a profile never
    forbids the KIP's answer, so case 2 keeps OFFSET_NOT_AVAILABLE under kafka-4.3 too."""
    r = Replica(1, log_start=0, leo=4, hwm=8)
    assert {o.error for o in kip392.consumer_fetch_outcomes(r, 6, KIP)} == {"OFFSET_NOT_AVAILABLE"}
    assert {o.error for o in kip392.consumer_fetch_outcomes(r, 6, KAFKA)} == {"OFFSET_NOT_AVAILABLE"}
    assert kip392.follower_learns_hwm(Replica(2, leo=4, hwm=0), 8, KIP).hwm == 8
    assert kip392.follower_learns_hwm(Replica(2, leo=4, hwm=0), 8, KAFKA).hwm == 4


def test_unknown_leo_allows_both_case1_and_case4():
    r = Replica(1, log_start=0, leo=None, hwm=5)
    assert {o.error for o in kip392.consumer_fetch_outcomes(r, 7, KIP)} == {"OFFSET_NOT_AVAILABLE", "OFFSET_OUT_OF_RANGE"}
    assert "NONE" not in {o.error for o in kip392.consumer_fetch_outcomes(r, 7, KIP)}
    assert {o.error for o in kip392.consumer_fetch_outcomes(r, 5, KIP)} >= {"NONE"}


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.integers(0, 25), st.sampled_from([KIP, KAFKA]))
def test_reads_never_reach_hwm(s, e, h, offset, profile):
    """Committed-only reads: no allowed outcome returns an offset >= HWM (or >= LEO)."""
    e, h = max(e, s), max(h, s)
    for o in kip392.consumer_fetch_outcomes(Replica(1, log_start=s, leo=e, hwm=h), offset, profile):
        assert o.records_below <= max(offset, h)
        if o.records_below > offset:
            assert o.error == "NONE" and s <= offset < min(h, e)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30))
def test_hwm_never_exceeds_leo_under_kafka(leo, leader_hwm, start):
    start = min(start, leo)
    r = kip392.follower_learns_hwm(Replica(2, log_start=start, leo=leo, hwm=start), leader_hwm, KAFKA)
    assert start <= r.hwm <= leo


def part(leader=1, isr=(1, 2, 3), **leos):
    reps = (Replica(1, "a", 0, leos.get("l1", 10), 8), Replica(2, "b", 0, leos.get("l2", 10), 8),
            Replica(3, "b", leos.get("s3", 0), leos.get("l3", 9), 8), Replica(4, "c", 0, 10, 8))
    return PartitionState(leader, 5, frozenset(isr), reps)


def test_rack_aware_selector_vectors():
    # ReplicaSelectorTest facts: same-rack replica chosen, most caught-up; leader when in rack; none -> leader
    assert kip392.rack_aware_selector(part(), "b", 5) == {2}
    assert kip392.rack_aware_selector(part(l2=9, l3=9), "b", 5) == {2, 3}
    assert kip392.rack_aware_selector(part(), "a", 5) == {1}
    assert kip392.rack_aware_selector(part(), "c", 5) == {1}  # 4 not in ISR
    assert kip392.rack_aware_selector(part(), None, 5) == {1}
    assert kip392.rack_aware_selector(part(), "", 5) == {1}
    assert kip392.rack_aware_selector(part(isr=(1, 3)), "b", 5) == {3}
    assert kip392.rack_aware_selector(part(isr=(1, 3), s3=6), "b", 5) == {1}  # log start above fetch offset
    assert kip392.rack_aware_selector(part(l2=4, l3=4), "b", 5) == {1}  # LEO below fetch offset
    assert kip392.rack_aware_selector(part(l2=5, l3=4), "b", 5) == {2}  # fetch offset == LEO is eligible
    assert kip392.leader_selector(part(), "b", 5) == {1}


def test_preferred_read_replica_field():
    p = part()
    assert kip392.preferred_read_replica_outcomes(p, 1, -1, "b", 5) == {2}
    assert kip392.preferred_read_replica_outcomes(p, 1, -1, "a", 5) == {-1}  # leader sent as -1
    assert kip392.preferred_read_replica_outcomes(p, 2, -1, "b", 5) == {-1}  # only the leader selects
    assert kip392.preferred_read_replica_outcomes(p, 1, 2, "b", 5) == {-1}  # not for followers
    assert kip392.preferred_read_replica_outcomes(p, 1, -1, "b", 5, "LeaderSelector") == {-1}


def leader_state(hwm=8, leo=12, pending=False):
    return PartitionState(1, 3, frozenset({1, 2}), (Replica(1, leo=leo, hwm=hwm), Replica(2, leo=leo, hwm=hwm)), pending)


EPOCHS = ((0, 0), (2, 4), (3, 7))


def test_epoch_end_offset():
    assert kip392.epoch_end_offset(EPOCHS, 12, 0) == (0, 4)
    assert kip392.epoch_end_offset(EPOCHS, 12, 1) == (0, 4)
    assert kip392.epoch_end_offset(EPOCHS, 12, 2) == (2, 7)
    assert kip392.epoch_end_offset(EPOCHS, 12, 3) == (3, 12)
    assert kip392.epoch_end_offset(((1, 0),), 12, 0) == (-1, -1)


def test_offsets_for_leader_epoch_capped_for_consumers_only():
    (c,) = kip392.offsets_for_leader_epoch(leader_state(), 1, EPOCHS, 3, True, KIP)
    assert (c.error, c.leader_epoch, c.end_offset) == ("NONE", 3, 8)
    (r,) = kip392.offsets_for_leader_epoch(leader_state(), 1, EPOCHS, 3, False, KIP)
    assert r.end_offset == 12
    (k,) = kip392.offsets_for_leader_epoch(leader_state(), 1, EPOCHS, 3, True, KAFKA)
    assert k.end_offset == 12
    (old,) = kip392.offsets_for_leader_epoch(leader_state(), 1, EPOCHS, 2, True, KIP)
    assert old.end_offset == 7
    (pending,) = kip392.offsets_for_leader_epoch(leader_state(pending=True), 1, EPOCHS, 3, True, KIP)
    assert pending.error == "OFFSET_NOT_AVAILABLE"
    (older,) = kip392.offsets_for_leader_epoch(leader_state(pending=True), 1, EPOCHS, 2, True, KIP)
    assert older.error == "NONE"
    (nl,) = kip392.offsets_for_leader_epoch(leader_state(), 2, EPOCHS, 3, True, KIP)
    assert nl.error == "NOT_LEADER_OR_FOLLOWER"


def test_consumer_reset_and_out_of_range_handling():
    serving, leader = Replica(2, log_start=5, hwm=9), Replica(1, log_start=3, hwm=11)
    assert kip392.reset_offset("earliest", serving, leader) == 5
    assert kip392.reset_offset("latest", serving, leader) == 11
    with pytest.raises(LookupError):
        kip392.reset_offset("none", serving, leader)
    with pytest.raises(ValueError):
        kip392.reset_offset("sideways", serving, leader)
    assert kip392.out_of_range_action(4, 5, True) == "reset"
    assert kip392.out_of_range_action(5, 5, True) == "validate"
    assert kip392.out_of_range_action(9, 5, False) == "reset"
    E = kip392.EpochEndOffset
    assert kip392.validation_result(10, 3, E("NONE", 3, 10)) == "continue"
    assert kip392.validation_result(10, 3, E("NONE", 3, 9)) == "truncated"
    assert kip392.validation_result(10, 3, E("NONE", 2, 12)) == "truncated"
    assert kip392.validation_result(10, 3, E("OFFSET_NOT_AVAILABLE")) == "retry"


def test_follower_fetch_reads_uncommitted_up_to_leo():
    (o,) = kip392.follower_fetch_outcomes(Replica(1, log_start=2, leo=10, hwm=6), 7)
    assert (o.error, o.records_below) == ("NONE", 10)
    assert {o.error for o in kip392.follower_fetch_outcomes(Replica(1, log_start=2, leo=10, hwm=6), 11)} == {"OFFSET_OUT_OF_RANGE"}
    assert {o.error for o in kip392.follower_fetch_outcomes(Replica(1, log_start=2, leo=10, hwm=6), 1)} == {"OFFSET_OUT_OF_RANGE"}
    assert {o.error for o in kip392.follower_fetch_outcomes(Replica(1, log_start=2, leo=10, hwm=6), 10)} == {"NONE"}


def test_follower_fetch_bounds_and_broker_zero():
    """KIP-392 "Follower Fetching": replication may start exactly at the log start and at the
    LEO; an out-of-range answer returns no records. Broker id 0 is a replica, not a consumer."""
    leader = Replica(1, log_start=3, leo=9, hwm=7)
    assert kip392.follower_fetch_outcomes(leader, 3) == {kip392.FetchOutcome("NONE", 9, 7, 3)}
    assert kip392.follower_fetch_outcomes(leader, 9) == {kip392.FetchOutcome("NONE", 9, 7, 3)}
    (oor,) = kip392.follower_fetch_outcomes(leader, 2)
    assert oor.error == "OFFSET_OUT_OF_RANGE" and oor.records_below == 2
    assert not oor.matches("OFFSET_OUT_OF_RANGE", [2], None, None)
    ps = PartitionState(1, 0, frozenset({0, 1}), (Replica(1, "a", 0, 10, 8), Replica(0, "b", 0, 10, 8)))
    assert kip392.preferred_read_replica_outcomes(ps, 1, 0, "b", 4) == {-1}  # follower 0 asks: no preference
    assert kip392.preferred_read_replica_outcomes(ps, 1, -1, "b", 4) == {0}
    assert kip392.eligible_read_replicas(ps, 0) == ps.replicas  # log start <= offset, inclusive


def test_fetch_outcome_matching():
    o = kip392.FetchOutcome("NONE", 5, 8, 2)
    assert o.matches("NONE", [3, 4], 8, 2)
    assert not o.matches("NONE", [5], 8, 2)  # records only below records_below
    assert not o.matches("NONE", [], 9, 2) and not o.matches("NONE", [], 8, 1)
    assert not o.matches("OFFSET_OUT_OF_RANGE", [], 8, 2)
    assert kip392.FetchOutcome("NONE", 5).matches("NONE", [], 123, 45)  # None: any value


def test_epoch_zero_is_capped_for_consumers():
    """OffsetsForLeaderEpoch: epoch 0 is a real epoch (only -1 means none found)."""
    ps = PartitionState(1, 3, frozenset({1}), (Replica(1, "a", 0, 12, 5),))
    epochs = ((0, 0), (3, 7))
    assert kip392.offsets_for_leader_epoch(ps, 1, epochs, 0, True) == {kip392.EpochEndOffset("NONE", 0, 5)}
    assert kip392.offsets_for_leader_epoch(ps, 1, epochs, 0, True, KAFKA) == {kip392.EpochEndOffset("NONE", 0, 7)}
    assert kip392.offsets_for_leader_epoch(ps, 1, ((2, 0),), 1, True) == {kip392.EpochEndOffset("NONE", -1, -1)}


def test_reset_errors_name_the_policy():
    r = Replica(1)
    with pytest.raises(LookupError, match="none"):
        kip392.reset_offset("none", r, r)
    with pytest.raises(ValueError, match="'sideways'"):
        kip392.reset_offset("sideways", r, r)


def test_records_committed_against_reported_hwm():
    from kipcheck.reference_model import kip392, profiles
    kip, kafka = profiles.get("kip"), profiles.get("kafka-4.3")
    assert kip392.records_committed([5, 9], 10, kip)
    assert not kip392.records_committed([9, 10], 10, kip)
    # Kafka: the reported HWM may predate the read; a later HWM of the replica must cover 10
    assert kip392.records_committed([9, 10], 10, kafka, later_hwms=((11, True),))
    assert kip392.records_committed([9, 10], 10, kafka, later_hwms=())  # never asked again: nothing bounds it
    assert not kip392.records_committed([9, 10], 10, kafka, later_hwms=((10, True),))  # not above 10
    assert not kip392.records_committed([9, 10], 10, kafka, later_hwms=((12, False), (10, True)))  # contradicted
    assert kip392.records_committed([9, 10], 10, kafka, later_hwms=((12, False), (10, False)))  # overlapping: no proof
    assert not kip392.records_committed([9, 10], 10, kip, later_hwms=((11, True),))
    assert kip392.records_committed([99], -1, kip) and kip392.records_committed([99], None, kip)


def test_a_read_value_is_committed_only_if_no_other_record_was_committed_at_its_offset():
    assert kip392.read_value_committed("a", ()) and kip392.read_value_committed("a", {"a"})
    assert not kip392.read_value_committed("a", {"b"}) and not kip392.read_value_committed("a", {"a", "b"})


def test_hwm_may_go_back_once_on_a_known_follower_after_an_epoch_change_under_kafka():
    from kipcheck.reference_model import kip392, profiles
    kip, kafka = profiles.get("kip"), profiles.get("kafka-4.3")
    assert kip392.hwm_may_go_back(False, kafka, after_epoch_change=True)
    assert not kip392.hwm_may_go_back(False, kafka)  # no election seen
    assert not kip392.hwm_may_go_back(False, kafka, after_epoch_change=True, rose_in_epoch=True)
    assert not kip392.hwm_may_go_back(False, kafka, after_epoch_change=True, back_in_epoch=True)
    assert not kip392.hwm_may_go_back(True, kafka, after_epoch_change=True)
    assert not kip392.hwm_may_go_back(None, kafka, after_epoch_change=True)
    assert not kip392.hwm_may_go_back(False, kip, after_epoch_change=True)


def test_log_bounds_remove_the_leo_that_explained_an_answer():
    unknown = Replica(1, log_start=None, leo=None, hwm=None)
    errors = lambda offset, b, p=KAFKA: {o.error for o in kip392.consumer_fetch_outcomes(unknown, offset, p, b)}
    # OFFSET_OUT_OF_RANGE at 5 needs LEO < 5 or log start > 5
    assert "OFFSET_OUT_OF_RANGE" in errors(5, kip392.LogBounds(leo_min=5, log_start_max=None))
    assert "OFFSET_OUT_OF_RANGE" not in errors(5, kip392.LogBounds(leo_min=6, log_start_max=5))
    # NONE above the HWM needs LEO >= the offset
    assert "NONE" in errors(1000, kip392.LogBounds(leo_max=1000))
    assert "NONE" not in errors(1001, kip392.LogBounds(leo_max=1000))
    assert kip392.epoch_end_offset_possible(1000, 1000) and not kip392.epoch_end_offset_possible(1001, 1000)
    assert kip392.epoch_end_offset_possible(10**9, None)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12), st.integers(0, 15), st.sampled_from([KIP, KAFKA]),
       st.integers(0, 4), st.integers(0, 4), st.integers(0, 4))
def test_bounds_keep_every_answer_of_a_log_inside_them(s, e, h, offset, profile, below, above, start_slack):
    """A log inside the bounds gives an answer the bounded model (with the log unknown) allows."""
    assume(s <= e and s <= h)
    lo, hi, smax = max(e - below, 0), e + above, s + start_slack
    h = min(h, e) if profile is KAFKA else h
    bounds = kip392.LogBounds(leo_min=lo, leo_max=hi, log_start_max=smax)
    unknown = Replica(1, log_start=None, leo=None, hwm=h)
    allowed = kip392.consumer_fetch_outcomes(unknown, offset, profile, bounds)
    for o in kip392.consumer_fetch_outcomes(Replica(1, log_start=s, leo=e, hwm=h), offset, profile):
        assert any(a.error == o.error and (a.hwm is None or a.hwm == o.hwm) for a in allowed)


_maybe = lambda hi=30: st.one_of(st.none(), st.integers(0, hi))  # noqa: E731


@settings(max_examples=400, deadline=None)
@given(_maybe(), _maybe(), _maybe(), st.integers(0, 35), _maybe(), _maybe(), _maybe(), _maybe())
def test_every_profile_allows_at_least_what_the_kip_allows(s, e, h, offset, leo_min, leo_max, start_max, hwm_max):
    """Issue 21 §3: a release profile widens what the KIP allows, never forbids what it requires.
    For every state (known or unknown log start, LEO, HWM; any bounds), every profile's allowed
    consumer-fetch answers include every answer the `kip` profile allows."""
    replica = Replica(1, log_start=s, leo=e, hwm=h)
    bounds = kip392.LogBounds(leo_min=leo_min, leo_max=leo_max, log_start_max=start_max, hwm_max=hwm_max)
    kip = kip392.consumer_fetch_outcomes(replica, offset, KIP, bounds)
    for name in profiles.PROFILES:
        assert kip <= kip392.consumer_fetch_outcomes(replica, offset, name, bounds), name
    for case in (kip392.READABLE, kip392.AT_END, kip392.CASE1, kip392.CASE2, kip392.CASE3, kip392.CASE4):
        for name in profiles.PROFILES:
            assert kip392.kip_case_outcomes(case, offset, s or 0, h or 0) <= kip392.fetch_case_outcomes(
                case, offset, s or 0, h or 0, profiles.get(name)), (case, name)


def test_the_partitions_leo_bound_bounds_every_replicas_hwm():
    """KIP-392 "High watermark propagation": OFFSET_NOT_AVAILABLE far above every LEO the
    partition's writes allow is no case 2 (a HWM above the fetch offset), under every profile."""
    unknown = Replica(2, log_start=None, leo=None, hwm=None)
    bounds = kip392.partition_log_bounds(1000)
    for name in profiles.PROFILES:
        assert "OFFSET_NOT_AVAILABLE" not in {o.error for o in kip392.consumer_fetch_outcomes(unknown, 10**9, name, bounds)}
        assert "OFFSET_NOT_AVAILABLE" in {o.error for o in kip392.consumer_fetch_outcomes(unknown, 10**9, name)}


def test_an_in_sync_followers_leo_reaches_the_leaders_hwm():
    assert kip392.leo_reached_leader_hwm(120, in_isr=True) == 120
    assert kip392.leo_reached_leader_hwm(120, in_isr=False) is None
    assert kip392.leo_reached_leader_hwm(-1, in_isr=True) is None


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 60), st.sampled_from([None, False, True]), _maybe(60), _maybe(60))
def test_a_tiered_read_out_of_range_is_accepted_only_by_its_profile_and_within_its_bound(
        offset, is_leader, local_start, hwm_before):
    """KIP-405 with KIP-392: `kip` never accepts the follower's OFFSET_OUT_OF_RANGE in its tiered
    range; a profile accepts it only off the leader, below a known leader local log start that no
    earlier HWM exceeds, and then also at any lower offset or earlier HWM (the bound only narrows)."""
    for name, p in profiles.PROFILES.items():
        ok = kip392.tiered_read_out_of_range(offset, is_leader, local_start, hwm_before, p)
        assert not kip392.tiered_read_out_of_range(offset, is_leader, local_start, hwm_before, KIP)
        assert ok == (p.allows(profiles.TIERED_READ_OUT_OF_RANGE) and is_leader is not True
                      and local_start is not None and offset < local_start
                      and (hwm_before is None or hwm_before <= local_start)), name
        if ok:
            assert kip392.tiered_read_out_of_range(max(offset - 1, 0), is_leader, local_start, hwm_before, p)
            assert kip392.tiered_read_out_of_range(offset, is_leader, local_start, None, p)
