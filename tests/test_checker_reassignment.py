"""KIP-455 reassignment completion (`premature-reassignment-completion`, checks/rules/reassignment_rules.py)
on hand-made metadata logs: a move of t/0 from [1, 2, 3] to [1, 2, 4] while broker 2 is out of
the ISR. Kafka 3.3-3.7 complete it once 4 is in sync (KAFKA-15665); 3.8+ wait for 2."""
from __future__ import annotations

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.reassignment_rules import ANOMALY, ReassignmentRule
from kipcheck.reference_model import kip455, profiles


def log(*changes: dict, create: dict | None = None) -> list[dict]:
    """`partition_change` records of t/0 in metadata log order; the first creates [1, 2, 3]."""
    first = create or {"kind": "create", "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": 1, "leader_epoch": 0,
                       "partition_epoch": 0, "adding": [], "removing": []}
    out = []
    for offset, value in enumerate((first, *changes)):
        out.append({"index": offset, "time": offset * 1000, "process": "metadata-log", "type": "ok",
                    "f": "partition_change", "value": {"kind": "change", "topic": "t", "partition": 0,
                                                       "offset": 100 + offset, **value}})
    return out


MOVE = {"replicas": [1, 2, 4, 3], "adding": [4], "removing": [3]}  # AlterPartitionReassignments to [1, 2, 4]
TWO_DOWN = {"isr": [1, 3]}  # broker 2's controlled shutdown
FOUR_IN = {"isr": [1, 3, 4]}  # the adding replica caught up
TWO_BACK = {"isr": [1, 3, 4, 2]}


def complete(isr):
    return {"replicas": [1, 2, 4], "isr": isr, "adding": [], "removing": []}


def judged(records, profile="kip"):
    return ReassignmentRule().check([r for r in records if [*ReassignmentRule().group_keys(r)]], profile)


def test_a_move_completed_with_a_kept_replica_out_of_the_isr_is_flagged_with_its_two_records():
    [a] = judged(log(MOVE, TWO_DOWN, FOUR_IN, complete([1, 4])))
    assert a.name == ANOMALY and a.indices == (3, 4) and not a.known
    assert a.details["out_of_isr"] == [2] and a.details["adding"] == [4] and a.details["offset"] == 104


def test_3_7_knows_it_as_the_adding_replicas_sufficing_and_3_8_does_not():
    [old] = judged(log(MOVE, TWO_DOWN, FOUR_IN, complete([1, 4])), "kafka-3.7")
    assert old.known and old.details["deviations"] == [profiles.REASSIGNMENT_COMPLETES_ON_ADDING]
    [new] = judged(log(MOVE, TWO_DOWN, FOUR_IN, complete([1, 4])), "kafka-3.8")
    assert not new.known


def test_the_same_move_completed_once_every_target_replica_is_back_holds():
    assert judged(log(MOVE, TWO_DOWN, FOUR_IN, TWO_BACK, complete([1, 4, 2]))) == []


def test_one_target_replica_short_of_the_isr_is_enough_to_flag():
    """Just outside the bound: every target replica but the new one in sync."""
    [a] = judged(log(MOVE, FOUR_IN, complete([1, 2])))
    assert a.details["out_of_isr"] == [4]
    assert judged(log(MOVE, FOUR_IN, complete([1, 2])), "kafka-3.7")[0].known is False  # 4 was adding: no release does it


def test_a_cancelled_move_goes_back_to_the_original_replicas_without_a_condition():
    assert judged(log(MOVE, TWO_DOWN, {"replicas": [1, 2, 3], "isr": [1, 3], "adding": [], "removing": []})) == []


def test_a_pure_shrink_needs_the_kept_replicas_in_sync_and_3_7_needed_nothing():
    shrink = {"replicas": [1, 2, 3], "removing": [3]}  # to [1, 2]: nothing to add
    [a] = judged(log(shrink, {"isr": [1, 3]}, {"replicas": [1, 2], "isr": [1], "removing": []}))
    assert a.details["out_of_isr"] == [2]
    assert judged(log(shrink, {"isr": [1, 3]}, {"replicas": [1, 2], "isr": [1], "removing": []}), "kafka-3.3")[0].known


def test_a_move_already_in_progress_in_a_snapshot_is_judged_from_it():
    snapshot = {"kind": "create", "replicas": [1, 2, 4, 3], "isr": [1, 3, 4], "adding": [4], "removing": [3],
                "leader": 1, "leader_epoch": 3, "partition_epoch": 9}
    assert [a.indices for a in judged(log(complete([1, 4]), create=snapshot))] == [(0, 1)]


def test_records_of_other_partitions_do_not_mix():
    other = [{**r, "value": {**r["value"], "partition": 1}} for r in log(MOVE, TWO_DOWN, TWO_BACK)]
    mine = log(MOVE, FOUR_IN)
    records = [*mine, *({**r, "index": len(mine) + i} for i, r in enumerate(other))]
    records.append({"index": len(records), "time": 0, "process": "metadata-log", "type": "ok", "f": "partition_change",
                    "value": {"kind": "change", "topic": "t", "partition": 1, "offset": 900, **complete([1, 4, 2])}})
    assert judged(records) == []


def test_the_verdict_counts_every_end_of_a_move_and_fails_the_kip455_row():
    v = check_records(log(MOVE, TWO_DOWN, FOUR_IN, complete([1, 4])))
    assert v["valid"] is False and v["counts"]["anomalies"][ANOMALY] == 1
    assert v["coverage"]["kip455.completion_allowed"]["observations"] == 1
    assert v["conformance"]["KIP-455"]["kip455.completion_allowed"]["status"] == "fails"
    cancelled = check_records(log(MOVE, {"replicas": [1, 2, 3], "adding": [], "removing": []}))
    assert cancelled["counts"]["anomalies"][ANOMALY] == 0 and cancelled["coverage"]["kip455.completion_allowed"]["observations"] == 1


@pytest.mark.parametrize("before, after, completes", [
    (kip455.created([1, 2, 4, 3], [1, 2, 3, 4], [4], [3]), kip455.created([1, 2, 4], [1, 2, 4]), True),
    (kip455.created([1, 2, 4, 3], [1, 2, 3, 4], [4], [3]), kip455.created([1, 2, 3], [1, 2, 3]), False),  # cancelled
    (kip455.created([1, 2, 3], [1, 2, 3]), kip455.created([1, 2, 3], [1, 2]), False),  # no move in progress
    (kip455.created([1, 2, 4, 3], [1, 2, 3], [4], [3]), kip455.created([1, 2, 4, 3], [1, 3], [4], [3]), False),
])
def test_completes_tells_a_completion_from_a_cancel_and_from_an_isr_change(before, after, completes):
    assert kip455.completes(before, after) is completes
