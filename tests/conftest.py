"""The suite's own order and time budget.

Pure tests (no live cluster, no Spark) run first, so a broken model or rule fails in seconds
rather than after half an hour of clusters; the order within each group is the collected one,
so a module's tests stay together. At the end the suite prints where its time went, per module
(setup, call and teardown together), so CI's log keeps the budget a slow module spends."""
from __future__ import annotations

import collections

import pytest

_SLOW_MARKS = ("cluster", "spark")
_spent: collections.Counter = collections.Counter()
_tests: collections.Counter = collections.Counter()


def _is_slow(item) -> bool:
    return any(item.get_closest_marker(m) for m in _SLOW_MARKS) or "/integration/" in str(item.fspath)


def pytest_collection_modifyitems(config, items):
    items.sort(key=_is_slow)  # stable: each group keeps the collected order


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
    terminalreporter.write_line(f"{total:8.1f} s in all, {len(_spent)} modules")
