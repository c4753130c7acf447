import json

import pytest
from hypothesis import given, settings, strategies as st

from kipcheck.reference_model import kip1023, kip1166
from kipcheck.reference_model.scenario import replay
from kipcheck.reference_model.state import MAX_INT64, TieredLog

LOG = TieredLog(log_start=0, local_log_start=60, lso=105, leo=120, hwm=110, remote_log_start=0, last_tiered=79, max_timestamp_offset=119)


def test_list_offsets_timestamps():
    assert [kip1023.list_offsets(LOG, t) for t in (-2, -3, -4, -5, -6)] == [0, 119, 60, 79, 80]
    assert kip1023.list_offsets(LOG, -1) == 110
    assert kip1023.list_offsets(LOG, -1, "read_committed") == 105
    assert kip1023.list_offsets(LOG, -1, replica_id=2) == 120
    assert kip1023.earliest_pending_upload(TieredLog(0, 0, 5, 5, 5)) == -1
    with pytest.raises(ValueError):
        kip1023.list_offsets(LOG, -7)


def test_inequalities_each_detected():
    assert kip1023.inequality_violations(LOG) == ()
    assert kip1023.inequality_violations(TieredLog(0, 60, 105, 100, 100)) == ("Lz>=Ly",)
    assert kip1023.inequality_violations(TieredLog(0, 106, 105, 120, 110)) == ("Ly>=Lx",)
    assert kip1023.inequality_violations(TieredLog(0, 60, 105, 120, 110, 0, 106)) == ("Ly>=Ry",)
    assert kip1023.inequality_violations(TieredLog(0, 60, 105, 120, 110, 80, 79)) == ("Ry>=Rx",)
    assert kip1023.inequality_violations(TieredLog(0, 60, 105, 120, 110, 0, 105)) == ()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=5, max_size=5))
def test_sorted_offsets_satisfy_inequalities(xs):
    rx, ry, lx, ly, lz = sorted(xs)[0], sorted(xs)[1], sorted(xs)[1], sorted(xs)[3], sorted(xs)[4]
    log = TieredLog(rx, lx, ly, lz, ly, rx, ry)
    assert kip1023.inequality_violations(log) == ()
    assert kip1023.earliest_pending_upload(log) == ry + 1


def test_bootstrap_and_fallbacks():
    B = kip1023.Bootstrap
    f = kip1023.follower_bootstrap
    assert f("OFFSET_MOVED_TO_TIERED_STORAGE", True, True, 0, 60, 80) == B("fetch", 80, 0)
    assert f("OFFSET_OUT_OF_RANGE", True, True, 0, 60, -1) == B("retry")
    assert f("OFFSET_OUT_OF_RANGE", True, True, 60, 60, -1) == B("fetch", 60, 60)
    assert f("OFFSET_OUT_OF_RANGE", True, True, 50, 60, 30) == B("fetch", 60, 60)
    assert f("OFFSET_OUT_OF_RANGE", True, True, 50, 60, 50) == B("fetch", 50, 50)
    assert f("OFFSET_OUT_OF_RANGE", False, True, 50, 60, 80) == B("fetch", 50, 50)
    assert f("OFFSET_MOVED_TO_TIERED_STORAGE", True, False, 50, 60, 80) == B("fetch", 60, 50)
    with pytest.raises(ValueError):
        f("NONE", False, True, 0, 0, 0)


def test_kip1166_field_and_parking():
    assert kip1166.remote_hwm_meaning(-1) == "unknown"
    assert kip1166.remote_hwm_meaning(0) == "known"
    assert kip1166.remote_hwm_meaning(MAX_INT64) == "not-supported"
    assert kip1166.remote_hwm_meaning(MAX_INT64 - 1) == "known"
    with pytest.raises(ValueError):
        kip1166.remote_hwm_meaning(-2)
    assert kip1166.should_park(True, 10, 10)
    assert not kip1166.should_park(True, 9, 10)
    assert not kip1166.should_park(False, 10, 10)
    assert not kip1166.should_park(True, -1, 0)
    assert kip1166.should_park(True, MAX_INT64, 10**12)
    assert kip1166.complete_on_hwm_change((4, 5, 6), 5) == (True, False, False)
    assert kip1166.field_considered("kraft") and not kip1166.field_considered("consumer")
    assert kip1166.propagation_within_bound({"1": 0, "2": 500}, 500)
    assert not kip1166.propagation_within_bound({"1": 0, "2": 501}, 500)
    assert kip1166.propagation_within_bound({}, 0)


def test_documented_scenarios_replay():
    from kipcheck.reference_model.scenario import SHIPPED as docs
    sc = json.loads((docs / "kip392-fetch-above-hwm.json").read_text())
    kip, kafka = replay(sc, "kip"), replay(sc, "kafka-4.3")
    assert [o["error"] for o in kip[0]["allowed"]] == ["OFFSET_NOT_AVAILABLE"]
    # the profile widens the KIP: Kafka's NONE and no records beside the KIP's OFFSET_NOT_AVAILABLE
    assert sorted((o["error"], o["records_below"]) for o in kafka[0]["allowed"]) == [("NONE", 9),
                                                                                    ("OFFSET_NOT_AVAILABLE", 9)]
    assert kip[1]["allowed"][0]["preferred_read_replica"] == 2
    assert kip[4]["allowed"] == [{"error": "NONE", "leader_epoch": 3, "end_offset": 10}]
    assert kafka[4]["allowed"][0]["end_offset"] == 12
    s = replay(json.loads((docs / "kip227-session.json").read_text()))
    assert s[3]["allowed"] == [{"error": "NONE", "session_id": 7, "created": True}]
    assert s[4]["allowed"][0]["error"] == "FETCH_SESSION_ID_NOT_FOUND"
    t = replay(json.loads((docs / "kip1023-tiered.json").read_text()))
    assert [x["allowed"][0].get("offset") for x in t[:5]] == [0, 105, 60, 79, 80]
    json.dumps(t)


def test_kafka_43_leader_resolves_the_pending_upload_offset():
    """UnifiedLog.fetchEarliestPendingUploadOffset (4.3.1): nothing uploaded and local
    start == log start -> the log start itself; uploaded -> never below the log start."""
    kafka43, kafka40 = "kafka-4.3", "kafka-4.0"
    nothing_uploaded = TieredLog(log_start=40, local_log_start=40, lso=90, leo=100, hwm=95)
    assert kip1023.earliest_pending_upload(nothing_uploaded) == -1  # KIP: the follower resolves it
    assert kip1023.earliest_pending_upload(nothing_uploaded, kafka43) == 40
    assert kip1023.earliest_pending_upload(nothing_uploaded, kafka40) == -1  # 4.0: not verified, KIP text
    not_learnt = TieredLog(log_start=0, local_log_start=60, lso=90, leo=100, hwm=95)
    assert kip1023.earliest_pending_upload(not_learnt, kafka43) == -1  # uploaded but unknown: retry
    stale_remote = TieredLog(log_start=500, local_log_start=500, lso=900, leo=1000, hwm=950, remote_log_start=0, last_tiered=99)
    assert kip1023.earliest_pending_upload(stale_remote) == 100
    assert kip1023.earliest_pending_upload(stale_remote, kafka43) == 500
    assert kip1023.list_offsets(stale_remote, -6, profile=kafka43) == 500
    assert kip1023.list_offsets(LOG, -6, profile=kafka43) == 80  # the ordinary case agrees with the KIP
    # the KIP's fallback (pending < log start: replicate the leader's local log) vs Kafka 4.3
    b_kip = kip1023.follower_bootstrap("OFFSET_MOVED_TO_TIERED_STORAGE", True, True, 500, 500,
                                       kip1023.earliest_pending_upload(stale_remote))
    b_kafka = kip1023.follower_bootstrap("OFFSET_MOVED_TO_TIERED_STORAGE", True, True, 500, 500,
                                         kip1023.earliest_pending_upload(stale_remote, kafka43))
    assert (b_kip.action, b_kip.fetch_offset, b_kip.log_start) == ("fetch", 500, 500)
    assert (b_kafka.action, b_kafka.fetch_offset, b_kafka.log_start) == ("fetch", 500, 500)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=4, max_size=4), st.integers(-1, 1000))
def test_kafka_pending_upload_is_unknown_or_within_log(xs, ry):
    """Under kafka-4.3 the -6 answer is -1 or in [log start, Ry + 1] ∪ {log start}."""
    ls, lx, ly, lz = sorted(xs)
    log = TieredLog(ls, lx, ly, lz, ly, ls if ry >= 0 else -1, ry)
    p = kip1023.earliest_pending_upload(log, "kafka-4.3")
    assert p == -1 or p >= ls
    if ry >= 0:
        assert p == max(ry + 1, ls)
    else:
        assert p == (ls if lx == ls else -1)


def test_follower_bootstrap_absent_before_4_3():
    """AbstractFetcherThread 4.2.1 has no empty-follower bootstrap; 4.3.1 has it."""
    args = ("OFFSET_MOVED_TO_TIERED_STORAGE", True, True, 0, 60, 80)
    assert kip1023.follower_bootstrap(*args, profile="kafka-4.3").fetch_offset == 80
    assert kip1023.follower_bootstrap(*args).fetch_offset == 80
    old = kip1023.follower_bootstrap(*args, profile="kafka-4.2")
    assert (old.action, old.fetch_offset, old.log_start) == ("fetch", 60, 0)
    assert kip1023.follower_bootstrap("OFFSET_OUT_OF_RANGE", True, True, 0, 60, 80, "kafka-4.0").fetch_offset == 0


def test_profiles_per_release_line():
    from kipcheck.reference_model import profiles
    p = {n: profiles.get(n) for n in ("kafka-4.0", "kafka-4.1", "kafka-4.2", "kafka-4.3")}
    for prof in p.values():
        for d in (profiles.FETCH_ABOVE_HWM_EMPTY, profiles.EVICT_SMALLEST, profiles.SHARDED_SESSION_CACHE):
            assert prof.allows(d)
        assert set(prof.describe()["deviations"]) == prof.deviations == set(prof.describe()["bounds"])
    assert p["kafka-4.3"].allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER)
    assert not p["kafka-4.3"].allows(profiles.FOLLOWER_BOOTSTRAP_ABSENT)
    assert p["kafka-4.2"].allows(profiles.FOLLOWER_BOOTSTRAP_ABSENT) and p["kafka-4.2"].allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER)
    assert not p["kafka-4.0"].allows(profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER)
    assert profiles.for_version("4.3.1") == "kafka-4.3" and profiles.for_version("4.1.2") == "kafka-4.1"
    assert profiles.for_version("3.2.3") == "kip"
    assert profiles.for_version(None) == "kip" and profiles.for_version("4") == "kip"
    assert profiles.profile_for("4.3.1") == ("kafka-4.3", None)
    assert all(prof.description for prof in p.values())


def test_a_version_without_a_profile_is_judged_by_the_kip_texts_or_inherits_and_says_so():
    from kipcheck.reference_model import profiles
    for version in ("3.2.3", "2.8.0"):  # older than every read line: the KIP text
        name, note = profiles.profile_for(version)
        assert name == "kip" and version in note and "(kip)" in note
        assert profiles.inherited(version) is None
    newest = "kafka-%d.%d" % profiles.newest_read_line()
    for version in ("5.1.0", "9.0.0"):  # newer than every read line: the newest read profile, inherited
        name, note = profiles.profile_for(version)
        assert name == newest and note.startswith(f"judged as {newest}: {version[:3]} not read")
        assert profiles.inherited(version)["profile"] == newest
    name, note = profiles.profile_for("unknown")
    assert name == "kip" and "KIP texts" in note


def test_errors_name_the_bad_value_and_broker_zero_is_a_replica():
    with pytest.raises(ValueError, match="-7"):
        kip1023.list_offsets(LOG, -7)
    with pytest.raises(ValueError, match="NOT_LEADER"):
        kip1023.follower_bootstrap("NOT_LEADER_OR_FOLLOWER", False, True, 0, 60, 80)
    with pytest.raises(ValueError, match="-2"):
        kip1166.remote_hwm_meaning(-2)
    assert kip1023.list_offsets(LOG, -1, replica_id=0) == 120  # broker 0 fetches as a replica


def test_propagation_spread_not_sum():
    assert kip1166.propagation_within_bound({"1": 5_000_000, "2": 6_000_000}, 2_000_000)
    assert not kip1166.propagation_within_bound({"1": 5_000_000, "2": 8_000_000}, 2_000_000)


def test_proven_lag_uses_answers_without_the_change():
    # broker 2 first seen late, but it last answered without the change right after broker 1 showed it
    assert kip1166.proven_lag_ns({"1": 100, "2": 9000}, {"1": None, "2": 150}) == 50
    # a broker's own sightings never prove its own lag
    assert kip1166.proven_lag_ns({"1": 100}, {"1": 5000}) == 0
    assert kip1166.proven_lag_ns({"1": 100, "2": 300}, {"1": 50, "2": 2100}) == 2000
    assert not kip1166.propagation_within_bound({"1": 100, "2": 3000}, 1000, {"1": None, "2": 2000})
    assert kip1166.propagation_within_bound({"1": 100, "2": 3000}, 1000, {"1": None, "2": 900})
