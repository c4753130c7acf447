"""Recall and false alarms, measured: each operator planted at seeded positions in real
histories, each mutated history judged by the rules that can name its anomaly (all rules
for a benign operator), a catch counted only when the operator's anomaly is named at the
planted records."""
from __future__ import annotations

import gzip
import json
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from kipcheck.checks.engine_local import judge_records_under
from kipcheck.checks.mutate.history import History
from kipcheck.checks.mutate.operators import OPERATORS, Operator
from kipcheck.checks.profiles import choose_profile_noted
from kipcheck.checks.recovery import choose_bound, liveness_rule
from kipcheck.checks.verdict import ANOMALY_NAMES, default_rules


def load_history(path: str | Path) -> list[dict]:
    """A history's records from a run directory, `history.jsonl` or `history.jsonl.gz`."""
    p = Path(path)
    if p.is_dir():
        p = next(q for q in (p / "history.jsonl", p / "history.jsonl.gz") if q.exists())
    opener = gzip.open if p.suffix == ".gz" else open
    with opener(p, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class Tally:
    """One operator on one history under one profile."""

    operator: str
    history: str
    profile: str
    planted: int = 0
    caught: int = 0
    known: int = 0  # named, but accepted by the profile as a documented deviation
    false_alarms: int = 0
    missed: list = field(default_factory=list)  # (seed, planted indices, note) of each miss
    alarms: list = field(default_factory=list)  # (seed, anomaly name, indices) of each false alarm

    @property
    def recall(self) -> float | None:
        judged = self.planted - self.known
        return self.caught / judged if judged else None


def _rules(op: Operator, bound: dict | None) -> list:
    rules = default_rules(liveness_rule(bound))
    if op.anomaly is None:
        return rules
    return [r for r in rules if op.anomaly in getattr(r, "anomalies", ())]


def alarm_counts(records: list, profiles: Sequence[str], rules: list | None = None) -> list[Counter]:
    """Anomalies (not known, not summaries) by name, under each profile: a benign change is a
    false alarm where it raises one of these counts above the unmutated history's (under `kip`
    a healthy release's documented deviations are anomalies already)."""
    found, _ = judge_records_under(records, rules or default_rules(), profiles)
    return [Counter(a.name for a in anomalies if not a.known and a.name in ANOMALY_NAMES) for anomalies in found]


#: the unmutated histories' alarm counts, by (id of the records, profiles, bound): one full check each,
#: however many benign operators are measured on them, one call of `measure` or many (the records are
#: kept beside their counts, so an id is never reused while its entry lives)
_BASES: dict[tuple, tuple[list, list[Counter]]] = {}


def _base_alarms(records: list, profiles: tuple[str, ...], bound: dict | None) -> list[Counter]:
    key = (id(records), profiles, repr(bound))
    if key not in _BASES:
        _BASES[key] = (records, alarm_counts(records, profiles, default_rules(liveness_rule(bound))))
    return _BASES[key][1]


def judge(op: Operator, history: History, seed: int, tallies: Sequence[Tally],
          bases: Sequence[Counter] | None = None, bound: dict | None = None) -> bool:
    """Plant `op` once (seed `seed`), judge the mutation under each tally's profile in one pass
    and add each outcome to its tally; False when the history has no position for it. `bases`:
    the unmutated history's `alarm_counts` under the same profiles (benign only); `bound`: the
    run's liveness bound (`recovery_bound`; None: Kafka's default)."""
    mutation = op.plant(history, random.Random(seed))
    if mutation is None:
        return False
    profiles = [t.profile for t in tallies]
    for tally in tallies:
        tally.planted += 1
    if op.anomaly is None:
        counts = alarm_counts(mutation.records, profiles, _rules(op, bound))
        for tally, raised, base in zip(tallies, counts, bases or [Counter()] * len(tallies)):
            raised = sorted(raised - base)
            if raised:
                tally.false_alarms += 1
                tally.alarms.append((seed, raised, mutation.note))
        return True
    found, _ = judge_records_under(mutation.records, _rules(op, bound), profiles)
    planted = set(mutation.planted)
    for tally, anomalies in zip(tallies, found):
        named = [a for a in anomalies if a.name == op.anomaly and planted & set(a.indices)]
        if any(not a.known for a in named):
            tally.caught += 1
        elif named:
            tally.known += 1
        else:
            tally.missed.append((seed, mutation.planted[:8], mutation.note))
    return True


def recovery_bound(path: str | Path) -> dict:
    """The liveness bound the run recorded, else Kafka's default one (checks/recovery.py)."""
    return choose_bound(path)


def release_profile(path: str | Path) -> str:
    """The profile of the history's own Kafka version (its run's config.json)."""
    return choose_profile_noted(path)[0]


def has_faults(records: list) -> bool:
    """Whether a fault other than the end-of-run heal ran."""
    return any(r["f"] == "fault" and (r.get("value") or {}).get("fault") != "heal-all" for r in records)


def measure(histories: dict[str, list], profiles: dict[str, Iterable[str]], seeds: Iterable[int],
            operators: Iterable[str] | None = None, progress=None, bounds: dict | None = None) -> list[Tally]:
    """Every operator on every history (by name) under each of its profiles, once per seed;
    `progress(tally)` after each operator's seeds; `bounds`: each history's liveness bound
    (`recovery_bound`; default Kafka's)."""
    ops = [OPERATORS[n] for n in (operators or OPERATORS)]
    seeds = list(seeds)
    out = []
    for name, records in histories.items():
        bound = (bounds or {}).get(name)
        history = History(records, **({"liveness_bound_s": bound["seconds"]} if bound else {}))
        profiles_of = tuple(dict.fromkeys(profiles[name]))
        # each mutation is planted once and judged under every profile in one pass (reading and keying
        # the records is most of a check)
        bases = _base_alarms(records, profiles_of, bound) if any(op.anomaly is None for op in ops) else None
        for op in ops:
            tallies = [Tally(op.name, name, profile) for profile in profiles_of]
            for seed in seeds:
                if not judge(op, history, seed, tallies, bases, bound):
                    break
            out.extend(tallies)
            if progress:
                for tally in tallies:
                    progress(tally)
    return out
