"""The suite's own order, its split over two workers, and its time budget.

Pure tests (no live cluster, no Spark) run first, so a broken model or rule fails in seconds
rather than after half an hour of clusters; the order within each group is the collected one,
so a module's tests stay together. The seeded-bug matrix, the longest module by far (one
cluster, 26 windows one after another), is queued before all of them: under pytest-xdist
(`scripts/test.sh` runs two workers) one worker spends the matrix's quarter hour on it while
the other runs the pure tests and then the rest.

Each module is one unit of xdist's work, so its module-scoped cluster starts once, on one
worker; modules that must not overlap are one unit together (`SERIAL`), and so are those that
share the plugin's session cluster (`SHARED_CLUSTER`). At the end the suite
prints where its time went, per module (setup, call and teardown together), so CI's log keeps
the budget a slow module spends."""
from __future__ import annotations

import collections
import os
import time

import pytest

from kipcheck.harness.backends.node import JIT_ENV

# The suite's Kafka JVMs compile with C1 alone (harness.backends.node.JIT_FLAGS), its runs' subprocesses too: a
# cluster starts on 40 % less CPU, and the suite's runs are too short for C2's code to pay back its compiles.
# Only timing changes, not what Kafka does; the main job (scripts/run.sh) keeps HotSpot's own tiers.
os.environ.setdefault(JIT_ENV, "c1")

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
#: the modules whose tests use the plugin's shared `cluster` (tests/test_suite_order.py finds them): one unit, run
#: together, so that one worker starts it once and stops it after the last of them (harness.pytest_plugin stops it
#: when the next test does not use it) and the other worker never starts one: idle, it costs ~0.15 of a core
SHARED_CLUSTER = tuple(f"tests/integration/test_{m}.py" for m in (
    "faults_process", "faults_disk", "faults_partitions", "observer", "prober", "share_prober", "share_workload",
    "tiered", "txn_workload", "workload_fatal"))
#: units of xdist's work of more than one module
UNITS = (*SERIAL, SHARED_CLUSTER)


def _module(item) -> str:
    return item.nodeid.split("::", 1)[0]


#: slow modules of over two minutes each (the time budget of 2026-11-29's CI log), queued before the other slow
#: ones so that the suite does not end on one worker finishing a long module while the other idles
HEAVY = ("tests/integration/test_liveness_run.py", "tests/integration/test_faults_run.py",
         "tests/integration/test_faults_storage_clock.py", "tests/integration/test_run_end_to_end.py",
         "tests/test_spark_cluster.py")


def _order(item) -> tuple[int, int]:
    """FIRST, then the pure tests, then the shared cluster's modules (together, so that without xdist
    too it starts once), then HEAVY, then every other slow test."""
    module = _module(item)
    if module in FIRST:
        return 0, 0
    if not _is_slow(item):
        return 1, 0
    if module in SHARED_CLUSTER:
        return 2, 0
    return (2 if module in HEAVY else 3), 1


def _group(module: str) -> str:
    return next((unit[0] for unit in UNITS if module in unit), module)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_order)  # stable: each group keeps the collected order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's `loadfile`, with each of `UNITS` one unit of work. (Its `loadgroup` marks no
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
