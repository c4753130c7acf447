"""The checker's entry point for the CLI and `kipcheck run`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from checks.profiles import choose_profile_noted

ENGINES = ("local", "spark")


def check(path: str | Path, engine: str = "local", master: str | None = None,
          profile: str | None = None, rules: Sequence | None = None) -> dict:
    """Check a run directory or a history file (JSONL or Parquet); return the verdict.

    Raises `checks.history.HistoryError` (one-line message) for unreadable or invalid input."""
    profile, note = choose_profile_noted(path, profile)
    if engine == "local":
        from checks.engine_local import check_path
        verdict = check_path(path, rules, profile)
    elif engine == "spark":
        from checks.engine_spark import check_path
        verdict = check_path(path, rules, profile, master=master)
    else:
        raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    if note:
        verdict["profile_note"] = note  # the run's Kafka version fell back to another line's profile
    return verdict


def write_verdict(verdict: dict, path: str | Path) -> Path:
    """Write a verdict as JSON (a run directory gets `verdict.json`)."""
    p = Path(path)
    if p.is_dir():
        p = p / "verdict.json"
    p.write_text(json.dumps(verdict, indent=2, sort_keys=False) + "\n")
    return p
