"""The checker's entry point for the CLI and `kipcheck run`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from kipcheck.reference_model.profiles import inherited

ENGINES = ("local", "spark")


def check(path: str | Path, engine: str = "local", master: str | None = None,
          profile: str | None = None, rules: Sequence | None = None,
          require_coverage: str | None = None, recovery_bound: float | None = None,
          crash_loop: int | None = None) -> dict:
    """Check a run directory or a history file (JSONL or Parquet); return the verdict.

    `recovery_bound` (seconds) and `crash_loop` tune the liveness rule of the default rules
    (None: the run's recorded bound, else one from Kafka's defaults; checks/recovery.py).
    `require_coverage`: see `checks.coverage.parse_requirement`. Raises
    `rundir.history.HistoryError` (one-line message) for unreadable or invalid input,
    ValueError for a bad engine or coverage requirement."""
    return check_many([path], engine, master, profile, rules, require_coverage, recovery_bound, crash_loop)[0]


def check_many(paths: Sequence[str | Path], engine: str = "local", master: str | None = None,
               profile: str | None = None, rules: Sequence | None = None,
               require_coverage: str | None = None, recovery_bound: float | None = None,
               crash_loop: int | None = None) -> list[dict]:
    """`check` for many runs at once: the Spark engine judges them all in ONE job (keyed by
    run, so the cluster's parallelism is used across runs); each run keeps its own profile
    (asked, or its Kafka version's) and its own recovery bound, and gets the verdict it
    would get alone."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; expected one of {ENGINES}")
    from kipcheck.checks.coverage import parse_requirement  # Arrow and the rules: not for
    from kipcheck.checks.profiles import choose_profile_noted  # a command line's parse
    noted = [choose_profile_noted(p, profile) for p in paths]
    profiles = [name for name, _ in noted]
    if require_coverage:
        parse_requirement(require_coverage)  # bad text fails before the work
    run_rules = ([_run_rules(p, recovery_bound, crash_loop) for p in paths] if rules is None
                 else [list(rules)] * len(paths))
    if engine == "local":
        from kipcheck.checks.engine_local import check_path
        verdicts = [check_path(p, r, prof) for p, r, prof in zip(paths, run_rules, profiles)]
    else:
        from kipcheck.checks.engine_spark import check_paths
        verdicts = check_paths(paths, run_rules, profiles, master=master)
    return [_completed(v, path, noted_profile, require_coverage) for v, path, noted_profile in zip(verdicts, paths, noted)]


def check_under(path: str | Path, profiles: Sequence[str]) -> list[dict]:
    """`check(path, profile=p)` for each of `profiles` (the local engine, the run's own liveness
    bound), the history read once: the seeded-bug matrix judges each window under `kip` and
    under its release's profile. Each held group is judged under every profile from memory, so
    this is for runs whose largest group fits in memory, as the matrix's windows do."""
    from kipcheck.checks.engine_local import check_path_under
    from kipcheck.checks.profiles import choose_profile_noted
    noted = [choose_profile_noted(path, p) for p in profiles]
    verdicts = check_path_under(path, [name for name, _ in noted], _run_rules(path, None, None))
    return [_completed(v, path, noted_profile, None) for v, noted_profile in zip(verdicts, noted)]


def _run_rules(path, recovery_bound: float | None, crash_loop: int | None) -> list:
    """The default rules with the run's liveness bounds (checks/recovery.py)."""
    from kipcheck.checks.recovery import choose_bound, group_liveness_rule, liveness_rule
    from kipcheck.checks.verdict import default_rules
    return default_rules(liveness_rule(choose_bound(path, recovery_bound), crash_loop), group_liveness_rule(path))


def _completed(verdict: dict, path, noted_profile: tuple[str, str | None], require_coverage: str | None) -> dict:
    """A verdict with what both engines add after the judgement: the profile's note, the release it
    was judged as, the brokers' log lines, the coverage requirement."""
    from kipcheck.checks.coverage import apply_requirement
    from kipcheck.checks.profiles import kafka_version
    name, note = noted_profile
    if note:
        verdict["profile_note"] = note  # the run's Kafka version has no profile of its own
    judged = inherited(kafka_version(path))
    if judged and judged["profile"] == name:
        verdict["judged_as"] = judged  # newer than every read profile: judged under the newest, inherited
    _add_broker_logs(verdict, path)
    return apply_requirement(verdict, require_coverage)


def _add_broker_logs(verdict: dict, path) -> None:
    """The brokers' log lines around each example's proof (rundir.broker_logs), for a run
    directory with node logs; the same for both engines, after the judgement. A failure here
    costs the lines, never the verdict."""
    from kipcheck.rundir import broker_logs
    try:
        broker_logs.enrich(verdict, path)
    except Exception as e:  # a torn log, an odd history line: say so in the verdict
        verdict[broker_logs.FIELD] = {"error": f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]}


def write_verdict(verdict: dict, path: str | Path) -> Path:
    """Write a verdict as JSON (a run directory gets `verdict.json`)."""
    p = Path(path)
    if p.is_dir():
        p = p / "verdict.json"
    p.write_text(json.dumps(verdict, indent=2, sort_keys=False) + "\n")
    return p
