"""The seed-25 `hwm-regression` (docs/findings.md section 3): a follower's copy of its new leader's
HWM, judged against the leader's answers.

`kipcheck run --faults kill --duration 45 --seed 25` on 4.3.1 (stop 25's note, 2026-11-27): in
leader epoch 1 of kipcheck/2 (leader 1, broker 3 killed at 25.9 s and rejoining), follower 2
answered HWM 392 (33.78 s), leader 1 had answered 372 (33.72 s) and 425 (34.06 s), then follower 2
answered 372 four times (34.08-34.14 s), later 904. The history is lost; these are its figures.

Kafka 4.3.1 (`kafka.cluster.Partition.fetchRecords`, checked with javap): a follower's fetch is
read first (`readFromLocalLog`: the response's HWM is the leader's HWM then), and only afterwards
does it move the leader's HWM (`updateFollowerFetchState` -> `maybeIncrementLeaderHW`). So the
fetch that raised leader 1 from 372 to 425 carried 372 back to follower 2, which applied it
(`ReplicaFetcherThread.processPartitionData` -> `UnifiedLog.maybeUpdateHighWatermark`: WARN
"Non-monotonic update of high watermark from 392 to 372") only when it processed that response:
the prober, which asks the follower right after the leader (harness/clients/prober.py,
`kip392_cases`), can see 425 on the leader and still 392 on the follower first. The copy's depth
is bounded by the leader's HWM when it took the epoch (what it held from the epoch before), not
by what it answered in the new epoch before the follower's last uncopied answer.

The bound (`fetch_rules._leader_floor`) once counted the leader's answers in the new epoch before
the follower's last uncopied answer and flagged that sequence; it now takes only what the leader
held from the epoch before, and a copy below that stays a regression (just outside the bound)."""
from __future__ import annotations

import pytest

from kipcheck.checks.rules.fetch_rules import HighWatermarkRule
from tests.support.histories import fetch, history, meta, names, run


def _seed25(*, leader_proof_in_new_epoch=True, second_uncopied=True, leader_epoch0_hwm=372):
    """Follower 2 under leader 3 (epoch 0), then under leader 1 (epoch 1), with the seed-25 figures."""
    leader = lambda hwm, epoch: fetch(0, hwm=hwm, current_leader_epoch=epoch, broker=1)  # noqa: E731
    follower = lambda hwm, epoch=1: fetch(0, hwm=hwm, current_leader_epoch=epoch)  # noqa: E731
    return history(
        meta(0, 3), follower(380, 0), follower(392, 0),
        leader(leader_epoch0_hwm, 0),  # broker 1, a follower in epoch 0, behind follower 2
        meta(1, 1),  # broker 3 gone: leader 1, epoch 1
        leader(372, 1),  # leader 1 took epoch 1 with the HWM it had (33.72 s)
        follower(392),  # follower 2 carried 392 into epoch 1 (33.78 s)
        # follower 2's fetch F was read at 372, then moved leader 1 to 425 (34.06 s)
        *([leader(425, 1)] if leader_proof_in_new_epoch else []),
        *([follower(392)] if second_uncopied else []),  # F's answer (HWM 372) not applied yet
        # applied: "Non-monotonic update of high watermark from 392 to 372" (34.08-34.14 s)
        follower(372), follower(372), follower(372),
        follower(904), meta(1, 1))


def _verdict(records, profile="kafka-4.3"):
    found = [a for a in run(HighWatermarkRule(), records, profile) if a.name == "hwm-regression"]
    return names(found), names(found, known=True), " ".join(a.message for a in found)


def test_the_copy_before_any_later_leader_answer_is_the_known_deviation():
    """Without a follower answer after leader 1's 425, the bound already accepts the copy."""
    anomalies, known, _ = _verdict(_seed25(second_uncopied=False))
    assert anomalies == [] and known == ["hwm-regression"] * 3
    assert _verdict(_seed25(second_uncopied=False), "kip")[0] == ["hwm-regression"] * 3  # never the KIP's


def test_a_copy_below_what_the_leader_held_when_it_took_the_epoch_stays_a_regression():
    """Leader 1 answered 425 in epoch 0: it led epoch 1 with at least 425, so no fetch of epoch 1
    could carry 372 back."""
    anomalies, _, message = _verdict(_seed25(leader_proof_in_new_epoch=False, leader_epoch0_hwm=425))
    assert anomalies == ["hwm-regression"] and "below the HWM 425 its new leader 1 had proven" in message


def test_the_seed25_sequence_is_the_known_deviation():
    anomalies, known, _ = _verdict(_seed25())
    assert anomalies == [] and known == ["hwm-regression"] * 3
