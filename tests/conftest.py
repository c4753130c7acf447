"""The suite's own order, its split over two workers, and its time budget.

Pure tests (no live cluster, no Spark) run first, so a broken model or rule fails in seconds
rather than after half an hour of clusters; the order within each group is the collected one,
so a module's tests stay together. The seeded-bug matrix, the longest module by far (one
cluster, 26 windows one after another), is queued before all of them: under pytest-xdist
(`scripts/test.sh` runs two workers) one worker spends the matrix's quarter hour on it while
the other runs the pure tests and then the rest.

Each module is one unit of xdist's work, so its module-scoped cluster starts once, on one
worker; modules that must not overlap are one unit together (`SERIAL`). At the end the suite
prints where its time went, per module (setup, call and teardown together), so CI's log keeps
the budget a slow module spends."""
from __future__ import annotations

import collections
import time

import pytest

_SLOW_MARKS = ("cluster", "spark")
_spent: collections.Counter = collections.Counter()
_tests: collections.Counter = collections.Counter()


def _is_slow(item) -> bool:
    return any(item.get_closest_marker(m) for m in _SLOW_MARKS) or "/integration/" in str(item.fspath)


#: queued first: the module whose one fixture outlasts the rest of a worker's share
FIRST = ("tests/integration/test_seeded_bugs_live.py",)
#: modules that must not run beside each other, each tuple one group: both start a dockerd (in a namespace of its
#: own) and compare the host's iptables rules before and after
SERIAL = (("tests/integration/test_testcontainers.py", "tests/integration/test_beside_docker.py"),)


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


#: slow modules of over two minutes each (the time budget of 2026-11-29's CI log), queued before the other slow
#: ones so that the suite does not end on one worker finishing a long module while the other idles
HEAVY = ("tests/integration/test_liveness_run.py", "tests/integration/test_faults_run.py",
         "tests/integration/test_faults_storage_clock.py", "tests/integration/test_testcontainers.py",
         "tests/integration/test_run_end_to_end.py", "tests/integration/test_releases_run.py",
         "tests/integration/test_faults_process.py", "tests/test_spark_cluster.py")


def _order(item) -> int:
    """FIRST, then the pure tests, then HEAVY, then every other slow test."""
    module = _module(item)
    if module in FIRST:
        return 0
    if not _is_slow(item):
        return 1
    return 2 if module in HEAVY else 3


def _group(module: str) -> str:
    return next((serial[0] for serial in SERIAL if module in serial), module)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)  # stable: each group keeps the collected order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's `loadfile`, with the `SERIAL` modules one unit each. (Its `loadgroup` marks no
    test under pytest 9: it renames a test by a field pytest no longer reads.)"""
    from xdist.scheduler import LoadFileScheduling

    class ModuleGroups(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _group(nodeid.split("::", 1)[0])

    return ModuleGroups(config, log)


_started = time.monotonic()


def pytest_runtest_logreport(report):
    module = report.nodeid.split("::", 1)[0]
    _spent[module] += report.duration
    if report.when == "call":
        _tests[module] += 1


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    if not _spent:
        return
    total = sum(_spent.values())
    terminalreporter.section("time budget per module (setup + call + teardown)")
    for module, seconds in _spent.most_common(25):
        terminalreporter.write_line(f"{seconds:8.1f} s {100 * seconds / total:5.1f} %  {_tests[module]:4d} tests  {module}")
    rest = total - sum(s for _, s in _spent.most_common(25))
    if rest > 0:
        terminalreporter.write_line(f"{rest:8.1f} s {100 * rest / total:5.1f} %        {len(_spent) - 25} more modules")
    terminalreporter.write_line(f"{total:8.1f} s in all, {len(_spent)} modules, "
                                f"{time.monotonic() - _started:.1f} s of wall time")
