"""`tiered-read-out-of-range` at its bound (docs/findings.md section 1, docs/model.md): a follower
rebuilding its log from the tier (Kafka 4.3.1 TierStateMachine.buildRemoteLogAuxState) answers a
consumer fetch in its tiered range OFFSET_OUT_OF_RANGE with HWM and log start -1. Known under a
profile carrying the deviation only on a replica not proven leader, at an offset below the
leader's first EARLIEST_LOCAL (-4) answer after the fetch (same leader epoch and life), while
every earlier HWM of the replica in its life is at most that answer; a `wrong-fetch-error`
beyond each bound (just outside: one test each) and under `kip` always.

The run that showed it (corpus tiered seed 2, 2026-11-27) is no longer on this machine:
`test_the_seed_2_shape_*` rebuilds its records around the answer with the run's figures."""
import pytest

from kipcheck.checks.rules.base import DEVIATIONS
from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule
from kipcheck.reference_model import kip392, profiles
from tests.support.histories import fetch, history, names, run

T = profiles.TIERED_READ_OUT_OF_RANGE
KILL = lambda b: ("nemesis", "fault", {"fault": "kill", "targets": [b], "phase": "start"}, None)  # noqa: E731


def carrying():
    return [name for name, p in sorted(profiles.PROFILES.items()) if p.allows(T)]


def oor(offset, broker=2, epoch=3):
    return fetch(offset, error="OFFSET_OUT_OF_RANGE", hwm=-1, start=-1, broker=broker, current_leader_epoch=epoch)


def isr_meta(leader=1, epoch=3, broker=3):
    return (9, "metadata", {"broker": broker, "topic": "t", "partition": 0},
            {"leader": leader, "leader_epoch": epoch, "isr": [1, 2, 3], "replicas": [1, 2, 3]})


def list_offsets(timestamp, broker=1, offset=50, current_leader_epoch=3):
    inv = {"broker": broker, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "t", "partition": 0,
           "timestamp": timestamp, "current_leader_epoch": current_leader_epoch, "version": 11}
    return (3, "list_offsets", inv, {"error": "NONE", "offset": offset, "leader_epoch": current_leader_epoch})


def rebuild(offset=5, hwm_before=10, local_start=50, leader=1, before=(), after=None):
    """Follower 2 of leader 1's epoch 3 answers HWM `hwm_before`, then OFFSET_OUT_OF_RANGE -1/-1 at
    `offset`; `after` (default: leader 1's -4 answer `local_start`), then 2 shows log start 0."""
    after = [list_offsets(-4, broker=leader, offset=local_start)] if after is None else after
    return history(isr_meta(leader=leader), *before, fetch(0, hwm=hwm_before, current_leader_epoch=3), oor(offset),
                   *after, fetch(0, hwm=60, current_leader_epoch=3), isr_meta(leader=leader))


def wrong(records, profile, offset=None):
    return [a for a in run(ConsumerFetchRule(), records, profile) if a.name == "wrong-fetch-error"
            and (offset is None or a.details["fetch_offset"] == offset)]


def the_answer(records):
    return next(r["index"] for r in records if r["type"] == "ok" and r["value"].get("error") == "OFFSET_OUT_OF_RANGE")


def inside(records):
    """An anomaly under `kip`; known (this deviation alone, reported once) under each carrying profile."""
    assert names(wrong(records, "kip")) == ["wrong-fetch-error"]
    assert carrying() == ["kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3", "kafka-4.4"]  # profile read finds the code
    for p in carrying():
        found = wrong(records, p)
        assert names(found) == [] and names(found, known=True) == ["wrong-fetch-error"], (p, found)
        assert found[0].details[DEVIATIONS] == [T], found[0].details
        assert "tiered-read-out-of-range" in found[0].message
        assert the_answer(records) in found[0].indices


def outside(records):
    for p in ["kip", *carrying()]:
        found = wrong(records, p)
        assert names(found) == ["wrong-fetch-error"] and names(found, known=True) == [], (p, found)


# --- just inside --------------------------------------------------------------------------
def test_a_follower_answering_out_of_range_below_the_leaders_later_local_start_is_known():
    inside(rebuild())


def test_without_the_deviation_the_same_answer_is_a_wrong_fetch_error():
    """The follower's own answers prove 5 in [log start 0, LEO >= 10]: KIP-392 alone forbids it."""
    records = rebuild()
    found = wrong(records, "kip")
    assert len(found) == 1 and found[0].indices == tuple(sorted({the_answer(records) - 1, the_answer(records)}))
    assert "LEO >= 10, log start <= 0" in found[0].message


def test_an_answer_the_kip392_cases_already_explain_is_not_put_on_the_tier():
    """20 may be past the LEO (only HWM 10 proven): `out-of-range-without-offsets` alone, although
    the tiered bound would hold too; the tier is the explanation of last resort (findings section 5)."""
    found = wrong(rebuild(offset=20), "kafka-4.3")
    assert names(found) == [] and len(found) == 1
    assert found[0].details[DEVIATIONS] == [profiles.OUT_OF_RANGE_WITHOUT_OFFSETS]
    assert "tiered" not in found[0].message


# --- just outside, one bound each -----------------------------------------------------------
def test_on_the_epochs_leader_it_is_a_wrong_fetch_error():
    """A leader never runs TierStateMachine: broker 2 leads epoch 3 and answers -4 itself."""
    outside(rebuild(leader=2))


@pytest.mark.parametrize("offset,known", [(49, True), (50, False)])
def test_at_the_leaders_local_log_start_it_is_a_wrong_fetch_error(offset, known):
    """The follower restarted at most at 50 (its HWM 50 before proves 49 and 50 in its log)."""
    (inside if known else outside)(rebuild(offset=offset, hwm_before=50))


@pytest.mark.parametrize("hwm_before,known", [(50, True), (51, False)])
def test_an_earlier_hwm_above_the_leaders_local_log_start_is_a_wrong_fetch_error(hwm_before, known):
    """With HWM 51 before, the follower's log was past the leader's local log start: no rebuild."""
    (inside if known else outside)(rebuild(hwm_before=hwm_before))


def test_an_earlier_hwm_of_another_epoch_in_the_same_life_counts():
    before = [isr_meta(epoch=2), fetch(0, hwm=51, current_leader_epoch=2)]
    outside(rebuild(before=before))


def test_an_earlier_hwm_of_a_previous_life_does_not_count():
    inside(rebuild(before=[fetch(0, hwm=51, current_leader_epoch=3), KILL(2)]))


def test_without_a_leaders_local_log_start_after_the_fetch_it_is_a_wrong_fetch_error():
    outside(rebuild(after=[]))  # tiered storage not proven
    # the only -4 answer came before the fetch completed
    outside(rebuild(before=[list_offsets(-4, offset=50)], after=[]))


def test_a_local_log_start_of_another_epoch_or_leader_life_or_timestamp_is_no_proof():
    outside(rebuild(after=[isr_meta(epoch=4), list_offsets(-4, offset=50, current_leader_epoch=4)]))
    outside(rebuild(after=[KILL(1), list_offsets(-4, offset=50)]))  # the leader restarted in between
    outside(rebuild(after=[list_offsets(-2, offset=50)]))  # EARLIEST, not EARLIEST_LOCAL
    outside(rebuild(after=[list_offsets(-4, broker=3, offset=50)]))  # not the epoch's leader


def test_the_first_local_log_start_after_the_fetch_is_the_bound():
    """Local log starts only grow: a later, higher answer proves nothing about the follower's restart."""
    outside(rebuild(offset=30, hwm_before=30, after=[list_offsets(-4, offset=30), list_offsets(-4, offset=50)]))
    inside(rebuild(offset=30, hwm_before=30, after=[list_offsets(-4, offset=50), list_offsets(-4, offset=30)]))


# --- the shape of the run that showed it ------------------------------------------------------
def _seed_2(offset=104, later_local_start=3266):
    """kipcheck/2, leader 2 of epoch 0; broker 1 restarted (kill), answered HWM 109, then
    REPLICA_NOT_AVAILABLE at 104, then in a three-partition full fetch OFFSET_OUT_OF_RANGE -1/-1 at
    104 (history 23442/23445); leader 2's -4 answers 2992 before and 3266 after; broker 1 later
    served 104 from the tier with HWM 3206 and log start 0 (23451)."""
    def meta(broker):
        return (9, "metadata", {"broker": broker, "topic": "kipcheck", "partition": 2},
                {"leader": 2, "leader_epoch": 0, "isr": [1, 2], "replicas": [1, 2]})

    def lo(offset):
        inv = {"broker": 2, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "kipcheck",
               "partition": 2, "timestamp": -4, "current_leader_epoch": 0, "version": 11}
        return (3, "list_offsets", inv, {"error": "NONE", "offset": offset, "leader_epoch": 0})

    def one(offset, error, hwm, start, records=()):
        inv = {"broker": 1, "replica_id": -1, "rack": "rack-1", "session_id": 0, "session_epoch": -1, "version": 18,
               "topic": "kipcheck", "partition": 2, "fetch_offset": offset, "current_leader_epoch": 0}
        return (299, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "error": error,
                                    "high_watermark": hwm, "log_start_offset": start, "preferred_read_replica": -1,
                                    "records": [[o, f"v{o}"] for o in records]})

    parts = [{"topic": "kipcheck", "partition": p, "fetch_offset": o, "current_leader_epoch": 0}
             for p, o in ((0, 81), (1, 0), (2, offset))]
    answers = [{**parts[0], "error": "NONE", "high_watermark": 86, "last_stable_offset": 86, "log_start_offset": 0,
                "preferred_read_replica": -1, "records": [[o, f"v{o}"] for o in range(76, 204)]},
               {**parts[1], "error": "NONE", "high_watermark": 3120, "last_stable_offset": 3120, "log_start_offset": 0,
                "preferred_read_replica": -1, "records": [[o, f"v{o}"] for o in range(0, 204)]},
               {**parts[2], "error": "OFFSET_OUT_OF_RANGE", "high_watermark": -1, "last_stable_offset": -1,
                "log_start_offset": -1, "preferred_read_replica": -1, "records": []}]
    full = (299, "fetch", {"broker": 1, "replica_id": -1, "rack": "rack-1", "session_id": 0, "session_epoch": 0,
                           "version": 18, "partitions": parts},
            {"top_error": "NONE", "response_session_id": 7, "partitions": answers})
    return history(meta(1), meta(2), KILL(1), lo(2992), one(412, "NONE", 109, 0),
                   *[one(104, "REPLICA_NOT_AVAILABLE", -1, -1)] * 3, full, lo(later_local_start),
                   one(104, "NONE", 3206, 0, records=range(99, 204)), meta(1), meta(2))


def test_the_seed_2_shape_is_known_under_kafka_43_and_flagged_under_kip():
    records = _seed_2()
    flagged = wrong(records, "kip", 104)  # (412 above the HWM 109, NONE and empty: fetch-above-hwm-empty)
    assert len(flagged) == 1 and "at offset 104" in flagged[0].message and "LEO >= 109" in flagged[0].message
    full = [r["index"] for r in records if r["f"] == "fetch" and "partitions" in r["value"]]
    assert flagged[0].indices == tuple(full)
    assert names(wrong(records, "kafka-4.3")) == []
    known = wrong(records, "kafka-4.3", 104)
    assert len(known) == 1 and known[0].indices == tuple(full)
    assert known[0].details[DEVIATIONS] == [T]
    assert "local log start 3266" in known[0].message


def test_the_seed_2_shape_beyond_the_bound_is_flagged_under_kafka_43():
    """Had the leader's next local log start been at or below the follower's HWM 109 or the offset, no
    rebuild explains it."""
    assert names(wrong(_seed_2(later_local_start=108), "kafka-4.3", 104)) == ["wrong-fetch-error"]
    assert names(wrong(_seed_2(later_local_start=104), "kafka-4.3", 104)) == ["wrong-fetch-error"]


# --- the model --------------------------------------------------------------------------------
def test_the_model_predicate_holds_only_within_its_bound_and_never_under_kip():
    k43 = profiles.get("kafka-4.3")
    assert kip392.tiered_read_out_of_range(5, False, 50, 10, k43)
    assert kip392.tiered_read_out_of_range(5, None, 50, None, k43)  # leader unknown, no HWM before
    assert not kip392.tiered_read_out_of_range(5, True, 50, 10, k43)
    assert not kip392.tiered_read_out_of_range(50, False, 50, 10, k43)
    assert not kip392.tiered_read_out_of_range(5, False, 50, 51, k43)
    assert not kip392.tiered_read_out_of_range(5, False, None, 10, k43)  # tiered storage not proven
    assert not kip392.tiered_read_out_of_range(5, False, 50, 10, profiles.KIP)
    for name, p in profiles.PROFILES.items():
        assert kip392.tiered_read_out_of_range(5, False, 50, 10, p) == (name in carrying()), name
