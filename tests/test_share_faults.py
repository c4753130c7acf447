"""Share runs' faults (issue 31 §3): aimed at the share group's coordinators, latency past the lock.

The expected partitions come from Kafka 4.3.1 itself (java, kafka-clients and kafka-server-common
4.3.1 on the class path): Utils.abs(groupId.hashCode()) % 50 for the group coordinator
(GroupCoordinatorService.partitionFor) and Utils.abs(SharePartitionKey.asCoordinatorKey(group,
Uuid.fromString(id), p).hashCode()) % 50 for the share coordinator (ShareCoordinatorService.partitionFor).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kipcheck.faults import schedule
from kipcheck.faults.base import FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.targets import (group_coordinator_partition, java_partition_for, kafka_uuid_string,
                                     resolve_node, share_state_partition, transaction_state_partition)

GROUP = "kipcheck-share-kipcheck-a1b2c3"
KINDS = ["kill", "partition", "pause", "latency"]


@pytest.mark.parametrize("group, expected", [(GROUP, 8), ("kipcheck-share-kipcheck-000000", 12), ("g", 3),
                                             ("kipcheck-share-t-ffffff", 30)])
def test_group_coordinator_partition_is_kafkas(group, expected):
    assert group_coordinator_partition(group) == expected


@pytest.mark.parametrize("group, topic_id, partition, expected", [
    (GROUP, "AAAAAAAAAAAAAAAAAAAAAQ", 0, 28), (GROUP, "AAAAAAAAAAAAAAAAAAAAAQ", 2, 30),
    (GROUP, "Zx3vQ1ZyT8mXk9tB2dWq0g", 0, 12), (GROUP, "Zx3vQ1ZyT8mXk9tB2dWq0g", 2, 10),
    (GROUP, "n_JkM-8oR3ia2fB7cD9e1w", 0, 24), ("g", "Zx3vQ1ZyT8mXk9tB2dWq0g", 0, 33),
    ("g", "n_JkM-8oR3ia2fB7cD9e1w", 2, 25)])
def test_share_state_partition_is_kafkas(group, topic_id, partition, expected):
    assert share_state_partition(group, topic_id, partition) == expected


def test_one_java_hash_behind_every_coordinator():
    assert java_partition_for("polygenelubricants", 50) == 0  # hashCode is Integer.MIN_VALUE: Utils.abs gives 0
    assert transaction_state_partition("kipcheck-txn-0") == 38  # unchanged by the shared helper


def test_kafka_uuid_string_is_uuid_to_string():
    assert kafka_uuid_string(0, 1) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert kafka_uuid_string(-5, 7) == "__________sAAAAAAAAABw"  # new Uuid(-5L, 7L).toString()
    assert kafka_uuid_string(0x1234567890abcdef, -0x7edcba0987654321) == "EjRWeJCrze-BI0X2eJq83w"


@dataclass
class _View:
    topic: str
    partition: int
    leader: int
    replicas: tuple = (1, 2, 3)
    isr: tuple = (1, 2, 3)


@dataclass
class _Admin:
    leaders: dict  # topic -> {partition: leader}
    ids: dict = field(default_factory=dict)

    def partitions(self, topic):
        return [_View(topic, p, leader) for p, leader in self.leaders.get(topic, {}).items()]

    def topic_id(self, topic):
        return self.ids[topic]


@dataclass
class _Ctx:
    a: _Admin
    topic: str = "kipcheck"

    def admin(self):
        return self.a


def _ctx():
    return _Ctx(_Admin({"__consumer_offsets": {p: 100 + p for p in range(50)},
                        "__share_group_state": {p: 200 + p for p in range(50)},
                        "kipcheck": {0: 1, 1: 2, 2: 3}},
                       {"kipcheck": "Zx3vQ1ZyT8mXk9tB2dWq0g"}))


def test_resolve_the_share_groups_coordinators():
    ctx = _ctx()
    assert resolve_node(ctx, FaultSpec("kill", 0, 1, {"target": "group-coordinator", "group": GROUP})) == 108
    spec = FaultSpec("kill", 0, 1, {"target": "share-coordinator", "group": GROUP, "topic": "kipcheck", "partition": 2})
    assert resolve_node(ctx, spec) == 210


@pytest.mark.parametrize("params, needs", [({"target": "group-coordinator"}, "group"),
                                           ({"target": "share-coordinator", "partition": 0}, "group"),
                                           ({"target": "coordinator"}, "transactional_id")])
def test_a_coordinator_target_without_its_key_is_one_line(params, needs):
    with pytest.raises(FaultError) as e:
        resolve_node(_ctx(), FaultSpec("kill", 0, 1, params))
    assert f"needs the param {needs!r}" in str(e.value) and "\n" not in str(e.value)


def test_share_schedule_keeps_times_and_kinds_and_is_seeded():
    for seed in range(1, 13):
        plain = schedule.generate(seed, KINDS, 120.0, "t")
        share = schedule.generate(seed, KINDS, 120.0, "t", share_group=GROUP)
        assert [(s.kind, s.start, s.duration) for s in plain] == [(s.kind, s.start, s.duration) for s in share]
        assert share == schedule.generate(seed, KINDS, 120.0, "t", share_group=GROUP)


def test_share_schedule_aims_at_both_coordinators_and_leaves_half_on_partitions():
    specs = [s for seed in range(1, 13) for s in schedule.generate(seed, KINDS, 120.0, "t", share_group=GROUP)]
    targets = [s.params["target"] for s in specs if s.kind in schedule.COORDINATOR_KINDS]
    assert {"group-coordinator", "share-coordinator"} <= set(targets)
    assert {"leader", "follower"} & set(targets)
    for s in specs:
        if s.params["target"] in schedule.SHARE_COORDINATOR_TARGETS:
            assert s.params["group"] == GROUP and "partition" in s.params and "topic" in s.params


def test_share_latency_outlasts_the_record_lock():
    from kipcheck.harness.clients.workload_options import WorkloadOptions
    lock = WorkloadOptions(workload="share").share_lock_ms
    latencies = [s.params["latency"] for seed in range(1, 13)
                 for s in schedule.generate(seed, ["latency"], 120.0, "t", share_group=GROUP)]
    assert latencies and min(latencies) > lock
    assert min(schedule.SHARE_LATENCY_MS) > lock


def test_runs_without_a_share_group_are_unchanged():
    for seed in range(1, 13):
        plain = schedule.generate(seed, KINDS, 120.0, "t")
        assert plain == schedule.generate(seed, KINDS, 120.0, "t", share_group=None)
        assert all(s.params.get("target") not in schedule.SHARE_COORDINATOR_TARGETS for s in plain)
        assert all(s.params["latency"] <= 500 for s in plain if s.kind == "latency")


def test_the_share_group_is_named_before_the_run_for_the_share_workload_only():
    from kipcheck.harness.clients.workload_options import WorkloadOptions
    assert WorkloadOptions(workload="share").with_share_group("abc123").share_group == "kipcheck-share-kipcheck-abc123"
    assert WorkloadOptions(workload="share", share_group="x").with_share_group("abc123").share_group == "x"
    assert WorkloadOptions().with_share_group("abc123").share_group is None
