"""`hwm-propagation-delay`: the upper quartile of the post-commit lags of a run's metadata
changes, judged against the KIP-1166 bound (W/2) and, under kafka-4.0, the one-parked-FETCH
bound (3W/2).
Hand-made histories just inside and just outside each bound, and the fault voiding."""
import random

import pytest

from kipcheck.checks.rules.kip1166_rules import SETTLE_NS, PropagationRule
from kipcheck.reference_model import kip1166, profiles

MS = 1_000_000
ACK = 50 * MS  # the Admin call returned 50 ms after the change started
GAP = 1_000 * MS  # one change a second


def probe(index, start, lag_ns, brokers=(1, 2, 3), controllers=(1, 2, 3), idle_ms=500):
    """An invoke/ok pair: broker 1 showed the change at once (after the ack), broker 2
    still answered without it `lag_ns` after the ack, broker 3 right after the ack."""
    value = {"change": f"alter_config t retention.ms={index}", "brokers": list(brokers),
             "fetch_max_wait_ms": 500, "max_idle_interval_ms": idle_ms}
    if controllers is not None:
        value["controllers"] = list(controllers)
    done = {**value, "acknowledged": ACK,
            "seen_by": {"1": ACK + 10 * MS, "2": ACK + lag_ns + 3 * MS, "3": ACK + 2 * MS},
            "unseen_until": {"1": None, "2": ACK + lag_ns, "3": ACK + MS}, "complete": True}
    end = start + ACK + lag_ns + 5 * MS
    return [{"index": index, "time": start, "process": "observer", "type": "invoke", "f": "metadata_propagation",
             "value": value},
            {"index": index + 1, "time": end, "process": "observer", "type": "ok", "f": "metadata_propagation",
             "value": done}]


def history(lags_ms, t0=0, **kw):
    out = []
    for i, lag in enumerate(lags_ms):
        out += probe(len(out) + 1000, t0 + i * GAP, int(lag * MS), **kw)
    return out


def fault(index, start, stop, targets, name="partition", inject="ok"):
    recs = [{"index": index, "time": start, "process": "nemesis", "type": "invoke", "f": "fault",
             "value": {"fault": name, "phase": "start"}},
            {"index": index + 1, "time": start + MS, "process": "nemesis", "type": inject, "f": "fault",
             "value": {"fault": name, "phase": "start", **({"targets": targets} if inject == "ok" else {})}}]
    if inject == "ok" and stop is not None:
        recs += [{"index": index + 2, "time": stop, "process": "nemesis", "type": "invoke", "f": "fault",
                  "value": {"fault": name, "phase": "stop", "targets": targets}},
                 {"index": index + 3, "time": stop + MS, "process": "nemesis", "type": "ok", "f": "fault",
                  "value": {"fault": name, "phase": "stop", "targets": targets}}]
    return recs


def judge(records, profile="kip"):
    rule = PropagationRule()
    records = sorted(records, key=lambda r: r["time"])
    for i, r in enumerate(records):
        r["index"] = i
    group = [r for r in records if list(rule.group_keys(r))]
    found = rule.check(group, profile)
    # a known one names the deviation that accepted it: no other can
    assert all(a.details["deviations"] == [profiles.KRAFT_FETCH_PARKS_WITHOUT_HWM] for a in found if a.known)
    return sorted((a.name, a.known) for a in found)


FLAGGED = [("hwm-propagation-delay", False)]
KNOWN = [("hwm-propagation-delay", True)]

# What each kind of broker produces (measured shapes; see docs/checker.md): a KIP-1166 broker
# shows a committed change within a round trip, now and then much later on a loaded machine;
# a parking broker waits out the rest of the parking window, uniform over [0, 500 ms].
_rng = random.Random(1166)
KIP1166_BROKER = [_rng.choice([0, 0, 0, 2, 5, 12, 30, 60]) for _ in range(36)] + [450, 700, 1200, 2500]
PARKING_BROKER = [max(0, _rng.uniform(0, 500) - 8) for _ in range(40)]


@pytest.mark.parametrize("profile", ["kip", "kafka-4.3", "kafka-4.2", "kafka-4.1", "kafka-4.0"])
def test_a_kip1166_broker_is_valid_under_every_profile(profile):
    assert judge(history(KIP1166_BROKER), profile) == []


@pytest.mark.parametrize("profile", ["kip", "kafka-4.3", "kafka-4.2", "kafka-4.1"])
def test_a_parking_broker_is_flagged_where_kip1166_is_released(profile):
    assert judge(history(PARKING_BROKER), profile) == FLAGGED


def test_a_parking_broker_is_a_known_deviation_of_kafka_4_0():
    assert judge(history(PARKING_BROKER), "kafka-4.0") == KNOWN


@pytest.mark.parametrize("profile", ["kip", "kafka-4.3"])
def test_kip_bound_is_half_the_parking_window_on_the_upper_quartile(profile):
    n = 20  # an upper quartile of exactly 250 ms, or 1 ns more
    assert judge(history([250] * n), profile) == []
    assert judge(history([250 + 1e-6] * n), profile) == FLAGGED
    assert judge(history([0] * 15 + [5000] * 5), profile) == []  # a quarter of the changes slow
    assert judge(history([0] * 14 + [251] * 6), profile) == FLAGGED  # more than a quarter


def test_kafka_4_0_bound_is_one_parking_window_more():
    assert judge(history([750] * 20), "kafka-4.0") == KNOWN
    assert judge(history([750 + 1e-6] * 20), "kafka-4.0") == FLAGGED
    assert judge(history([750] * 20), "kip") == FLAGGED


def test_the_parking_window_follows_the_no_op_interval():
    # a controller appending a no-op every 200 ms releases parked FETCHes within 200 ms: bound 100 ms
    assert judge(history([110] * 20, idle_ms=200)) == FLAGGED
    assert judge(history([100] * 20, idle_ms=200)) == []
    assert judge(history([110] * 20, idle_ms=500)) == []
    assert judge(history([240] * 20, idle_ms=0)) == []  # 0: no no-op records; the 500 ms max wait bounds


def test_too_few_changes_decide_nothing():
    assert judge(history([400] * (kip1166.MIN_CHANGES - 1))) == []
    assert judge(history([400] * kip1166.MIN_CHANGES)) == FLAGGED


def test_a_fault_on_a_measured_broker_voids_the_probes_it_overlaps():
    slow = history([400] * 30)
    end = 30 * GAP
    assert judge(slow + fault(1, 0, end, [2])) == []
    # a fault on a node the probes do not depend on leaves them counted
    assert judge(slow + fault(1, 0, end, [7])) == FLAGGED
    # dedicated controllers: a fault on a controller voids, on an unmeasured broker does not
    ctl = history([400] * 30, brokers=(4, 5, 6), controllers=(1, 2, 3))
    assert judge(ctl + fault(1, 0, end, [2])) == []
    assert judge(ctl + fault(1, 0, end, [9])) == FLAGGED


def test_voiding_lasts_the_fault_plus_the_settle_time():
    # one probe a second; a fault on broker 2 healed at 5 s voids the probes that start by
    # 5 s + settle (5 s): 11 of them. 30 probes leave 19 (undecided), 31 leave 20 (flagged);
    # without the settle time 30 would leave 24.
    assert SETTLE_NS == 5 * GAP
    assert judge(history([400] * 30) + fault(1, 0, 5 * GAP, [2])) == []
    assert judge(history([400] * 31) + fault(1, 0, 5 * GAP, [2])) == FLAGGED


def test_a_failed_inject_voids_only_around_itself():
    slow = history([400] * 40)
    assert judge(slow + fault(1, 0, None, None, inject="info")) == FLAGGED  # ends at once, + settle
    assert judge(slow + fault(1, 0, None, [2])) == []  # an ok inject never stopped lasts to the end


def test_without_controllers_any_fault_voids():
    slow = history([400] * 30, controllers=None)
    assert judge(slow + fault(1, 0, 30 * GAP, [7])) == []
    assert judge(slow) == FLAGGED


def test_heal_all_touches_every_node():
    slow = history([400] * 30)
    heal = [{"index": 1, "time": 0, "process": "nemesis", "type": "invoke", "f": "fault",
             "value": {"fault": "heal-all", "phase": "stop", "targets": []}},
            {"index": 2, "time": 30 * GAP, "process": "nemesis", "type": "ok", "f": "fault",
             "value": {"fault": "heal-all", "phase": "stop", "targets": []}}]
    assert judge(slow + heal) == []


def test_post_commit_lag_is_proven_by_answers_without_the_change():
    # broker 2's last answer without the change came 300 ms after the ack
    assert kip1166.post_commit_lag_ns({"1": 60, "2": 400}, {"1": None, "2": 350}, 50) == 300
    # a broker that showed the change earlier than the ack proves the commit earlier
    assert kip1166.post_commit_lag_ns({"1": 20, "2": 400}, {"1": None, "2": 350}, 50) == 330
    # answers without the change before the commit prove nothing
    assert kip1166.post_commit_lag_ns({"1": 60, "2": 70}, {"1": 10, "2": 40}, 50) == 0
    # late first sightings alone prove nothing (our polling may be slow)
    assert kip1166.post_commit_lag_ns({"1": 60, "2": 5000}, {"1": None, "2": None}, 50) == 0


def test_parking_window_and_statistic():
    assert kip1166.parking_window_ms(500, 500) == 500
    assert kip1166.parking_window_ms(500, 200) == 200
    assert kip1166.parking_window_ms(500, 0) == 500
    assert kip1166.parking_window_ms(500, 900) == 500
    assert kip1166.kip_bound_ns(500) == 250 * MS and kip1166.parked_once_bound_ns(500) == 750 * MS
    n = kip1166.MIN_CHANGES
    assert kip1166.propagation_statistic([250 * MS] * n, 500) == kip1166.WITHIN
    assert kip1166.propagation_statistic([250 * MS + 1] * n, 500) == kip1166.PARKED_ONCE
    assert kip1166.propagation_statistic([750 * MS + 1] * n, 500) == kip1166.BEYOND
    assert kip1166.propagation_statistic([750 * MS + 1] * (n - 1), 500) == kip1166.UNDECIDED
    assert kip1166.median_ns([3, 1, 2, 10]) == 2.5
    # at least three quarters of the values are <= the upper quartile, and it is one of them
    assert kip1166.upper_quartile_ns([4, 1, 3, 2]) == 3
    assert kip1166.upper_quartile_ns([5, 1, 4, 2, 3]) == 4
    assert kip1166.upper_quartile_ns(list(range(20))) == 14


def test_model_replay_judges_a_run_of_lags():
    from kipcheck.reference_model.scenario import replay
    steps = [{"op": "propagation_run", "lags_ms": [300] * 20},
             {"op": "propagation_run", "lags_ms": [350] * 20, "max_idle_interval_ms": 200},
             {"op": "propagation_run", "lags_ms": [100] * 20}]
    kip = [r["allowed"] for r in replay({"steps": steps}, "kip")]
    old = [r["allowed"] for r in replay({"steps": steps}, "kafka-4.0")]
    assert kip == [[{"outcome": "parked-once", "accepted": False}], [{"outcome": "beyond", "accepted": False}],
                   [{"outcome": "within", "accepted": True}]]
    assert old[0] == [{"outcome": "parked-once", "accepted": True}] and old[1][0]["accepted"] is False


@pytest.mark.parametrize("idle_ms", [500, 200])
def test_the_observer_spaces_changes_over_a_whole_parking_window(idle_ms):
    """A parking broker learns a change at the next append; the observer's next change starts
    a gap after the previous one was seen (just after an append). Gaps spanning less than one
    parking window lock every commit to one phase of the no-op timer and hid the seeded bug
    (harness.clients.observer.Observer._gap): each phase bin of the window must be drawn."""
    import threading

    from kipcheck.harness.clients.observer import Observer
    obs = Observer("127.0.0.1:1", [], history=None, stop=threading.Event(), seed=7,
                   kraft={"fetch_max_wait_ms": 500, "max_idle_interval_ms": idle_ms})
    window = kip1166.parking_window_ms(500, idle_ms) / 1000
    phases = [obs._gap() % window for _ in range(4000)]
    bins = [0] * 10
    for p in phases:
        bins[min(9, int(p / window * 10))] += 1
    assert min(bins) > 4000 / 10 * 0.7, bins  # every tenth of the window, near-uniformly


# --- coverage counts only what decided (issue 21 §2) ---------------------------------------
def _checked(tmp_path, records, profile="kafka-4.3"):
    import json

    from kipcheck.checks.api import check
    read = [{"time": 1, "process": 7, "type": "invoke", "f": "send", "value": {"topic": "t", "partition": 0, "value": "a"}},
            {"time": 2, "process": 7, "type": "ok", "f": "send", "value": {"topic": "t", "partition": 0, "value": "a",
                                                                          "offset": 0}},
            {"time": 3, "process": 8, "type": "invoke", "f": "poll", "value": {"topic": "t"}},
            {"time": 4, "process": 8, "type": "ok", "f": "poll", "value": {"topic": "t", "records": [["t", 0, 0, "a"]]}}]
    records = sorted(records + read, key=lambda r: r["time"])  # a read, so the verdict can be valid
    for i, r in enumerate(records):
        r["index"] = i
    (tmp_path / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    verdict = check(tmp_path / "history.jsonl", profile=profile)
    return verdict, verdict["coverage"][RULE_ID], verdict["conformance"]["KIP-1166"][RULE_ID]


RULE_ID = "kip1166.propagation_statistic"


def test_below_its_minimum_sample_the_statistic_is_undecided_not_held(tmp_path):
    """19 changes each 0.9 s late (past the 250 ms bound) decide nothing: valid, but the rule did not hold anything:
    0 observations counted and "undecided" in the conformance table (it read "holds (19)")."""
    verdict, coverage, row = _checked(tmp_path, history([900] * (kip1166.MIN_CHANGES - 1)))
    assert verdict["valid"] is True
    assert coverage["observations"] == 0 and coverage["undecided"].startswith(f"{kip1166.MIN_CHANGES - 1} of the 20")
    assert row["status"] == "undecided" and "too few observations" in row["why"]


def test_from_its_minimum_sample_it_decides_and_counts(tmp_path):
    late, _, row = _checked(tmp_path, history([900] * kip1166.MIN_CHANGES))
    assert late["valid"] is False and row["status"] == "fails"
    healthy = [lag for lag in KIP1166_BROKER if lag < 1000]  # each probe done before the next starts
    quick, coverage, row = _checked(tmp_path, history(healthy))
    assert quick["valid"] is True and coverage["observations"] == len(healthy) and row["status"] == "holds"


def test_changes_a_fault_voided_do_not_count(tmp_path):
    """Every probe inside a fault on a measured broker is voided by the rule: coverage agrees."""
    lags = KIP1166_BROKER[:kip1166.MIN_CHANGES + 5]
    voided = history(lags) + fault(90_000, 0, (len(lags) - 10) * GAP, [2])
    _, coverage, row = _checked(tmp_path, voided)
    assert coverage["observations"] == 0 and row["status"] == "undecided"


@pytest.mark.parametrize("version,probed", [("4.1.2", True), ("4.0.2", True), ("3.9.2", False), ("3.3.2", False)])
def test_propagation_is_probed_where_the_model_says_what_kraft_does(version, probed):
    """KIP-1166 shipped in 4.1; 4.0's profile carries its absence (one parked FETCH a change), so
    `kip` can name it there; the 3.x profiles say nothing of it, so no probe judges them."""
    from types import SimpleNamespace

    from kipcheck.harness.run import RunOptions
    from kipcheck.harness.session import release_gaps
    gaps = release_gaps(SimpleNamespace(dist=SimpleNamespace(version=version)), RunOptions())
    assert [g.key for g in gaps] == ([] if probed else ["observer.metadata_propagation"])
