"""`kipcheck campaign` on live clusters: a campaign killed midway resumes where it stopped,
a run that errors does not stop it, the one check over all runs agrees run by run with
checking each run alone, and the summary files say so."""
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kipcheck.checks.api import check
from kipcheck.harness.backends import releases
from kipcheck.checks.verdict import comparable
from kipcheck.harness.run import RunOptions, gate_uncovered

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


def campaign(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "kipcheck.harness.cli", "campaign", "--quiet", *args],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def statuses(directory: Path) -> dict:
    try:
        return {k: v["status"] for k, v in json.loads((directory / "campaign.json").read_text())["runs"].items()}
    except (OSError, ValueError, KeyError):
        return {}


@pytest.mark.long  # 174 s on a fresh clone's suite (2026-11-27)
def test_killed_campaign_resumes_and_one_check_agrees_with_each_run(tmp_path):
    d = tmp_path / "night"
    # a version Maven cannot resolve errors at once; the campaign goes on to the real runs
    first = campaign("--seeds", "1-2", "--faults", "none", "--kafka-versions", "0.0.0-nope,",
                     "--duration", "8", "--dir", str(d), start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and list(statuses(d).values()).count("done") < 1:
            assert first.poll() is None, first.communicate()[1][-2000:]
            time.sleep(1)
        os.killpg(first.pid, signal.SIGKILL)  # harness and its run die mid-campaign
    finally:
        first.wait()
    before = statuses(d)
    assert list(before.values()).count("error") == 2 and list(before.values()).count("done") == 1

    resumed = campaign("--dir", str(d))  # no plan given: the saved one
    out, err = resumed.communicate(timeout=900)
    assert resumed.returncode == 2, err[-2000:]  # the two unresolvable runs are errors
    after = statuses(d)
    assert after == {**before, **{k: "done" for k, v in before.items() if v != "error"},
                     **{k: "done" for k in after if k not in before}}
    summary = json.loads((d / "summary.json").read_text())
    runs = {r["key"]: r for r in summary["runs"]}
    done = [r for r in runs.values() if r["status"] == "done"]
    assert len(done) == 2 and all(r["outcome"] == "VALID" for r in done)
    for r in done:  # the campaign's one check == checking the run alone, as `kipcheck run` does (gate included)
        own = json.loads((Path(r["run_dir"]) / "verdict.json").read_text())
        alone = gate_uncovered(check(r["run_dir"]), Path(r["run_dir"]), RunOptions())
        assert own["uncovered"] == [] and comparable(own) == comparable(alone)
        assert r["reproduce"].startswith("kipcheck run --seed ") and "--faults none" in r["reproduce"]
        config = json.loads((Path(r["run_dir"]) / "config.json").read_text())
        assert config["reproduce"] == r["reproduce"]
    suite = ET.parse(d / "junit.xml").getroot()
    assert suite.get("tests") == "4" and suite.get("errors") == "2" and suite.get("failures") == "0"
    page = (d / "summary.html").read_text()
    assert "VALID" in page and "ERROR" in page and "kipcheck run --seed 2" in page
    # which KIP rules each release conforms to: one column per release, none for errored runs
    release = summary["conformance"]
    # the default is named as the release it is (the pinned one), in the plan and the summary
    default = releases.DEFAULT_VERSION
    assert release["releases"] == ["0.0.0-nope", default] and release["runs"] == {"0.0.0-nope": 0, default: 2}
    assert all(f"--kafka-version {default}" in r["reproduce"] for r in done)
    cells = [c for kip in release["rules"].values() for c in kip.values()]
    assert all(c["0.0.0-nope"] is None and c[default]["status"] != "fails" for c in cells)  # both VALID
    assert "| KIP-392 | records_committed | no verdict | " in (d / "summary.md").read_text()
    assert "KIP conformance per release" in out and "KIP conformance per release" in page
