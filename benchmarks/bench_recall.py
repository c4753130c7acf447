"""Checker recall and false alarms on real histories (docs/checker.md, "Recall").

    python benchmarks/bench_recall.py RUN_DIR_OR_HISTORY... [--seeds 5] [--operators a,b]
                                      [--profiles kip,release] [--json OUT]

Each operator of `checks.mutate.operators` is planted once per seed in each history (its
position drawn by the seed) and the mutated history judged under each profile (`release`:
the history's own Kafka version's). A violating operator counts as caught when its anomaly
is named at the planted records, as known when the profile accepts it as a documented
deviation; a benign one counts a false alarm when it raises any anomaly count above the
unmutated history's. Prints one row per operator: caught/judged per history group (runs
with faults and without) and profile, then the seconds it took.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kipcheck.checks.mutate.operators import OPERATORS  # noqa: E402
from kipcheck.checks.mutate.recall import has_faults, load_history, measure, recovery_bound, release_profile  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("histories", nargs="+")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--operators", default=None)
    ap.add_argument("--profiles", default="kip,release")
    ap.add_argument("--json", default=None, help="write every tally here")
    a = ap.parse_args(argv)
    ops = a.operators.split(",") if a.operators else list(OPERATORS)
    unknown = [o for o in ops if o not in OPERATORS]
    if unknown:
        print(f"bench_recall: unknown operator(s) {unknown}; known: {sorted(OPERATORS)}", file=sys.stderr)
        return 2
    histories, profiles, group, bounds = {}, {}, {}, {}
    for path in a.histories:
        if not Path(path).exists():
            print(f"bench_recall: no such history {path}", file=sys.stderr)
            return 2
        records = load_history(path)
        histories[path] = records
        profiles[path] = [release_profile(path) if p == "release" else p for p in a.profiles.split(",")]
        group[path] = "faults" if has_faults(records) else "no faults"
        bounds[path] = recovery_bound(path)
        print(f"{path}: {len(records)} records, {group[path]}, profiles {profiles[path]}", flush=True)
    started = time.monotonic()
    tallies = measure(histories, profiles, range(a.seeds), ops, bounds=bounds, progress=lambda t: print(
        f"  {t.operator} on {Path(t.history).name or t.history} under {t.profile}: "
        f"{t.caught if OPERATORS[t.operator].anomaly else t.false_alarms}/{t.planted}", flush=True))
    rows = defaultdict(lambda: defaultdict(lambda: [0, 0, 0, 0]))  # op -> (group, kind) -> caught, judged, known, alarms
    for t in tallies:
        kind = "kip" if t.profile == "kip" else "release"
        cell = rows[t.operator][(group[t.history], kind)]
        cell[0] += t.caught
        cell[1] += t.planted - t.known
        cell[2] += t.known
        cell[3] += t.false_alarms
    columns = [(g, k) for g in ("no faults", "faults") for k in ("kip", "release")]
    print()
    print(f"{'operator':44} {'anomaly':28} " + " ".join(f"{g + ' ' + k:>17}" for g, k in columns))
    for name in ops:
        op = OPERATORS[name]
        cells = []
        for col in columns:
            caught, judged, known, alarms = rows[name].get(col, (0, 0, 0, 0))
            if op.anomaly is None:
                cells.append(f"{alarms}/{judged} alarms" if judged else "-")
            else:
                cells.append((f"{caught}/{judged}" + (f" +{known}k" if known else "")) if judged or known else "-")
        print(f"{name:44} {op.anomaly or '(benign)':28} " + " ".join(f"{c:>17}" for c in cells))
    print(f"\n{len(tallies)} tallies, {sum(t.planted for t in tallies)} mutations in {time.monotonic() - started:.0f} s")
    misses = [(t.operator, t.history, t.profile, m) for t in tallies for m in t.missed] + \
             [(t.operator, t.history, t.profile, m) for t in tallies for m in t.alarms]
    for m in misses[:40]:
        print("  missed/alarm:", m)
    if a.json:
        Path(a.json).write_text(json.dumps([t.__dict__ for t in tallies], indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
