"""The local engine: plain Python, one process. For tests and histories that fit in memory.

It streams the history once, puts each record in the groups its rules name, then runs
every rule on every group. Gathering is `checks.verdict`'s, shared with the Spark engine.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable, Sequence

from checks.history import iter_history
from checks.verdict import Counts, build_verdict, default_rules, group_keys, no_cyclic_gc, run_rule


def check_records(records: Iterable[dict], rules: Sequence | None = None,
                  profile: str = "kip") -> dict:
    """Verdict for records in index order (already validated)."""
    rules = default_rules() if rules is None else list(rules)
    groups: dict[tuple[int, str], list[dict]] = defaultdict(list)
    counts = Counts()
    anomalies = []
    with no_cyclic_gc():
        for record in records:
            counts.add(record["f"], record["type"])
            for i, rule in enumerate(rules):
                for key in group_keys(rule, record):
                    groups[(i, key)].append(record)
        for (i, key), group in sorted(groups.items()):
            anomalies.extend(run_rule(rules[i], key, group, profile))
    return build_verdict(anomalies, counts, profile, engine="local")


def check_path(path: str | Path, rules: Sequence | None = None, profile: str = "kip") -> dict:
    """Verdict for a run directory, JSONL or Parquet history."""
    return check_records(iter_history(path), rules, profile)
