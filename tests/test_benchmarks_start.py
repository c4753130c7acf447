"""Every benchmark starts: its imports and arguments still match the code it measures (a
module move once left one failing at import, unseen, since nothing else runs them)."""
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
