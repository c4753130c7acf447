"""Every benchmark starts: its imports and arguments still match the code it measures (a
module move once left one failing at import, unseen, since nothing else runs them)."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = sorted((ROOT / "benchmarks").glob("bench_*.py"))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_benchmarks():
    assert len(BENCHMARKS) >= 5, BENCHMARKS


@pytest.mark.parametrize("bench", BENCHMARKS, ids=lambda p: p.name)
def test_benchmark_imports_and_parses_its_arguments(bench):
    done = subprocess.run([sys.executable, str(bench), "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout, done.stderr[-2000:]


def test_the_checker_baseline_runs_its_own_revision_not_this_tree(tmp_path):
    """bench_checker's --baseline once timed this tree twice: the extracted revision's
    `kipcheck.checks` lost to the editable install, so every speed-up it printed was ~1."""
    code_root, checker = _load("bench_checker").baseline_tree("HEAD", parent=tmp_path)
    found = subprocess.run([sys.executable, "-c", f"import {checker}.engine_local as m; print(m.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(code_root)}, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.strip().startswith(str(tmp_path)), found.stdout


def test_the_recording_ratio_interval_narrows_with_more_pairs_and_collapses_without_spread():
    """bench_history's interval is what a run's ratio is read against the 0.9 target with."""
    interval = _load("bench_history").ratio_interval
    assert interval([{"recorded": 80.0, "unrecorded": 100.0}] * 6) == (0.8, 0.8, 0.8)
    spread = [{"recorded": r, "unrecorded": 100.0} for r in (60.0, 120.0, 85.0, 95.0, 70.0)]
    point, low, high = interval(spread)
    assert point == 430.0 / 500.0 and low < point < high
    assert 0.6 <= low and high <= 1.2  # a resampled sum stays within the pairs' own extremes
    _, low4, high4 = interval(spread * 4)
    assert high4 - low4 < (high - low) * 0.75  # four times the pairs: about half the width
    assert interval(spread + [{"recorded": 5.0}]) == (point, low, high)  # a pair missing a slice is left out
    with pytest.raises(ValueError):
        interval([{"recorded": 5.0}])
