"""Bugs Kafka shipped, replayed on the release that had them and on the one that fixed them
(docs/real-bugs.md has the measured table). Each is named by an anomaly that says what went
wrong on the affected release and not on the fixed one, from a black-box run: no bug is
switched on. Long: real clusters for minutes each (`-m long`)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kipcheck.checks.api import check
from kipcheck.harness.progress import ProgressUI
from kipcheck.harness.run import RunOptions, run

pytestmark = [pytest.mark.long, pytest.mark.cluster]
ROOT = Path(__file__).resolve().parents[2]


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


def test_kafka_14372_preferred_replica_outside_the_isr_is_a_regression_of_3_3_1(tmp_path):
    """3.3.1's RackAwareReplicaSelector may name a follower that left the ISR as the preferred
    read replica (KAFKA-14372, fixed in 3.3.2): `kipcheck qualify` against 3.3.2 exits 1 and
    names preferred-replica-violation among the regressions."""
    out = subprocess.run([sys.executable, "-m", "kipcheck", "qualify", "--quiet", "--kafka-version", "3.3.1",
                          "--baseline", "3.3.2", "--budget", "12m", "--duration", "45", "--dir", str(tmp_path / "q")],
                         capture_output=True, text=True, timeout=30 * 60, cwd=ROOT)
    result = json.loads((tmp_path / "q" / "qualify.json").read_text())
    assert out.returncode == 1, (out.stdout[-2000:], out.stderr[-2000:])
    assert "preferred-replica-violation" in [g["anomaly"] for g in result["regressions"]], result["regressions"]
