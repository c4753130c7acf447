"""Seeded schedules: reproducible, non-overlapping, a quiet tail, parameters each kind understands."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from kipcheck.faults.errors import FaultError
from kipcheck.faults.registry import DEFAULT_MIX, KINDS, OPT_IN, parse_kinds
from kipcheck.faults.schedule import PARAMS, QUIET_TAIL, WINDOWS, generate

kinds_st = st.lists(st.sampled_from(sorted(KINDS)), min_size=1, unique=True)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), kinds=kinds_st, duration=st.floats(10, 3600), intensity=st.floats(0.1, 4))
def test_same_seed_same_schedule(seed, kinds, duration, intensity):
    a = generate(seed, kinds, duration, "t", intensity)
    b = generate(seed, list(reversed(kinds)), duration, "t", intensity)  # the order kinds are given in is irrelevant
    assert [s.as_json() for s in a] == [s.as_json() for s in b]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32), kinds=kinds_st, duration=st.floats(10, 3600), intensity=st.floats(0.1, 4))
def test_windows_do_not_overlap_and_leave_a_quiet_tail(seed, kinds, duration, intensity):
    specs = generate(seed, kinds, duration, "t", intensity)
    for s in specs:
        assert s.kind in kinds and s.duration > 0 and s.start >= 0
        assert s.start + s.duration <= duration * (1 - QUIET_TAIL) + 1e-6
    for a, b in zip(specs, specs[1:]):
        assert a.start + a.duration < b.start


def test_different_seeds_give_different_schedules():
    runs = {tuple((s.kind, s.start) for s in generate(seed, list(DEFAULT_MIX), 300, "t")) for seed in range(20)}
    assert len(runs) == 20


def test_params_target_the_topic_and_a_partition():
    specs = generate(1, list(KINDS), 5400, "work", partitions=5)
    assert {s.kind for s in specs} == set(KINDS)  # an hour and a half draws every kind
    for s in specs:
        assert s.params["topic"] == "work"
        assert s.params["partition"] == "all" or 0 <= s.params["partition"] < 5


def test_every_kind_has_a_window_and_parameters():
    assert set(WINDOWS) == set(KINDS) == set(PARAMS)


def test_toxic_params_are_attributes_the_toxic_knows():
    from kipcheck.faults.toxics import TOXIC_KINDS
    import random
    for k in TOXIC_KINDS:
        drawn = PARAMS[k.name](random.Random(0))
        assert set(drawn) - {"target", "index", "stream", "toxicity"} <= set(k.defaults), k.name


def test_parse_kinds():
    assert parse_kinds("partition, latency,kill") == ["partition", "latency", "kill"]
    assert set(parse_kinds("all")) == set(KINDS) - OPT_IN
    assert "wipe-metadata" in parse_kinds("all,wipe-metadata")
    with pytest.raises(FaultError) as e:
        parse_kinds("partition,nope")
    assert "unknown fault 'nope'" in str(e.value) and "partition-bridge" in str(e.value)
    assert "\n" not in str(e.value)


def test_txn_schedule_keeps_times_and_kinds_and_targets_coordinators():
    from kipcheck.faults import schedule
    kinds = ["partition", "kill", "pause"]
    for seed in range(1, 9):
        plain = schedule.generate(seed, kinds, 60.0, "t")
        txn = schedule.generate(seed, kinds, 60.0, "t", transactional_ids=("kipcheck-txn-0", "kipcheck-txn-1"))
        assert [(s.kind, s.start, s.duration) for s in plain] == [(s.kind, s.start, s.duration) for s in txn]
        assert txn == schedule.generate(seed, kinds, 60.0, "t", transactional_ids=("kipcheck-txn-0", "kipcheck-txn-1"))
    hit = [s for seed in range(1, 9) for s in schedule.generate(seed, kinds, 60.0, "t", transactional_ids=("x",))
           if s.params.get("target") == "coordinator"]
    assert hit and all(s.params["transactional_id"] == "x" for s in hit)


def test_transaction_state_partition_is_kafkas():
    """Utils.abs(String.hashCode) % 50, checked against Java's hash codes of these strings."""
    from kipcheck.faults.targets import transaction_state_partition
    assert transaction_state_partition("a") == 97 % 50
    assert transaction_state_partition("polygenelubricants") == 0  # hashCode is Integer.MIN_VALUE
    assert transaction_state_partition("kipcheck-txn-0") == 38


def test_latency_on_a_coordinator_outlasts_the_producers_request_timeout():
    """Issue 22: a txn run's latency on a coordinator's client link is long enough that a producer
    times out and retries while its first request is still delayed; elsewhere latency keeps its
    seeded value."""
    from kipcheck.faults import schedule
    from kipcheck.harness.clients.workload import PRODUCER_REQUEST_TIMEOUT_MS
    specs = [s for seed in range(1, 30)
             for s in schedule.generate(seed, ["latency"], 60.0, "t", transactional_ids=("x", "y"))]
    on_coordinator = [s for s in specs if s.params["target"] == "coordinator"]
    elsewhere = [s for s in specs if s.params["target"] != "coordinator"]
    assert on_coordinator and elsewhere
    assert all(s.params["latency"] > PRODUCER_REQUEST_TIMEOUT_MS for s in on_coordinator)
    assert all(s.params["latency"] < PRODUCER_REQUEST_TIMEOUT_MS for s in elsewhere)
