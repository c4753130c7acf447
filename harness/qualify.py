"""`kipcheck qualify`: a release qualified the way a release engineer does.

One documented plan (`PLAN`) runs on the release under qualification and on a baseline, the
same step with the same seed on both, one after the other. Every step reaches a rule or fault
family the others do not (docs/detection.md says which anomalies each provokes). A budget
bounds the whole: kipcheck measures each run as it goes, does the first round of every step
first, then more seeds of the broadest step while the budget lasts, and says what it dropped.
One check (local or one Spark job) judges every history, as a campaign's does; the summary
puts the two releases side by side and lists first each anomaly family the release shows and
the baseline does not (a regression), with its proof, the brokers' log lines and the command
that reproduces that run. Resumable: `--dir` of a stopped qualification goes on.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from kipcheck.harness.backends import releases
from kipcheck.harness.campaign import (DONE, ERROR, CampaignState, PlannedRun, add_engine_arguments, check_campaign,
                                      check_engine_arguments, do_run, preflight_plan)
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.options import check_directory

DROPPED = "dropped"


@dataclass(frozen=True)
class Step:
    """One kind of run of the plan, and what it is there to reach."""

    name: str
    faults: str
    reaches: str
    workload: str | None = None
    tiered: bool = False
    elr: str | None = None
    upgrade: bool = False
    needs: str | None = None  # a releases.FEATURES name the release must have
    brokers: int | None = None  # None: the qualify run's --brokers

    def planned(self, version: str, seed: int) -> PlannedRun | None:
        """This step on `version` with `seed`; None where the release cannot run it."""
        if self.needs and not releases.has(version, self.needs):
            return None
        upgrade_from = previous_line(version) if self.upgrade else None
        if self.upgrade and upgrade_from is None:
            return None
        return PlannedRun(seed, self.faults, version, workload=self.workload, tiered=self.tiered, elr=self.elr,
                          upgrade_from=upgrade_from, brokers=self.brokers)


#: The plan, broadest first (its first step is the one repeated with more seeds).
PLAN: tuple[Step, ...] = (
    Step("chaos", "all", "every fault kind on the default workload: the KIP-392, KIP-227 and KIP-1166 rules, the "
         "log anomalies (lost-write, duplicate, poll-skip ...), the clock rules, liveness"),
    # restart: a controlled shutdown leaves a follower out of the ISR while it catches up, alive, the shape
    # that showed KAFKA-14372 on 3.3.1 (docs/real-bugs.md); partition and pause alone did not
    Step("followers", "partition,pause,restart", "KIP-392 with a follower out of the ISR while it still lives and "
         "consumers in its rack read: preferred-replica-violation, wrong-fetch-error, hwm-regression"),
    Step("transactions", "kill,partition", "KIP-98/KIP-890 on the txn workload: aborted-read, precommitted-read, "
         "torn-transaction, lso-violation, hanging-transaction", workload="txn"),
    Step("share", "kill,partition,latency", "KIP-932 on the share workload, the consumer links slower than the "
         "record lock: share-double-acquire, share-accepted-redelivered, share-delivery-limit-exceeded, "
         "share-record-lost, share-session-violation (the prober's own share sessions)",
         workload="share", needs="share-groups"),
    Step("tiered", "kill", "KIP-405/KIP-1023 on a tiered topic: tiered-offset-violation, remote reads",
         tiered=True, needs="tiered-storage"),
    Step("elr-on", "kill,partition", "KIP-966 with eligible leader replicas on: ineligible-leader", elr="on",
         needs="eligible-leader-replicas"),
    Step("elr-off", "kill,partition", "KIP-966 with eligible leader replicas off: unclean-free elections",
         elr="off", needs="eligible-leader-replicas"),
    # a move to the spare broker while a kept follower is stopped: the shape that showed
    # KAFKA-15665 on 3.7.2 (docs/real-bugs.md); the fault needs a fourth broker
    Step("reassignment", "reassign-while-down", "KIP-455 with a target replica out of the ISR while the move "
         "may complete: premature-reassignment-completion", brokers=4),
    Step("upgrade", "none", "a rolling upgrade from the newest patch of the previous line, the workload running",
         upgrade=True),
)


def previous_line(version: str) -> str | None:
    """The newest patch of the release line before `version`'s (None: no earlier KRaft line)."""
    v = releases.parse(version)
    if v is None:
        return None
    earlier = [p for p in releases.NEWEST_PATCH.values() if releases.parse(p)[:2] < v[:2]]
    return max(earlier, key=releases.parse, default=None)


def default_baseline(version: str) -> str:
    """The newest patch of the previous line that has a read profile (`reference_model.profiles`)."""
    from kipcheck.reference_model import profiles
    base = previous_line(version)
    if base is None or profiles.profile_for(base)[1] is not None:
        raise HarnessError(f"Kafka {version} has no earlier release line with a read profile: give --baseline")
    return base


def parse_budget(text: str) -> float:
    """"45m", "90s", "1h", "1h30m" or plain seconds ("300") -> seconds; a one-line error otherwise. A number
    after a unit needs its own unit: "1h30" was read as 1 h 30 s where 1 h 30 min was meant."""
    plain = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*", text or "")
    m = plain or re.fullmatch(r"\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*",
                              text or "")
    if not m or not any(m.groups()):
        raise HarnessError(f"--budget: {text!r} is not a duration such as 45m, 90s or 1h30m")
    hours, minutes, seconds = (0.0, 0.0, float(plain.group(1))) if plain else (float(g or 0) for g in m.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise HarnessError("--budget must be positive")
    return total


def rounds(version: str, baseline: str, seeds: int) -> list[list[tuple[Step, PlannedRun, PlannedRun]]]:
    """Round 1: every step the two releases can both run, seed 1; round r > 1: the first step,
    seed r. Each entry is a pair (the release's run, the baseline's) of one step and seed."""
    out = []
    for r in range(1, seeds + 1):
        steps = PLAN if r == 1 else PLAN[:1]
        pairs = [(s, s.planned(version, r), s.planned(baseline, r)) for s in steps]
        out.append([(s, a, b) for s, a, b in pairs if a is not None and b is not None])
    return out


def skipped_steps(version: str, baseline: str) -> list[str]:
    """The steps one of the two releases cannot run, and why."""
    out = []
    for s in PLAN:
        lacking = [v for v in (version, baseline) if s.planned(v, 1) is None]
        if lacking:
            why = (f"needs {s.needs}" if s.needs else "no earlier release line to upgrade from")
            out.append(f"{s.name}: not run ({why}: {', '.join(lacking)})")
    return out


class Budget:
    """Wall-clock seconds for the runs, the check's share kept back; each pair of runs is
    estimated from the runs measured so far (before any, from the run's duration)."""

    #: a run's cost beyond its workload seconds, before one was measured (cluster, probes, report)
    FIRST_GUESS_OVERHEAD = 75.0
    #: of the budget, kept for the one check at the end
    CHECK_SHARE = 0.1

    def __init__(self, seconds: float, duration: float, clock=time.monotonic):
        self.seconds, self.duration, self.clock = seconds, duration, clock
        self.started = clock()
        self.measured: list[float] = []

    def per_run(self) -> float:
        return sum(self.measured) / len(self.measured) if self.measured else self.duration + self.FIRST_GUESS_OVERHEAD

    def left(self) -> float:
        return self.seconds * (1 - self.CHECK_SHARE) - (self.clock() - self.started)

    def fits(self, runs: int) -> bool:
        return runs * self.per_run() <= self.left()

    def timed(self, fn) -> None:
        t0 = self.clock()
        fn()
        self.measured.append(self.clock() - t0)


def run_plan(directory: Path, version: str, baseline: str, base, settings: dict, budget: Budget, ui,
             max_seeds: int = 20) -> tuple[list[PlannedRun], list[str]]:
    """Every pair that fits the budget, round by round; returns the runs done (or done before,
    when resumed) and what was dropped, one line each."""
    directory.mkdir(parents=True, exist_ok=True)
    all_rounds = rounds(version, baseline, max_seeds)
    planned = [run for rnd in all_rounds for _, a, b in rnd for run in (a, b)]
    state = CampaignState(directory, planned, settings)
    done: list[PlannedRun] = []
    dropped: list[str] = []
    for r, pairs in enumerate(all_rounds, 1):
        if r > 1 and not budget.fits(2) and any(state.status(p) != DONE for _, *pair in pairs for p in pair):
            dropped.append(f"{PLAN[0].name}: seeds {r}-{max_seeds} not run (the budget was spent)")
            break
        for step, *pair in pairs:
            todo = [p for p in pair if state.status(p) != DONE]
            if todo and not budget.fits(len(todo)):
                for p in todo:
                    state.mark(p, status=DROPPED, error=f"left out to fit the budget ({budget.per_run():.0f} s a run, "
                                                        f"{max(budget.left(), 0):.0f} s left)")
                dropped.append(f"{step.name} (seed {r}): {len(todo)} run(s) of ~{budget.per_run():.0f} s did not "
                               f"fit the {max(budget.left(), 0):.0f} s left")
                continue
            for p in pair:
                if state.status(p) == DONE:
                    ui.note(f"{p.key}: done before, kept")
                else:
                    ui.note(f"[{step.name}, seed {r}] {p.key} ({budget.left() / 60:.1f} min of the budget left)")
                    budget.timed(lambda p=p: do_run(directory, state, p, base, ui))
                done.append(p)
    state.data["plan"] = [p.__dict__ for p in done]  # what a resume checks again
    state.save()
    return done, dropped


def regressions(rows: list[dict], version: str, baseline: str) -> tuple[list[dict], list[str]]:
    """Each anomaly family the release's runs show and the baseline's do not, with the first
    run's first example (its proof, the brokers' log lines) and that run's reproduce command;
    and the families both show (bugs both have, not regressions)."""
    def families(v):
        return {name: ex for name, ex in ((v or {}).get("anomalies") or {}).items() if ex}

    on_base = set()
    for r in rows:
        if r["kafka_version"] == baseline:
            on_base |= set(families(r.get("verdict")))
    found: dict[str, dict] = {}
    for r in rows:
        if r["kafka_version"] != version:
            continue
        for name, examples in families(r.get("verdict")).items():
            entry = found.setdefault(name, {"anomaly": name, "runs": 0, "count": 0, "run_dir": r["run_dir"],
                                            "reproduce": r["reproduce"], "example": examples[0]})
            entry["runs"] += 1
            entry["count"] += ((r["verdict"].get("counts") or {}).get("anomalies") or {}).get(name, len(examples))
    regressed = [found[n] for n in sorted(found) if n not in on_base]
    shared = sorted(n for n in found if n in on_base)
    return regressed, shared


def family_counts(rows: list[dict], versions: tuple[str, str]) -> dict[str, dict[str, int]]:
    """anomaly family -> {release: anomalies over its runs}, for the families either shows."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        v = r.get("verdict") or {}
        if r["kafka_version"] not in versions:
            continue
        for name, examples in (v.get("anomalies") or {}).items():
            if examples:
                n = ((v.get("counts") or {}).get("anomalies") or {}).get(name, len(examples))
                row = out.setdefault(name, dict.fromkeys(versions, 0))
                row[r["kafka_version"]] += n
    return dict(sorted(out.items()))


def qualify_markdown(result: dict) -> str:
    lines = [f"# Qualification of Kafka {result['version']} against {result['baseline']}", "",
             f"{result['runs']} runs in {result['seconds'] / 60:.1f} min of a {result['budget'] / 60:.0f} min budget.", ""]
    if result["regressions"]:
        lines += ["## Regressions (on the release, not on the baseline)", ""]
        for g in result["regressions"]:
            ex = g["example"]
            lines += [f"- **{g['anomaly']}**: {g['count']} in {g['runs']} run(s). {ex.get('message', '')}",
                      f"  - proof: history indices {ex.get('indices')} of {g['run_dir']}",
                      *(f"  - broker log: {line}" for line in _log_lines(ex)[:5]),
                      f"  - reproduce: `{g['reproduce']}`"]
    else:
        lines.append("No regression: every anomaly family on the release is on the baseline too.")
    if result["shared"]:
        lines += ["", "On both releases (not regressions): " + ", ".join(result["shared"]) + "."]
    for title, items in (("Not run", result["skipped"]), ("Dropped to fit the budget", result["dropped"])):
        if items:
            lines += ["", f"## {title}", "", *(f"- {i}" for i in items)]
    lines += ["", "The per-KIP tables side by side: summary.md / summary.html."]
    return "\n".join(lines) + "\n"


def _log_lines(example: dict) -> list[str]:
    """The broker log lines an example carries (rundir.broker_logs), WARN and ERROR first, as text."""
    block = example.get("broker_logs")
    lines = [line for line in (block or {}).get("lines") or () if isinstance(line, dict)] if isinstance(block, dict) else []
    lines.sort(key=lambda line: line.get("level") not in ("WARN", "ERROR", "FATAL"))
    return [f"node {line.get('node')} {line.get('time')} {line.get('level')} {line.get('text')}" for line in lines]


def qualify(directory: Path, version: str, baseline: str, budget_s: float, base, settings: dict, ui) -> dict:
    budget = Budget(budget_s, base.duration)
    done, dropped = run_plan(directory, version, baseline, base, settings, budget, ui)
    state = CampaignState(directory, done, settings)
    summary = check_campaign(directory, done, state, base, ui, settings["engine"], settings.get("master"))
    rows = []
    for r in summary["runs"]:
        verdict_path = Path(r["run_dir"]) / "verdict.json" if r.get("run_dir") else None
        verdict = json.loads(verdict_path.read_text()) if verdict_path and verdict_path.exists() else None
        rows.append({**r, "verdict": verdict})
    regressed, shared = regressions(rows, version, baseline)
    result = {"version": version, "baseline": baseline, "budget": budget_s, "seconds": time.monotonic() - budget.started,
              "runs": len(done), "errors": sum(1 for p in done if state.status(p) == ERROR),
              "regressions": regressed, "shared": shared, "families": family_counts(rows, (version, baseline)), "skipped": skipped_steps(version, baseline),
              "dropped": dropped, "plan": [{"step": s.name, "faults": s.faults, "reaches": s.reaches} for s in PLAN]}
    (directory / "qualify.json").write_text(json.dumps(result, indent=2, default=str))
    (directory / "qualify.md").write_text(qualify_markdown(result))
    from kipcheck.reports.qualify_view import write_qualify_html
    write_qualify_html(directory, result)
    return result


def add_qualify_arguments(q) -> None:
    q.add_argument("--kafka-version", required=True, help="the release under qualification, e.g. 4.3.1")
    q.add_argument("--baseline", default=None,
                   help="the release it is held against (default: the newest patch of the previous line that has "
                        "a read profile)")
    q.add_argument("--budget", default="45m", help="wall time for the whole qualification, e.g. 45m, 1h30m (default 45m)")
    q.add_argument("--dir", default=None, help="qualification directory (default ./qualify/<version>-<time>); an "
                                               "existing one goes on where it stopped")
    add_engine_arguments(q)
    q.add_argument("--quiet", action="store_true")


def check_arguments(args) -> tuple[str, str, float]:
    """(release, baseline, budget seconds), every one checked before a cluster starts: versions
    parse and are KRaft releases Maven serves (resolved now, with the releases the upgrade
    step rolls from), the budget is a positive duration, the engine options agree."""
    from kipcheck.harness.backends.kafka_dist import resolve
    from kipcheck.harness.progress import ProgressUI
    budget = parse_budget(args.budget)
    check_directory("--dir", args.dir)
    if args.duration <= 0:
        raise HarnessError("--duration must be positive")
    check_engine_arguments(args)
    version = args.kafka_version
    baseline = args.baseline or default_baseline(version)
    for v, flag in ((version, "--kafka-version"), (baseline, "--baseline")):
        if releases.parse(v) is None or not releases.is_kraft(v):
            raise HarnessError(f"{flag}: {v!r} is not a KRaft release X.Y.Z (KRaft runs from 3.3)")
    if releases.parse(version) == releases.parse(baseline):
        raise HarnessError(f"--baseline is {baseline}, the release itself: nothing to compare")
    needed = dict.fromkeys(v for v in (version, baseline, previous_line(version), previous_line(baseline)) if v)
    with ProgressUI(quiet=args.quiet).step(f"resolving Kafka {', '.join(needed)}"):
        for v in needed:
            resolve(v)
    return version, baseline, budget


def cmd_qualify(args) -> int:
    """`kipcheck qualify`: exit 1 when the release shows an anomaly family the baseline does not,
    2 when a run errored (and nothing regressed), else 0."""
    from kipcheck.harness.progress import ProgressUI
    from kipcheck.harness.run import RunOptions
    version, baseline, budget = check_arguments(args)
    directory = Path(args.dir or Path("qualify") / f"{version}-{time.strftime('%Y%m%d-%H%M%S')}")
    directory.mkdir(parents=True, exist_ok=True)
    settings = {"duration": args.duration, "engine": args.engine, "master": args.master,
                "version": version, "baseline": baseline}
    saved = directory / "campaign.json"
    if saved.exists():
        old = json.loads(saved.read_text()).get("settings", {})
        if (old.get("version"), old.get("baseline")) not in ((None, None), (version, baseline)):
            raise HarnessError(f"{directory} qualifies {old.get('version')} against {old.get('baseline')}: "
                               f"give another --dir")
    base = RunOptions(duration=args.duration)
    # round 1 holds every step (later rounds differ in the seed alone)
    preflight_plan([run for _, a, b in rounds(version, baseline, 1)[0] for run in (a, b)], base, directory)
    result = qualify(directory, version, baseline, budget, base, settings, ProgressUI(quiet=args.quiet))
    print(qualify_markdown(result))
    print(f"qualify: {directory / 'qualify.html'} (and qualify.md, qualify.json, summary.html)")
    if result["regressions"]:
        return 1
    return 2 if result["errors"] else 0
