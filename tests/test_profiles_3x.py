"""The kafka-3.3 ... kafka-3.9 profiles: the deviations read in their sources are known, the
4.x deviations nobody read for 3.x stay anomalies, and older lines fall back to kip."""
import pytest

from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from kipcheck.reference_model import profiles
from tests.support.histories import fetch, history, names, run

LINES = [f"kafka-3.{m}" for m in range(3, 10)]


@pytest.mark.parametrize("profile", LINES)
def test_read_deviations_are_known(profile):
    # response HWM sampled before the read, covered by the broker's next HWM (the deviation's bound)
    stale = history(fetch(8, records=[8, 9, 10], current_leader_epoch=3), fetch(11, hwm=11, current_leader_epoch=3))
    assert names(run(ConsumerFetchRule(), stale, profile)) == []
    assert names(run(ConsumerFetchRule(), stale, profile), True) == ["uncommitted-read"]
    above = history(fetch(12, hwm=10))  # NONE above the HWM (LocalLog.read)
    assert names(run(ConsumerFetchRule(), above, profile), True) == ["wrong-fetch-error"]
    bare = history(fetch(11, error="OFFSET_OUT_OF_RANGE", hwm=-1, start=-1))  # createLogReadResult(e)
    assert names(run(ConsumerFetchRule(), bare, profile), True) == ["wrong-fetch-error"]
    ofle = (3, "offsets_for_leader_epoch", {"broker": 2, "replica_id": -1, "topic": "t", "partition": 0,
                                            "leader_epoch": 3, "current_leader_epoch": 3},
            {"error": "NONE", "end_offset": 12, "leader_epoch": 3})
    assert names(run(HighWatermarkRule(), history(ofle, fetch(0, hwm=10, current_leader_epoch=3)), profile),
                 True) == ["wrong-fetch-error"]


@pytest.mark.parametrize("profile", LINES)
def test_just_outside_the_read_deviations_is_still_an_anomaly(profile):
    assert names(run(ConsumerFetchRule(), history(fetch(2, start=3)), profile)) == ["wrong-fetch-error"]
    # OUT_OF_RANGE inside [log start, HWM] is no known deviation on any line
    assert names(run(ConsumerFetchRule(), history(fetch(5, error="OFFSET_OUT_OF_RANGE", hwm=10)), profile)) \
        == ["wrong-fetch-error"]


@pytest.mark.parametrize("profile", LINES)
def test_a_follower_hwm_going_back_once_after_an_election_is_known_on_3x_within_its_bound(profile):
    """follower-hwm-follows-leader was read in every 3.x source jar (harness/profile_read.py):
    known within the 4.3 bound, an anomaly just outside it (a second drop in the epoch)."""
    from tests.support.histories import follower_history
    assert names(run(HighWatermarkRule(), follower_history(10, 10, 9, 9, 11), profile)) == []
    assert set(names(run(HighWatermarkRule(), follower_history(10, 10, 9, 9, 11), profile), known=True)) == {
        "hwm-regression"}
    assert set(names(run(HighWatermarkRule(), follower_history(10, 9, 11, 10), profile))) == {"hwm-regression"}


@pytest.mark.parametrize("profile", LINES)
def test_unread_4x_deviations_stay_anomalies_on_3x(profile):
    p = profiles.get(profile)
    for unread in (profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER, profiles.FOLLOWER_BOOTSTRAP_ABSENT,
                   profiles.KRAFT_FETCH_PARKS_WITHOUT_HWM):
        assert not p.allows(unread)


@pytest.mark.parametrize("profile", LINES)
def test_the_fetch_session_code_profile_read_found_is_known_on_3x(profile):
    """FetchSession.scala as 4.0 has it, found in every 3.x line by `kipcheck profile read`; the
    session cache in shards only from 3.8."""
    p = profiles.get(profile)
    for read in (profiles.EMPTY_SESSION_CLOSED, profiles.EVICT_SMALLEST, profiles.INCREMENTAL_EXTRA_PARTITIONS):
        assert p.allows(read)
    assert p.allows(profiles.SHARDED_SESSION_CACHE) == (int(profile.rsplit(".", 1)[1]) >= 8)


def test_versions_map_to_their_line_or_kip():
    assert profiles.for_version("3.3.2") == "kafka-3.3" and profiles.for_version("3.9.1") == "kafka-3.9"
    assert profiles.for_version("3.6.2") == "kafka-3.6"
    assert profiles.for_version("3.2.3") == "kip" and profiles.for_version("2.8.0") == "kip"  # no KRaft profile


@pytest.mark.parametrize("profile", ["kafka-3.3", "kafka-3.9"])
def test_an_error_only_partition_is_known_on_3x_and_nothing_new_is_not(profile):
    """The 3.3.1 answer that brought KIP-227's session code into the 3.x profiles: an incremental
    response carrying a partition whose only news is an error is `incremental-extra-partitions`;
    one carrying it with nothing new at all (no error, no preferred replica) stays an anomaly."""
    from kipcheck.checks.engine_local import check_records
    from tests.support.raw_protocol import S, opened, part, sess

    def found(h, known=False):
        v = check_records(h.records, profile=profile)
        return [ex for ex in v["known" if known else "anomalies"]["fetch-session-violation"]]

    def error(h, t):  # as the 3.3.1 broker answered: the partition's offsets unknown, its epoch not yet known
        return sess(h, t, 42, t // S, 42, [part(10, hwm=-1, start=-1, error="UNKNOWN_LEADER_EPOCH")], sent=[])

    errored = error(error(opened(), S), 2 * S)  # the second answer's only news is the error, again
    assert found(errored) == [] and [ex["deviations"] for ex in found(errored, known=True)] == [
        ["incremental-extra-partitions"]]
    assert found(errored) == found(sess(opened(), S, 42, 1, 42, [part(10, hwm=11)], sent=[]))  # news: accepted
    assert len(found(sess(opened(), S, 42, 1, 42, [part(10, hwm=10)], sent=[]))) == 1
