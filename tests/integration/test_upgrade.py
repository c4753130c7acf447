"""A rolling upgrade under fire, 3.9.2 -> 4.3.1 with partition and kill faults (issue 15):
the run ends with a verdict judged under the older release's profile, every roll step and
the metadata.version bump are records of the history, and nothing of the cluster is left."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.checks.mixed import mixed_windows
from tests.integration.run_support import leftovers

pytestmark = pytest.mark.cluster

OLD, NEW = "3.9.2", "4.3.1"


@pytest.mark.long  # three JVM restarts: 2-3 min; run with -m long (passed on the final tree: 129 s)
def test_upgrade_under_partition_and_kill(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--upgrade-from", OLD, "--upgrade-to", NEW,
                           "--faults", "partition,kill", "--seed", "8", "--duration", "40", "--quiet",
                           "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=1200)
    run_dir = next(tmp_path.iterdir())
    verdict = json.loads((run_dir / "verdict.json").read_text())
    # docs/releases.md ("Rolling upgrades", measured): this run is valid under kafka-3.9
    flagged = {k: len(x) for k, x in verdict["anomalies"].items() if x}
    assert proc.returncode == 0, f"exit {proc.returncode}: {flagged}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert verdict["valid"] is True, flagged
    assert verdict["profile"] == "kafka-3.9"  # the older release judges the mixed history
    assert f"rolling upgrade {OLD} -> {NEW}" in verdict["profile_note"]

    records = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["f"] == "upgrade"]
    rolls = [r for r in steps if r["value"]["step"] == "roll" and r["type"] == "ok"]
    assert [r["value"]["node"] for r in rolls] == [1, 2, 3], [r["value"] for r in steps]
    assert rolls[-1]["value"]["versions"] == {"1": NEW, "2": NEW, "3": NEW}
    assert rolls[0]["value"]["versions"] != rolls[-1]["value"]["versions"]  # a mixed cluster was seen
    finalize = [r for r in steps if r["value"]["step"] == "finalize"]
    assert [r["type"] for r in finalize] == ["invoke", "ok"]
    assert finalize[1]["value"]["finalized"] > finalize[0]["value"]["from_level"]  # metadata.version raised
    (start, end), = mixed_windows(records)  # one window, closed by the last roll
    assert start < rolls[0]["time"] and end == rolls[-1]["time"]
    # seed 8's schedule: a partition at 3.7 s and a kill at 14.5 s of the workload; the first
    # roll starts at 4 s, so faults hit the cluster while it is mixed
    kinds = {r["value"]["fault"] for r in records if r["f"] == "fault" and r["type"] == "invoke"}
    assert {"partition", "kill"} <= kinds
    under_fire = [r for r in records if r["f"] == "fault" and r["type"] == "ok" and start <= r["time"] <= end]
    assert under_fire, "no fault was injected or healed while the cluster was mixed"

    config = json.loads((run_dir / "config.json").read_text())
    assert config["upgrade"]["completed"] is True and config["upgrade"]["versions"] == {"1": NEW, "2": NEW, "3": NEW}
    page = (run_dir / "report" / "index.html").read_text()
    assert f"Rolling upgrade {OLD} → {NEW}" in page and f"{start / 1e9:.1f}–{end / 1e9:.1f} s" in page
    assert not leftovers(run_dir)


def test_upgrade_refuses_bad_input_in_one_line(tmp_path):
    for args, words in ((["--upgrade-from", NEW, "--upgrade-to", NEW], "nothing to roll"),
                        (["--upgrade-from", OLD], "needs both"),
                        (["--upgrade-from", "2.8.2", "--upgrade-to", NEW], "predates production KRaft"),
                        (["--upgrade-from", OLD, "--upgrade-to", NEW, "--kafka-version", NEW], "drop --kafka-version"),
                        (["--upgrade-from", OLD, "--upgrade-to", NEW, "--backend", "external", "--bootstrap", "x:9"],
                         "the native or the ssh backend, not external")):
        proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", *args, "--runs-dir", str(tmp_path),
                               "--quiet"], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not list(tmp_path.iterdir())  # refused before a run directory exists
