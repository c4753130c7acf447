"""Driving `kipcheck run` as a user does (a subprocess): its terminal output, its exit code,
the run directory it leaves, and what it left behind."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kipcheck.harness.backends.network import list_namespaces
from kipcheck.harness.backends.state import all_states


def kipcheck(*args, prefix: tuple[str, ...] = (), **kw) -> subprocess.Popen:
    """`kipcheck ARGS` in the background; `prefix` runs it elsewhere (e.g. `ip netns exec NS`)."""
    return subprocess.Popen([*prefix, sys.executable, "-m", "kipcheck.harness.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def kafka_args(version) -> list[str]:
    return ["--kafka-version", version] if version else []


def jvms_under(path: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", "kafka.Kafka"], capture_output=True, text=True).stdout
    return [l for l in out.splitlines() if str(path) in l]


def cluster_states(run_dir: Path):
    """The state files of the cluster a run in `run_dir` started (not other tests' clusters)."""
    return [s for s in all_states() if s.data.get("root") == str(run_dir / "cluster")]


def leftovers(run_dir: Path) -> list[str]:
    left = jvms_under(run_dir)
    states = cluster_states(run_dir)
    left += [f"state {s.data['cluster_id']}" for s in states]
    left += [ns for ns in list_namespaces() for s in states if s.data["cluster_id"] in ns]
    return left


@contextlib.contextmanager
def background_run(runs_dir: Path, kafka_version, *args, prefix: tuple[str, ...] = ()):
    """A `kipcheck run` in the background; killed at the end if it is still going."""
    proc = kipcheck("run", "--runs-dir", str(runs_dir), "--quiet", *args, *kafka_args(kafka_version), prefix=prefix)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def history_once_it_shows(proc, runs_dir: Path, marker: str, timeout: float) -> Path:
    """Wait until the run's history.jsonl contains `marker`; fail if the run exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = list(runs_dir.iterdir())
        history = runs[0] / "history.jsonl" if runs else None
        if history and history.exists() and marker in history.read_text():
            return history
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)
    pytest.fail(f"the run's history never showed {marker}")


def verdict_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "verdict.json").read_text())


@dataclass
class FinishedRun:
    terminal: str  # stdout + stderr
    run_dir: Path
    verdict: dict
    config: dict


def run_to_verdict(runs: Path, *args: str, timeout: float = 600) -> FinishedRun:
    """Run `kipcheck run --runs-dir runs *args`; assert it printed no traceback and exited by
    its verdict (0 valid, 1 anomalies, 3 unknown), never 2 (a failure of kipcheck)."""
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--runs-dir", str(runs), *args],
                          capture_output=True, text=True, timeout=timeout)
    terminal = proc.stdout + proc.stderr
    assert "Traceback" not in terminal, terminal
    [run_dir] = Path(runs).iterdir()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert proc.returncode == {True: 0, False: 1}.get(verdict["valid"], 3), terminal
    return FinishedRun(terminal, run_dir, verdict, json.loads((run_dir / "config.json").read_text()))
