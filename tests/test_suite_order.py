"""The suite's own scheduling (tests/conftest.py) names real modules: a renamed file would
silently drop out of FIRST or SERIAL, and two docker tests would overlap."""
from pathlib import Path

from tests import conftest

ROOT = Path(__file__).resolve().parents[1]


def test_every_module_named_for_the_schedule_exists():
    named = [*conftest.FIRST, *conftest.HEAVY, *(m for serial in conftest.SERIAL for m in serial)]
    assert [m for m in named if not (ROOT / m).is_file()] == []


def test_serial_modules_are_one_unit_and_others_their_own():
    for serial in conftest.SERIAL:
        assert len({conftest._group(m) for m in serial}) == 1
    assert conftest._group("tests/test_schedule.py") == "tests/test_schedule.py"


def test_modules_that_start_dockerd_are_all_in_one_serial_unit():
    """Each module that starts a dockerd compares the host's iptables rules before and after."""
    call = "dockerd_namespace" + "("  # spelled apart, or this file would count itself
    starters = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if call in p.read_text())
    assert starters and any(set(starters) <= set(serial) for serial in conftest.SERIAL), starters
