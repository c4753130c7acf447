"""`pytest --kafka-matrix A,B`: the verdicts tests check are kept per release and the terminal
summary shows which KIP rules each release conforms to, side by side, written to
<basetemp>/kipcheck-matrix/summary.md and summary.json. A test file run in a pytest
subprocess with forged histories (no cluster: `kafka_dist` only resolves the cached jars)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORGED = '''
def test_forged(kafka_dist, history, kipcheck_check):
    for value, offset in (("a", 0), ("b", 1), ("c", 2)):
        history.invoke(0, "send", {"topic": "t", "partition": 0, "value": value}).ok(offset=offset)
    inv = {"broker": 1, "replica_id": -1, "rack": None, "session_id": 0, "session_epoch": -1, "version": 12,
           "topic": "t", "partition": 0, "fetch_offset": 1}
    history.invoke(9, "fetch", inv).ok(top_error="NONE", response_session_id=0, error="NONE", high_watermark=3,
                                        last_stable_offset=3, log_start_offset=0, preferred_read_replica=-1,
                                        records=[[1, "b"], [2, "c"]])
    assert kipcheck_check(history)["valid"] is True
'''


def test_matrix_prints_and_writes_the_release_summary(tmp_path):
    (tmp_path / "test_forged.py").write_text(FORGED)
    base = tmp_path / "base"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-c", str(ROOT / "pyproject.toml"),
                           "--rootdir", str(tmp_path), f"--basetemp={base}", "--kafka-matrix", "3.9.2,4.3.1",
                           str(tmp_path / "test_forged.py")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "2 passed" in out and "kipcheck: KIP conformance per release" in out, out[-3000:]
    summary = json.loads((base / "kipcheck-matrix" / "summary.json").read_text())["conformance"]
    assert summary["releases"] == ["3.9.2", "4.3.1"] and summary["runs"] == {"3.9.2": 1, "4.3.1": 1}
    rules = summary["rules"]
    assert {c["status"] for c in rules["KIP-392"]["kip392.records_committed"].values()} == {"holds"}
    assert rules["KIP-1023"]["kip1023.offset_order"]["3.9.2"]["status"] == "not in this release"
    assert rules["KIP-1166"]["kip1166.propagation_statistic"]["3.9.2"]["status"] == "not in this release"
    assert rules["KIP-1023"]["kip1023.offset_order"]["4.3.1"]["status"] == "not asked"
    md = (base / "kipcheck-matrix" / "summary.md").read_text()
    assert "| KIP-1166 | propagation_statistic | not in this release | not asked |" in md
    assert md in out.replace("\r", "")  # what was printed is what was written
