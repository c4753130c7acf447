"""The checker's entry point for the CLI and `kipcheck run`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from checks.profiles import choose_profile

ENGINES = ("local", "spark")


def check(path: str | Path, engine: str = "local", master: str | None = None,
          profile: str | None = None, rules: Sequence | None = None,
          recovery_bound: float | None = None, crash_loop: int | None = None) -> dict:
    """Check a run directory or a history file (JSONL or Parquet); return the verdict.

    `recovery_bound` (seconds) and `crash_loop` tune the liveness rule of the default rules
    (None: the run's recorded bound, else one from Kafka's defaults; checks/recovery.py).
    Raises `checks.history.HistoryError` (one-line message) for unreadable or invalid input."""
    profile = choose_profile(path, profile)
    if rules is None:
        from checks.recovery import choose_bound, liveness_rule
        from checks.verdict import default_rules
        rules = default_rules(liveness_rule(choose_bound(path, recovery_bound), crash_loop))
    if engine == "local":
        from checks.engine_local import check_path
        return check_path(path, rules, profile)
    if engine == "spark":
        from checks.engine_spark import check_path
        return check_path(path, rules, profile, master=master)
    raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")


def write_verdict(verdict: dict, path: str | Path) -> Path:
    """Write a verdict as JSON (a run directory gets `verdict.json`)."""
    p = Path(path)
    if p.is_dir():
        p = p / "verdict.json"
    p.write_text(json.dumps(verdict, indent=2, sort_keys=False) + "\n")
    return p
