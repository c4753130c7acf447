"""Judge a test's history and say why it failed: the anomalies, each with its proof records.

Used by the pytest plugin's `kipcheck_check` fixture and `workload.verify()`; the check itself
is `checks.api.check`, the same as `kipcheck run`'s.
"""
from __future__ import annotations

import json
from pathlib import Path

EXAMPLES_SHOWN = 3  # per anomaly name in a failure message
RECORDS_SHOWN = 6  # proof records per example
CONTEXT = 2  # history records either side of a proof record in the excerpt
EXCERPT_LIMIT = 400  # records in the excerpt attachment


def check_history(history, profile: str | None = None, engine: str = "local") -> dict:
    """Close the history (every record flushed and fsynced) and check it."""
    from kipcheck.checks.api import check
    history.close()
    return check(history.path, engine=engine, profile=profile)


def records_at(path: Path, indices) -> dict[int, dict]:
    """History records by index (one JSON line each; `index` counts lines from 0)."""
    wanted, found = set(indices), {}
    if not wanted:
        return found
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("index") in wanted:
                found[rec["index"]] = rec
                if len(found) == len(wanted):
                    break
    return found


def proof_indices(verdict: dict, names=("anomalies", "known")) -> list[int]:
    return sorted({i for key in names for examples in (verdict.get(key) or {}).values()
                   for ex in examples for i in ex.get("indices", [])})


def status(verdict: dict) -> str:
    return {True: "valid", False: "invalid"}.get(verdict.get("valid"), "unknown")


def failure_message(verdict: dict, history_path: Path) -> str | None:
    """Why the test fails (None when the history is valid): each anomaly, its examples and proofs."""
    if verdict.get("valid") is True:
        return None
    anomalies = {n: ex for n, ex in (verdict.get("anomalies") or {}).items() if ex}
    lines = [f"kipcheck: the history is {status(verdict)} (profile {verdict.get('profile')}, "
             f"{sum(len(e) for e in anomalies.values())} anomaly example(s) of {len(anomalies)} kind(s)); "
             f"history {history_path}"]
    records = records_at(history_path, proof_indices(verdict, ("anomalies",)))
    for name, examples in anomalies.items():
        lines.append(f"{name}: {len(examples)} example(s)")
        for ex in examples[:EXAMPLES_SHOWN]:
            lines.append(f"  - {ex.get('message', ex)}")
            for i in ex.get("indices", [])[:RECORDS_SHOWN]:
                lines.append(f"      proof [{i}] {json.dumps(records.get(i), separators=(',', ':'))}")
    for reason in (verdict.get("unknown") or [])[:EXAMPLES_SHOWN]:
        lines.append(f"undecided: {reason.get('message', reason) if isinstance(reason, dict) else reason}")
    if verdict.get("valid") is None and not verdict.get("unknown"):
        lines.append(f"undecided: {verdict.get('counts', {}).get('reads', 0)} reads in the history")
    return "\n".join(lines)


def history_excerpt(history_path: Path, verdict: dict) -> str:
    """The records around each proof (or the history's start when there is none), as JSON lines."""
    proofs = proof_indices(verdict)
    wanted = {j for i in proofs for j in range(i - CONTEXT, i + CONTEXT + 1)} if proofs else set(range(100))
    out = []
    with open(history_path, encoding="utf-8") as f:
        for n, line in enumerate(f):
            if n in wanted:
                out.append(line.rstrip("\n"))
                if len(out) >= EXCERPT_LIMIT:
                    break
    return "\n".join(out) + "\n"


def fault_records(history_path: Path) -> list[dict]:
    """Every nemesis record (inject, heal, heal-all) in the history: the test's fault schedule as it ran."""
    out = []
    with open(history_path, encoding="utf-8") as f:
        for line in f:
            if '"fault"' in line:
                rec = json.loads(line)
                if rec.get("f") == "fault":
                    out.append(rec)
    return out
