"""faults.plan: the kinds a run asked for, checked once before anything starts (names, what the
backend injects, the brokers they need), with the cluster they need and their schedule."""
from __future__ import annotations

import pytest

from kipcheck.faults import schedule
from kipcheck.faults.errors import FaultError
from kipcheck.faults.plan import FaultPlan
from kipcheck.faults.registry import DEFAULT_MIX, cluster_options

WHERE = {"seed": 3, "duration": 60.0, "topic": "t"}


def test_the_asked_kinds_their_cluster_and_the_seeds_schedule():
    plan = FaultPlan.asked(["partition", " latency", "partition", "clock-skew"], **WHERE)
    assert plan.kinds == ("partition", "latency", "clock-skew") and plan.refused == ()
    assert plan.cluster_options == cluster_options(plan.kinds)
    assert plan.cluster_options["proxied_clients"] and plan.cluster_options["fake_clocks"]
    assert list(plan.schedule) == schedule.generate(3, list(plan.kinds), 60.0, "t")


def test_all_is_the_default_mix_and_none_is_the_leader_isolation_and_empty_is_nothing():
    assert FaultPlan.asked(["all"], **WHERE).kinds == DEFAULT_MIX
    default = FaultPlan.asked(None, **WHERE)
    assert default.kinds is None and list(default.schedule) == schedule.single_partition(60.0, "t")
    assert FaultPlan.asked([], **WHERE).schedule == ()


def test_a_backend_injects_its_kinds_says_why_not_the_others_and_may_replace_the_default():
    def why(kind):
        return f"no {kind} here"
    plan = FaultPlan.asked(["partition", "kill", "latency"], runs={"kill", "latency"}, why_not=why, **WHERE)
    assert plan.kinds == ("kill", "latency") and plan.refused == (("partition", "no partition here"),)
    assert {s.kind for s in plan.schedule} <= {"kill", "latency"}
    assert FaultPlan.asked(None, runs={"kill"}, why_not=why, default=("kill",), **WHERE).kinds == ("kill",)


def test_unknown_kinds_and_too_few_brokers_are_one_line():
    with pytest.raises(FaultError, match="unknown fault 'meteor'; known faults: .*partition"):
        FaultPlan.asked(["partition", "meteor"], **WHERE)
    with pytest.raises(FaultError) as e:
        FaultPlan.asked(["kill", "broker-decommission"], brokers=3, **WHERE)
    assert str(e.value) == "broker-decommission needs 4 brokers, the run has 3: add --brokers 4"
    assert FaultPlan.asked(["broker-decommission"], brokers=4, **WHERE).kinds == ("broker-decommission",)
    assert FaultPlan.asked(["broker-decommission"], brokers=None, **WHERE)  # a cluster kipcheck does not start


def test_a_plan_of_given_specs_runs_them():
    specs = schedule.generate(1, ["kill"], 30.0, "t")
    plan = FaultPlan.of(specs)
    assert plan.kinds == ("kill",) and list(plan.schedule) == specs
    assert FaultPlan.of(()).schedule == ()
