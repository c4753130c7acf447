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
    spec = importlib.util.spec_from_file_location("bench_checker", ROOT / "benchmarks" / "bench_checker.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    code_root, checker = bench.baseline_tree("HEAD", parent=tmp_path)
    found = subprocess.run([sys.executable, "-c", f"import {checker}.engine_local as m; print(m.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(code_root)}, cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.strip().startswith(str(tmp_path)), found.stdout
