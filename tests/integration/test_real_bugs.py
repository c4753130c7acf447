"""Bugs Kafka shipped, replayed on the release that had them and on the one that fixed them
(docs/real-bugs.md has the measured table). Each is named by an anomaly that says what went
wrong on the affected release and not on the fixed one, from a black-box run: no bug is
switched on. Long: real clusters for minutes each (`-m long`)."""
from __future__ import annotations

import pytest

from kipcheck.checks.api import check
from kipcheck.harness.progress import ProgressUI
from kipcheck.harness.run import RunOptions, run

pytestmark = [pytest.mark.long, pytest.mark.cluster]


def test_kip_1166_absent_on_4_0_is_named_under_kip_and_not_on_4_1(tmp_path):
    """4.0 parks an empty KRaft FETCH although the fetcher's HWM lags (no KIP-1166): a committed
    metadata change reaches the other brokers up to one parking window late. Under `kip` that is
    hwm-propagation-delay; kafka-4.0's profile accepts it within one window per change; 4.1 has
    the KIP and shows neither."""
    for version, absent in (("4.0.2", True), ("4.1.2", False)):
        run_dir, verdict = run(RunOptions(kafka_version=version, faults=[], seed=1, duration=60,
                                          runs_dir=str(tmp_path / version)), ProgressUI(quiet=True))
        assert verdict is not None and not verdict["anomalies"]["hwm-propagation-delay"], (version, run_dir)
        under_kip = check(run_dir, profile="kip")["anomalies"]["hwm-propagation-delay"]
        assert bool(under_kip) == absent, (version, under_kip, run_dir)


def test_kafka_14372_preferred_replica_outside_the_isr_on_3_3_1_and_not_on_3_3_2(tmp_path):
    """3.3.1's RackAwareReplicaSelector may name a follower that left the ISR as the preferred
    read replica (KAFKA-14372, fixed in 3.3.2). A controlled shutdown (`restart`) takes a follower
    out of the ISR while the prober, in its rack, asks the leader at the log start: flagged in 1 of
    3 seeds on 3.3.1 when measured (docs/real-bugs.md), so up to 5 seeds are tried there; 3.3.2
    must stay clean on 3."""
    def flagged(version, seed):
        _, verdict = run(RunOptions(kafka_version=version, faults=["restart"], seed=seed, duration=60,
                                    runs_dir=str(tmp_path / version)), ProgressUI(quiet=True))
        return verdict["anomalies"]["preferred-replica-violation"]

    assert any(flagged("3.3.1", seed) for seed in range(1, 6)), "not shown in 5 runs of 3.3.1"
    assert not [a for seed in range(1, 4) for a in flagged("3.3.2", seed)]


def test_kafka_16310_max_timestamp_answered_at_a_batchs_last_offset_on_3_7_and_not_on_3_8(tmp_path):
    """3.7 answers ListOffsets for the largest timestamp (-3) with the offset the segment recorded,
    a LogAppendTime or compressed batch's last one, not the first record stamped with it
    (KAFKA-16310, fixed in 3.8.0). Under `kip` that is time-offset-violation by
    kip734.max_timestamp_answer_allowed; kafka-3.7's profile knows it (max-timestamp-shallow-offset);
    3.8 shows neither. Measured: 9 of 9 answers that named an offset on 3.7.2, 0 of 11 on 3.8.1."""
    for version, affected in (("3.7.2", True), ("3.8.1", False)):
        run_dir, verdict = run(RunOptions(kafka_version=version, faults=[], seed=1, duration=45,
                                          runs_dir=str(tmp_path / version)), ProgressUI(quiet=True))
        assert verdict is not None and not verdict["anomalies"]["time-offset-violation"], (version, run_dir)
        under_kip = [a for a in check(run_dir, profile="kip")["anomalies"]["time-offset-violation"]
                     if a["rule"] == "kip734.max_timestamp_answer_allowed"]
        assert bool(under_kip) == affected, (version, under_kip[:2], run_dir)


def test_kafka_15665_move_completed_with_a_kept_replica_down_on_3_7_and_not_on_3_8(tmp_path):
    """3.7's controller completes a reassignment once the adding replicas are in the ISR, though a
    target replica it keeps is out of it (KAFKA-15665, fixed in 3.8.0). `reassign-while-down` stops
    one follower and moves the other to a fourth broker: on 3.7 the metadata log completes the move
    while the stopped one is down, which under `kip` is premature-reassignment-completion
    (kip455.completion_allowed) and under kafka-3.7 the known reassignment-completes-on-adding; 3.8
    waits for the stopped replica and shows neither."""
    for version, affected in (("3.7.2", True), ("3.8.1", False)):
        run_dir, verdict = run(RunOptions(kafka_version=version, brokers=4, faults=["reassign-while-down"], seed=1,
                                          duration=60, runs_dir=str(tmp_path / version)), ProgressUI(quiet=True))
        assert verdict is not None and not verdict["anomalies"]["premature-reassignment-completion"], (version, run_dir)
        assert verdict["coverage"]["kip455.completion_allowed"]["observations"] > 0, run_dir
        under_kip = check(run_dir, profile="kip")["anomalies"]["premature-reassignment-completion"]
        assert bool(under_kip) == affected, (version, under_kip[:2], run_dir)
