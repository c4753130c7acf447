"""The Porcupine-style Model and scenario replay, operation by operation.

Each expected outcome is worked out by hand from the KIP text (section named beside it),
not copied from the model's output."""
import pytest

from kipcheck.reference_model import Model, profiles
from kipcheck.reference_model.scenario import replay

STATE = {
    "partitions": [{
        "topic": "t", "partition": 0, "leader": 1, "leader_epoch": 3, "isr": [1, 2],
        "epochs": [[0, 0], [3, 7]],
        "replicas": [
            {"broker": 1, "rack": "a", "log_start": 0, "leo": 12, "hwm": 10},
            {"broker": 2, "rack": "b", "log_start": 2, "leo": 11, "hwm": 9},
            {"broker": 3, "rack": "b", "log_start": 0, "leo": 5, "hwm": 5},
        ],
        "tiered": {"log_start": 0, "local_log_start": 60, "lso": 105, "leo": 120, "hwm": 110,
                   "remote_log_start": 0, "last_tiered": 79, "max_timestamp_offset": 119},
    }],
    "brokers": {"1": {"session_slots": 2, "eviction_ms": 1000, "session_shards": 1}},
}
T = {"topic": "t", "partition": 0}


def run(steps, profile="kip", state=STATE):
    return [e["allowed"] for e in replay({"state": state, "steps": [{**T, **s} for s in steps]}, profile)]


def fo(error, below, hwm=None, ls=None, pref=-1):
    return {"error": error, "records_below": below, "high_watermark": hwm, "log_start_offset": ls,
            "preferred_read_replica": pref}


def test_fetch_step_cases_and_preferred_replica():
    steps = [
        {"op": "fetch", "broker": 2, "fetch_offset": 9},  # KIP-392 case 1 on follower 2 (HWM 9, LEO 11)
        {"op": "fetch", "broker": 1, "fetch_offset": 4, "rack": "b"},  # committed; same-rack in-sync follower 2
        {"op": "fetch", "broker": 1, "fetch_offset": 11, "replica_id": 2},  # replication reads to the LEO
        {"op": "fetch", "broker": 1, "fetch_offset": 4, "rack": "b", "selector": "LeaderSelector"},
        {"op": "fetch", "broker": 2, "fetch_offset": 1},  # case 3: below log start 2
    ]
    kip = run(steps)
    assert kip[0] == [fo("OFFSET_NOT_AVAILABLE", 9)]
    assert kip[1] == [fo("NONE", 10, 10, 0, pref=2)]
    assert kip[2] == [fo("NONE", 12, 10, 0)]
    assert kip[3] == [fo("NONE", 10, 10, 0)]
    assert kip[4] == [fo("OFFSET_OUT_OF_RANGE", 1, 9, 2)]
    kafka = run(steps, "kafka-4.3")
    # the profile widens the KIP (issue 21 §3): Kafka's answers beside the KIP's, never instead
    assert sorted(kafka[0], key=str) == sorted([fo("NONE", 9, 9, 2), fo("OFFSET_NOT_AVAILABLE", 9)], key=str)
    assert sorted(kafka[4], key=str) == sorted([fo("OFFSET_OUT_OF_RANGE", 1, -1, -1), fo("OFFSET_OUT_OF_RANGE", 1, 9, 2)],
                                               key=str)


def test_select_update_replicate_steps():
    steps = [
        {"op": "select_replica", "rack": "b", "fetch_offset": 1},  # 2's log start 2 > 1: leader
        {"op": "select_replica", "rack": "b", "fetch_offset": 4},
        {"op": "select_replica", "rack": "b", "fetch_offset": 4, "selector": "LeaderSelector"},
        {"op": "update_replica", "broker": 2, "leo": 13, "isr": [1]},  # 2 leaves the ISR
        {"op": "select_replica", "rack": "b", "fetch_offset": 4},
        {"op": "update_replica", "broker": 3, "rack": "a", "leader": 3, "leader_epoch": 4, "hwm_pending": True},
        {"op": "select_replica", "rack": "a", "fetch_offset": 4},  # the new leader 3 is in rack a
        {"op": "replicate", "broker": 2},  # follower 2 learns leader 3's HWM 5
    ]
    out = run(steps)
    assert out[0] == [{"replica": 1}] and out[1] == [{"replica": 2}] and out[2] == [{"replica": 1}]
    assert out[3] == [{}] and out[4] == [{"replica": 1}] and out[6] == [{"replica": 3}]
    assert out[7] == [{"high_watermark": 5}]


def test_replicate_lets_hwm_exceed_leo_only_under_the_kip():
    step = [{"op": "replicate", "broker": 3}]  # leader HWM 10, follower 3 LEO 5
    assert run(step) == [[{"high_watermark": 10}]]
    assert run(step, "kafka-4.3") == [[{"high_watermark": 5}]]


def test_offsets_for_leader_epoch_reset_and_out_of_range_steps():
    steps = [
        {"op": "offsets_for_leader_epoch", "broker": 1, "leader_epoch": 0},  # epoch 0 ends where 3 starts: 7
        {"op": "offsets_for_leader_epoch", "broker": 1, "leader_epoch": 3},  # latest: LEO 12, capped at HWM 10
        {"op": "offsets_for_leader_epoch", "broker": 1, "leader_epoch": 3, "replica_id": 2},  # follower: LEO
        {"op": "offsets_for_leader_epoch", "broker": 2, "leader_epoch": 3},  # not the leader
        {"op": "reset", "policy": "earliest", "serving": 2},
        {"op": "reset", "policy": "latest", "serving": 2},
        {"op": "reset", "policy": "none", "serving": 2},
        {"op": "out_of_range", "fetch_offset": 1, "log_start_offset": 2},
        {"op": "out_of_range", "fetch_offset": 5, "log_start_offset": 2},
        {"op": "out_of_range", "fetch_offset": 5, "log_start_offset": 2, "epoch_known": False},
    ]
    out = run(steps)
    assert out[0] == [{"error": "NONE", "leader_epoch": 0, "end_offset": 7}]
    assert out[1] == [{"error": "NONE", "leader_epoch": 3, "end_offset": 10}]
    assert out[2] == [{"error": "NONE", "leader_epoch": 3, "end_offset": 12}]
    assert out[3] == [{"error": "NOT_LEADER_OR_FOLLOWER", "leader_epoch": -1, "end_offset": -1}]
    assert out[4] == [{"offset": 2}] and out[5] == [{"offset": 10}]
    assert set(out[6][0]) == {"error"}
    assert out[7] == [{"action": "reset"}] and out[8] == [{"action": "validate"}] and out[9] == [{"action": "reset"}]
    assert run(steps[1:2], "kafka-4.3") == [[{"error": "NONE", "leader_epoch": 3, "end_offset": 12}]]


def sess(sid, epoch, now, replica_id=-1, new=None, parts=(("t", 0, 4),), forgotten=(), observed=None):
    op = {"op": "session", "broker": 1, "session_id": sid, "session_epoch": epoch, "now_ms": now,
          "replica_id": replica_id, "partitions": [list(p) for p in parts], "forgotten": [list(f) for f in forgotten]}
    if new is not None:
        op["new_session_id"] = new
    if observed is not None:
        op["observed"] = observed
    return op


def created(sid):
    return {"error": "NONE", "session_id": sid, "created": True}


def test_session_steps_follow_the_session_table_and_cache():
    steps = [
        sess(0, 0, 0, new=42),  # KIP-227: 0/0 creates a session, epoch 1
        sess(42, 1, 10, parts=(("t", 0, 6),)),  # ID/1: incremental
        sess(0, 0, 20, new=7),  # second slot
        sess(0, 0, 30, new=9),  # consumer, cache full, nobody idle or old: no session
        sess(0, 0, 40, replica_id=2, new=9, observed=created(9)),  # follower evicts a consumer (rule 1)
        sess(42, 2, 50),  # did the follower evict 42? then it is unknown
    ]
    out = run(steps)
    assert out[0] == [created(42)]
    assert out[1] == [{"error": "NONE", "session_id": 42, "created": False}]
    assert out[2] == [created(7)]
    assert out[3] == [{"error": "NONE", "session_id": 0, "created": False}]
    assert out[4] == [created(9), created(9)]  # either consumer session may go
    assert out[5] in ([{"error": "NONE", "session_id": 42, "created": False}],
                      [{"error": "FETCH_SESSION_ID_NOT_FOUND", "session_id": 0, "created": False}])
    kafka = run(steps, "kafka-4.3")
    assert kafka[4] == [created(9)]  # one victim: smallest (privileged, size, id) = 7
    assert kafka[5] == [{"error": "NONE", "session_id": 42, "created": False}]
    forget = run([sess(0, 0, 0, new=5), sess(5, 1, 1, parts=(), forgotten=(("t", 0),))], "kafka-4.3")
    assert forget[1] == [{"error": "NONE", "session_id": 0, "created": False}]
    assert run([sess(0, 0, 0, new=5), sess(5, 1, 1, parts=(), forgotten=(("t", 0),))])[1] == [
        {"error": "NONE", "session_id": 5, "created": False}]


def test_observed_outcome_picks_the_next_state():
    base = [sess(0, 0, 0, new=42), sess(0, 0, 20, new=7)]
    evict_42 = base + [sess(0, 0, 40, replica_id=2, new=9, observed=created(9)), sess(42, 1, 50), sess(7, 1, 50)]
    out = run(evict_42)
    # whichever consumer session was evicted, exactly one of 42 / 7 is still there
    alive = [o[0]["error"] == "NONE" for o in out[3:]]
    assert sorted(alive) == [False, True]


def test_tiered_steps():
    steps = [
        {"op": "list_offsets", "timestamp": -6},  # Ry + 1
        {"op": "list_offsets", "timestamp": -1, "isolation_level": "read_committed"},
        {"op": "list_offsets", "timestamp": -1, "replica_id": 2},
        {"op": "list_offsets", "timestamp": -1},
        {"op": "tiered_inequalities"},
        {"op": "bootstrap"},  # empty follower, feature on: from the pending upload offset
        {"op": "bootstrap", "enabled": False},  # old path: the leader's local log start
        {"op": "bootstrap", "error": "OFFSET_OUT_OF_RANGE", "follower_empty": False},
    ]
    out = run(steps)
    assert out[:4] == [[{"offset": 80}], [{"offset": 105}], [{"offset": 120}], [{"offset": 110}]]
    assert out[4] == [{"violations": []}]
    assert out[5] == [{"action": "fetch", "fetch_offset": 80, "log_start": 0}]
    assert out[6] == [{"action": "fetch", "fetch_offset": 60, "log_start": 0}]
    assert out[7] == [{"action": "fetch", "fetch_offset": 0, "log_start": 0}]
    assert run(steps[5:6], "kafka-4.2") == [[{"action": "fetch", "fetch_offset": 60, "log_start": 0}]]
    nothing = {**STATE, "partitions": [{**STATE["partitions"][0], "tiered": {
        "log_start": 30, "local_log_start": 30, "lso": 50, "leo": 60, "hwm": 55}}]}
    assert run(steps[:1], "kafka-4.3", nothing) == [[{"offset": 30}]]
    assert run(steps[:1], "kip", nothing) == [[{"offset": -1}]]
    bad = {**STATE, "partitions": [{**STATE["partitions"][0], "tiered": {
        "log_start": 0, "local_log_start": 60, "lso": 50, "leo": 120, "hwm": 110}}]}
    assert run([{"op": "tiered_inequalities"}], "kip", bad) == [[{"violations": ["Ly>=Lx"]}]]


def test_kraft_and_propagation_steps():
    steps = [
        {"op": "kraft_fetch", "response_empty": True, "remote_hwm": 10, "leader_hwm": 10},
        {"op": "kraft_fetch", "response_empty": True, "remote_hwm": -1, "leader_hwm": 10},
        {"op": "kraft_fetch", "response_empty": False, "remote_hwm": 10, "leader_hwm": 10},
        {"op": "propagation", "seen_by": {"1": 0, "2": 3_000_000}, "bound_ms": 2},
        {"op": "propagation", "seen_by": {"1": 0, "2": 3_000_000}, "bound_ms": 3},
    ]
    out = run(steps)
    assert out[0] == [{"park": True, "remote_hwm": "known"}]
    assert out[1] == [{"park": False, "remote_hwm": "unknown"}]
    assert out[2] == [{"park": False, "remote_hwm": "known"}]
    assert out[3] == [{"within_bound": False}] and out[4] == [{"within_bound": True}]


def test_replay_profile_choice_expectations_and_errors():
    s = {"profile": "kafka-4.3", "state": STATE,
         "steps": [{**T, "op": "fetch", "broker": 2, "fetch_offset": 9, "expect": fo("NONE", 9, 9, 2)}]}
    (e,) = replay(s)
    assert e["step"] == 0 and e["op"] == "fetch" and e["expected_allowed"] is True
    (e,) = replay(s, "kafka-4.0")
    assert e["expected_allowed"] is True
    (e,) = replay({**s, "profile": "kip"})
    assert e["expected_allowed"] is False and "expected_allowed" not in replay({"state": STATE, "steps": [T | {"op": "tiered_inequalities"}]})[0]
    assert replay({}) == []
    with pytest.raises(ValueError, match="frobnicate"):
        replay({"state": STATE, "steps": [{"op": "frobnicate"}]})


def test_init_defaults_describe_and_equal():
    m = Model(profiles.get("kafka-4.3"))
    st = m.init({"partitions": [{"topic": "u", "partition": 1, "leader": 5,
                                 "replicas": [{"broker": 5}, {"broker": 6, "rack": "r"}]}]})
    ps = st.partition(("u", 1))
    assert ps.leader_epoch == 0 and ps.isr == frozenset({5, 6}) and ps.hwm_pending is False
    r6 = ps.replica(6)
    assert (r6.rack, r6.log_start, r6.leo, r6.hwm, r6.lso, r6.local_log_start) == ("r", 0, 0, 0, None, None)
    assert dict(st.epochs)[("u", 1)] == ((0, 0),)
    assert st.cache(9).slots == 1000 and st.cache(9).eviction_ms == 120_000
    d = m.describe(m.init(STATE))
    assert d["profile"] == "kafka-4.3" and set(d["partitions"]) == {"t/0"} and set(d["tiered"]) == {"t/0"}
    assert d["partitions"]["t/0"]["leader"] == 1 and d["sessions"] == {"1": []}
    a, b = m.init(STATE), m.init(STATE)
    assert m.equal(a, b)
    _, c = m.step(a, {**T, "op": "update_replica", "broker": 2, "hwm": 10})
    assert not m.equal(a, c) and c.partition(("t", 0)).replica(2).hwm == 10
    full = m.init(STATE)
    assert full.cache(1).slots == 2 and full.cache(1).eviction_ms == 1000 and full.cache(1).shards == 1
    assert full.partition(("t", 0)).replica(3).lso is None
    lso = m.init({"partitions": [{"topic": "u", "partition": 0, "leader": 1, "leader_epoch": 2, "hwm_pending": True,
                                  "replicas": [{"broker": 1, "rack": "x", "log_start": 1, "leo": 9, "hwm": 8,
                                                "lso": 7, "local_log_start": 3}]}]})
    p = lso.partition(("u", 0))
    assert p.hwm_pending and p.leader_epoch == 2 and p.replica(1) == p.leader_replica
    assert (p.replica(1).lso, p.replica(1).local_log_start, p.replica(1).hwm) == (7, 3, 8)
    assert dict(lso.epochs)[("u", 0)] == ((2, 0),)
