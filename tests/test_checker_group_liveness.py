"""KIP-848 liveness (`slow-rebalance`, checks/rules/group_liveness_rules.py) on hand-made histories:
a freed partition is owned again within the session timeout plus a heartbeat interval (50 s of time
without a fault in force) when a member stayed in the group that long; tested on each side of the bound."""
from __future__ import annotations

import pytest

from kipcheck.checks.api import check
from kipcheck.checks.engine_local import check_records
from kipcheck.checks.recovery import group_liveness_rule
from kipcheck.checks.rules.group_liveness_rules import ANOMALY, GroupLivenessRule
from kipcheck.reference_model import kip848
from kipcheck.rundir import config as run_config
from kipcheck.rundir.history import write_jsonl

A, B, C = 11, 12, 13  # subscriber processes of one group
BOUND_S = kip848.REOWN_BOUND_NS / 1e9


class Timeline:
    """Records at given times (seconds), in order."""

    def __init__(self):
        self.records: list[dict] = []

    def at(self, s: float, process, f: str, value: dict, type_: str = "ok") -> int:
        assert not self.records or s * 1e9 >= self.records[-1]["time"]
        self.records.append({"index": len(self.records), "time": int(s * 1e9), "process": process,
                             "type": type_, "f": f, "value": value})
        return len(self.records) - 1

    def subscribe(self, s, process, group="g"):
        self.at(s, process, "subscribe", {"topics": ["t"], "group": group})

    def assign(self, s, process, *partitions, group="g"):
        return self.at(s, process, "assign", {"partitions": [["t", p] for p in partitions], "rebalance": True,
                                              "group": group, "member": f"m{process}"}, "invoke")

    def revoke(self, s, process, *partitions, group="g"):
        return self.at(s, process, "revoke", {"partitions": [["t", p] for p in partitions], "group": group,
                                              "member": f"m{process}", "lost": False})

    def fetch(self, s, process, *partitions, group="g"):
        """The OffsetFetch an assign callback makes before it records its `assign` (commits.py `resume`)."""
        return self.at(s, process, "committed", {"partitions": [["t", p] for p in partitions], "group": group,
                                                 "member": f"m{process}"}, "invoke")

    def poll(self, s, process):
        self.at(s, process, "poll", {"topic": "t", "records": []})

    def fault(self, s, phase, name="partition"):
        self.at(s, "nemesis", "fault", {"fault": name, "phase": phase}, "invoke" if phase == "start" else "ok")

    def judged(self):
        rule = GroupLivenessRule()
        return rule.check([r for r in self.records if [*rule.group_keys(r)]], "kip")


def _freed_by_a(t: Timeline) -> int:
    """A owns partition 0 and revokes it at 10 s; B subscribed at 1 s and polls on."""
    t.subscribe(0, A)
    t.subscribe(1, B)
    t.assign(2, A, 0)
    return t.revoke(10, A, 0)


def test_a_partition_given_again_inside_the_bound_is_live():
    t = Timeline()
    _freed_by_a(t)
    t.assign(10 + BOUND_S - 0.1, B, 0)
    t.poll(100, B)
    assert t.judged() == []


def test_given_just_past_the_bound_while_a_member_stayed_is_slow():
    t = Timeline()
    freed = _freed_by_a(t)
    given = t.assign(10 + BOUND_S + 0.1, B, 0)
    t.poll(100, B)
    [anomaly] = t.judged()
    assert anomaly.name == ANOMALY and anomaly.indices == (freed, given)
    assert anomaly.details["witness_process"] == B and anomaly.details["deadline_s"] == pytest.approx(10 + BOUND_S)


def test_never_given_again_while_a_member_stayed_past_the_bound_is_slow():
    t = Timeline()
    freed = _freed_by_a(t)
    t.poll(10 + BOUND_S + 0.1, B)
    [anomaly] = t.judged()
    assert anomaly.indices == (freed,) and anomaly.details["owned_again_s"] is None


def test_never_given_again_but_no_member_stayed_that_long_is_not_judged():
    t = Timeline()
    _freed_by_a(t)
    t.poll(10 + BOUND_S - 0.1, B)  # B's last record: it may have left before the deadline
    assert t.judged() == []


def test_a_member_that_joined_later_counts_from_its_subscribe():
    """C joins 20 s after the freeing: its deadline is 50 s after its own subscribe."""
    t = Timeline()
    t.subscribe(0, A)
    t.assign(2, A, 0)
    t.revoke(10, A, 0)
    t.subscribe(30, C)
    t.assign(30 + BOUND_S - 0.1, C, 0)
    t.poll(200, C)
    assert t.judged() == []
    late = Timeline()
    late.subscribe(0, A)
    late.assign(2, A, 0)
    late.revoke(10, A, 0)
    late.subscribe(30, C)
    late.assign(30 + BOUND_S + 0.1, C, 0)
    late.poll(200, C)
    assert [a.name for a in late.judged()] == [ANOMALY]


@pytest.mark.parametrize("fault_s,expect", [(20.0, []), (0.5, [ANOMALY])])
def test_time_under_a_fault_does_not_count(fault_s, expect):
    """A 20 s fault inside the wait moves the deadline 20 s on; a 0.5 s one only 0.5 s (still late)."""
    t = Timeline()
    _freed_by_a(t)
    t.fault(15, "start")
    t.fault(15 + fault_s, "stop")
    t.assign(10 + BOUND_S + 10, B, 0)
    t.poll(200, B)
    assert [a.name for a in t.judged()] == expect


def test_a_failed_owner_frees_its_partitions():
    t = Timeline()
    t.subscribe(0, A)
    t.subscribe(1, B)
    t.assign(2, A, 0, 1)
    freed = t.at(5, A, "poll", {"topic": "t", "error": "boom", "fatal": True}, "fail")
    t.assign(5 + BOUND_S + 1, B, 0)
    t.poll(200, B)
    anomalies = t.judged()
    assert sorted(a.details["partition"] for a in anomalies) == [0, 1] and {a.indices[0] for a in anomalies} == {freed}


def test_a_partition_still_owned_by_another_member_is_not_freed():
    t = Timeline()
    t.subscribe(0, A)
    t.subscribe(1, B)
    t.assign(2, A, 0)
    t.assign(3, B, 0)  # two owners (group-ownership-violation judges that); A's revoke leaves B owning it
    t.revoke(10, A, 0)
    t.poll(200, B)
    assert t.judged() == []


def test_another_group_does_not_witness():
    t = Timeline()
    t.subscribe(0, A)
    t.subscribe(1, C, group="other")
    t.assign(2, A, 0)
    t.revoke(10, A, 0)
    t.poll(200, C)
    assert t.judged() == []


def test_the_checker_runs_the_rule_on_a_whole_history():
    t = Timeline()
    _freed_by_a(t)
    t.poll(10 + BOUND_S + 0.1, B)
    verdict = check_records(t.records)
    assert verdict["valid"] is False and len(verdict["anomalies"][ANOMALY]) == 1


def test_the_deadline_skips_paused_time():
    assert kip848.reown_deadline(0, 0, [(10, 20)], bound=100) == 110
    assert kip848.reown_deadline(0, 5, [(10, 20), (50, 60)], bound=100) == 125
    assert kip848.reown_deadline(30, 0, [(10, 20)], bound=100) == 130  # a pause before the start: nothing
    assert kip848.reown_deadline(0, 0, [(200, 300)], bound=100) == 100  # a pause after the deadline: nothing


@pytest.mark.parametrize("ends_after_s,expect", [(5.0, []), (BOUND_S + 1, [ANOMALY])])
def test_a_member_that_closed_before_any_assignment_may_linger_a_session(ends_after_s, expect):
    """C subscribed and closed without ever being given a partition: its join may have been in flight,
    so the coordinator may hold the freed partition for it until its session times out. Its end 5 s
    after the freeing moves the clock there; an end past the deadline cannot have delayed anything."""
    t = Timeline()
    t.subscribe(0, A)
    t.subscribe(1, B)
    t.subscribe(2, C)
    t.assign(3, A, 0)
    t.revoke(10, A, 0)
    t.poll(10 + ends_after_s, C)  # C's last record
    t.assign(10 + BOUND_S + 3, B, 0)
    t.poll(200, B)
    assert [a.name for a in t.judged()] == expect


#: the brokers' group timeouts a run recorded (config.json `consumer_groups`): a 12 s bound
SHORT = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 2000}


def test_the_bound_is_the_session_timeout_plus_a_heartbeat():
    assert kip848.reown_bound_ns(10000, 2000) == 12_000_000_000
    assert kip848.reown_bound_ns() == kip848.REOWN_BOUND_NS == 50_000_000_000


@pytest.mark.parametrize("recorded,bound_s", [
    (SHORT, 12.0),
    (None, BOUND_S),  # an older history: Kafka's defaults
    ({}, BOUND_S),  # an external cluster's settings are unknown
    ({"session_timeout_ms": 10000}, 15.0),  # the heartbeat interval's default
    ({"session_timeout_ms": "soon", "heartbeat_interval_ms": 0}, BOUND_S),  # nonsense: the defaults
])
def test_the_rule_takes_the_bound_the_run_recorded(tmp_path, recorded, bound_s):
    if recorded is not None:
        run_config.write(tmp_path, run_config.RunConfig(consumer_groups=recorded))
    rule = group_liveness_rule(tmp_path)
    assert rule.bound_ns / 1e9 == bound_s
    assert ("Kafka's default" in rule.source) == (bound_s != 12.0)


@pytest.mark.parametrize("recorded,given_after_s,expect", [
    (SHORT, 12 - 0.1, []), (SHORT, 12 + 0.1, [ANOMALY]),
    (None, 12 + 0.1, []), (None, BOUND_S + 0.1, [ANOMALY]),  # without settings: Kafka's 50 s
])
def test_the_checker_judges_a_run_by_its_brokers_timeouts(tmp_path, recorded, given_after_s, expect):
    """The whole path: config.json's `consumer_groups` to the verdict, on each side of the 12 s bound."""
    t = Timeline()
    _freed_by_a(t)
    t.assign(10 + given_after_s, B, 0)
    t.poll(100, B)
    write_jsonl(t.records, tmp_path / "history.jsonl")
    if recorded is not None:
        run_config.write(tmp_path, run_config.RunConfig(consumer_groups=recorded))
    found = check(tmp_path)["anomalies"].get(ANOMALY) or []
    assert [ANOMALY] * len(found) == expect
    if found:
        assert found[0]["bound_s"] == (12.0 if recorded else BOUND_S)


@pytest.mark.parametrize("fetch_after_s,expect", [(BOUND_S - 0.1, []), (BOUND_S + 0.1, [ANOMALY])])
def test_a_partition_is_owned_again_when_the_callback_began(fetch_after_s, expect):
    """B's callback asked the partition's committed offset inside the bound and recorded its `assign`
    only 10 s later (the client's OffsetFetch timeout, seen on 4.3.1): owned again at the fetch."""
    t = Timeline()
    _freed_by_a(t)
    t.fetch(10 + fetch_after_s, B, 0)
    t.assign(10 + fetch_after_s + 10, B, 0)
    t.poll(200, B)
    assert [a.name for a in t.judged()] == expect


def test_a_fetch_of_other_partitions_does_not_own_this_one():
    t = Timeline()
    _freed_by_a(t)
    t.fetch(10 + BOUND_S - 1, B, 1)
    t.assign(10 + BOUND_S + 1, B, 0)
    t.poll(200, B)
    assert [a.name for a in t.judged()] == [ANOMALY]


@pytest.mark.parametrize("after_ns, slow", [(kip848.REOWN_BOUND_NS - 1_000_000, False),
                                            (kip848.REOWN_BOUND_NS + 1_000_000, True)])
def test_the_reown_bound_at_one_ms_either_side(after_ns, slow):
    """`REOWN_BOUND_NS` (session timeout + heartbeat interval) to the ms: the partition A freed at
    10 s given to B 1 ms inside it is live, 1 ms past it is a slow rebalance."""
    t = Timeline()
    freed = _freed_by_a(t)
    given = t.assign(10 + after_ns / 1e9, B, 0)
    t.poll(100, B)
    found = t.judged()
    assert [(a.name, a.indices) for a in found] == ([(ANOMALY, (freed, given))] if slow else [])
