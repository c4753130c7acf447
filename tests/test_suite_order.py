"""The suite's own scheduling (tests/conftest.py) names real modules: a renamed file would
silently drop out of FIRST or a unit, and two docker tests would overlap, or two workers start a
shared cluster each."""
import os
import subprocess
import sys
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_named_for_the_schedule_exists():
    named = [*conftest.FIRST, *conftest.HEAVY, *(m for unit in conftest.UNITS for m in unit)]
    assert [m for m in named if not (ROOT / m).is_file()] == []


def test_each_unit_is_one_group_and_other_modules_their_own():
    for unit in conftest.UNITS:
        assert len({conftest._group(m) for m in unit}) == 1
    assert conftest._group("tests/test_schedule.py") == "tests/test_schedule.py"


def test_modules_that_start_dockerd_are_all_in_one_serial_unit():
    """Each module that starts a dockerd compares the host's iptables rules before and after."""
    call = "dockerd_namespace" + "("  # spelled apart, or this file would count itself
    starters = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if call in p.read_text())
    assert starters and any(set(starters) <= set(serial) for serial in conftest.SERIAL), starters


#: prints each collected module whose tests use the plugin's shared `cluster` (its own fixture, not a module's)
_FINDER = '''
def pytest_collection_finish(session):
    from kipcheck.harness.pytest_plugin import _uses_shared_cluster
    for m in sorted({i.nodeid.split("::")[0] for i in session.items if _uses_shared_cluster(i)}):
        print("USES-SHARED-CLUSTER", m)
'''


def test_the_modules_that_use_the_shared_cluster_are_its_unit(tmp_path):
    """All of them, long forms too: a module missing from SHARED_CLUSTER would start a second cluster
    on the other worker; one named there that no longer uses it would hold the unit together for nothing."""
    (tmp_path / "shared_cluster_finder.py").write_text(_FINDER)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-p", "shared_cluster_finder", "-m", "long or not long", "tests"],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
                          capture_output=True, text=True, timeout=300)
    found = sorted(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("USES-SHARED-CLUSTER "))
    assert found and found == sorted(conftest.SHARED_CLUSTER), proc.stdout[-2000:] + proc.stderr[-2000:]
