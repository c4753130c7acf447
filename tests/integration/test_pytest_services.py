"""The example tests (examples/test_example_workload.py) as a user runs them, under allure-pytest: it passes,
its Allure test carries the verdict, the Kafka version and seed, the fault schedule as it ran, a
history excerpt and every node's log; its teardown, after `verify()` closed the history, heals
without the `I/O operation on closed file` error it used to raise; no dependency warnings."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.long  # 85 s
def test_example_test_under_allure(tmp_path):
    results = tmp_path / "allure-results"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           f"--alluredir={results}", "--kipcheck-seed", "5",
                           "examples/test_example_workload.py"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "2 passed in" in out, out[-3000:]
    assert "closed file" not in out and "DeprecationWarning" not in out and " warning" not in out, out[-3000:]
    tests = {t["name"]: t for t in (json.loads(p.read_text()) for p in results.glob("*-result.json"))}
    assert set(tests) == {"test_acks_all_survives_isolating_the_leader", "test_a_fault_plan_runs_with_the_workload"}
    assert all(t["status"] == "passed" for t in tests.values())
    test = tests["test_acks_all_survives_isolating_the_leader"]
    assert {"name": "tag", "value": "verdict valid"} in test["labels"]
    params = {p["name"]: p["value"] for p in test["parameters"]}
    assert params["seed"] == "5" and params["kafka_version"].strip("'").startswith("4.")
    attachments = {a["name"]: results / a["source"] for a in test["attachments"]}
    assert {"verdict", "fault schedule", "history excerpt"} <= set(attachments)
    logs = [n for n in attachments if n.startswith("node log ") and n.endswith("/server.log")]
    assert len(logs) >= 3
    faults = json.loads(attachments["fault schedule"].read_text())
    phases = [(r["value"]["fault"], r["value"]["phase"], r["type"]) for r in faults]
    assert ("partition", "start", "ok") in phases and ("partition", "stop", "ok") in phases
    assert ("heal-all", "stop", "ok") in phases  # verify() healed everything before its final reads
    verdict = json.loads(attachments["verdict"].read_text())
    assert verdict["valid"] is True and verdict["counts"]["reads"] > 0
    planned = json.loads(next(results / a["source"] for a in tests["test_a_fault_plan_runs_with_the_workload"]["attachments"]
                              if a["name"] == "fault schedule").read_text())
    assert [(r["value"]["fault"], r["value"]["phase"], r["type"]) for r in planned][:4] == [
        ("partition", "start", "invoke"), ("partition", "start", "ok"), ("partition", "stop", "invoke"),
        ("partition", "stop", "ok")]
