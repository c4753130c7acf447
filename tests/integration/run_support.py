"""`kipcheck run` as a user runs it, for tests that judge the whole command: its terminal
output, its exit code and the run directory it leaves."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FinishedRun:
    terminal: str  # stdout + stderr
    run_dir: Path
    verdict: dict
    config: dict


def run_to_verdict(runs: Path, *args: str, timeout: float = 600) -> FinishedRun:
    """Run `kipcheck run --runs-dir runs *args`; assert it printed no traceback and exited by
    its verdict (0 valid, 1 anomalies, 3 unknown), never 2 (a failure of kipcheck)."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--runs-dir", str(runs), *args],
                          capture_output=True, text=True, timeout=timeout)
    terminal = proc.stdout + proc.stderr
    assert "Traceback" not in terminal, terminal
    [run_dir] = Path(runs).iterdir()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert proc.returncode == {True: 0, False: 1}.get(verdict["valid"], 3), terminal
    return FinishedRun(terminal, run_dir, verdict, json.loads((run_dir / "config.json").read_text()))
