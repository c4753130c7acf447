"""`kipcheck campaign`: many runs (seeds x fault mixes x Kafka versions), one check, one summary.

Runs go one after another, each exactly a `kipcheck run` with its own run directory under
`DIR/runs/`. `DIR/campaign.json` records the plan and each run's status as it goes, so a
campaign killed midway resumes where it stopped (`kipcheck campaign --dir DIR` again: runs
marked done are kept, a run that was under way when the campaign died is done again), and a
run that errors is recorded and the campaign goes on. At the end ONE check judges every
history (with `--engine spark` one Spark job over all of them, keyed by run), its verdicts
are written back into the run directories, and `reports.summary` writes summary.html,
summary.json, junit.xml and summary.md: the per-KIP conformance tables of each Kafka
release side by side (checks.conformance.release_summary), also printed at the end.
"""
from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from kipcheck.errors import KipcheckError
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.options import check_backend_options, check_directory, given_options, positive, refuse_unused
from kipcheck.harness.reproduce import reproduce_command
from kipcheck.rundir.records import JSONL_NAME

DONE, ERROR, RUNNING = "done", "error", "running"
#: what a campaign keeps in campaign.json to resume exactly as it began
SETTINGS = ("duration", "backend", "bootstrap", "hosts", "brokers", "tiered", "allow_uncovered", "engine", "master",
            "workload", "group_protocol")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the campaign: what differs between runs. The last five are set by a plan whose
    runs differ in more than seed, faults and release (`kipcheck qualify`); None / False keep the
    campaign's own settings."""

    seed: int
    faults: str  # "default" (the single leader isolation), "none", "all" or "kind,kind"
    kafka_version: str | None
    workload: str | None = None  # one of workload_options.WORKLOADS
    tiered: bool = False
    elr: str | None = None  # "on" / "off"
    upgrade_from: str | None = None  # a rolling upgrade from this release to `kafka_version`
    brokers: int | None = None  # a broker count of its own (a fault that needs a spare broker)

    @property
    def key(self) -> str:
        version = self.kafka_version or "default"
        extra = "".join(f"__{name}-{value}" for name, value in (
            ("workload", self.workload), ("tiered", "on" if self.tiered else None), ("elr", self.elr),
            ("from", self.upgrade_from), ("brokers", self.brokers)) if value)
        return re.sub(r"[^A-Za-z0-9.,_-]", "_", f"kafka-{version}__faults-{self.faults}__seed-{self.seed}{extra}")


def parse_seeds(text: str) -> list[int]:
    """"1-5,9" -> [1, 2, 3, 4, 5, 9]; ValueError (one line) on anything else."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        m = re.fullmatch(r"(-?\d+)(?:-(-?\d+))?", part)
        if not m:
            raise ValueError(f"--seeds: {part!r} is not N or N-M")
        lo, hi = int(m.group(1)), int(m.group(2) if m.group(2) is not None else m.group(1))
        if hi < lo:
            raise ValueError(f"--seeds: {part!r} runs backwards")
        seeds.extend(range(lo, hi + 1))
    if not seeds:
        raise ValueError("--seeds: no seeds")
    return list(dict.fromkeys(seeds))


def plan(seeds: list[int], fault_mixes: list[str], versions: list[str | None]) -> list[PlannedRun]:
    """Versions outermost (one Kafka resolution at a time), then fault mixes, then seeds."""
    return [PlannedRun(s, f, v) for v in versions for f in fault_mixes for s in seeds]


def run_options(base, planned: PlannedRun, runs_dir: Path):
    """The RunOptions of one planned run: the campaign's options with its seed, faults, version."""
    from kipcheck.faults.registry import parse_kinds
    faults = {"default": None, "none": []}.get(planned.faults)
    if faults is None and planned.faults not in ("default", "none"):
        faults = parse_kinds(planned.faults)
    options = replace(base, seed=planned.seed, faults=faults, kafka_version=planned.kafka_version,
                      runs_dir=str(runs_dir))
    if planned.workload:
        options = replace(options, workload=replace(options.workload, workload=planned.workload))
    if planned.tiered:
        options = replace(options, tiered=True)
    if planned.elr:
        options = replace(options, elr=planned.elr)
    if planned.brokers:
        options = replace(options, brokers=planned.brokers)
    if planned.upgrade_from:  # rolls from the older release to the planned one
        options = replace(options, kafka_version=None, upgrade_from=planned.upgrade_from,
                          upgrade_to=planned.kafka_version)
    return options


def preflight_plan(planned: list[PlannedRun], base, directory: Path) -> None:
    """Every planned run's options checked as `kipcheck run` checks them, before the first
    cluster starts: a bad one is a one-line error naming the run, and nothing runs."""
    from kipcheck.harness.run import preflight
    for p in planned:
        try:
            preflight(run_options(base, p, directory / "runs"))
        except KipcheckError as e:
            raise HarnessError(f"{p.key}: {e}") from None


class CampaignState:
    """campaign.json: the plan and every run's status, rewritten after each change."""

    def __init__(self, directory: Path, planned: list[PlannedRun], settings: dict):
        self.path = directory / "campaign.json"
        old = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.runs: dict[str, dict] = old.get("runs", {})
        self.data = {"settings": settings, "plan": [p.__dict__ for p in planned], "runs": self.runs}
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2))
        tmp.replace(self.path)

    def status(self, planned: PlannedRun) -> str | None:
        return (self.runs.get(planned.key) or {}).get("status")

    def mark(self, planned: PlannedRun, **fields) -> None:
        self.runs[planned.key] = {**self.runs.get(planned.key, {}), **fields}
        self.save()


def run_campaign(directory: Path, planned: list[PlannedRun], base, settings: dict, ui) -> dict:
    """Do every planned run not done yet, then check them all at once; return the summary.
    `settings` (saved for a resume) hold the check's `engine` and `master` too."""
    directory.mkdir(parents=True, exist_ok=True)
    state = CampaignState(directory, planned, settings)
    for n, p in enumerate(planned, 1):
        if state.status(p) == DONE:
            ui.note(f"[{n}/{len(planned)}] {p.key}: done before, kept")
            continue
        ui.note(f"[{n}/{len(planned)}] {p.key}")
        do_run(directory, state, p, base, ui)
    return check_campaign(directory, planned, state, base, ui, settings["engine"], settings.get("master"))


def do_run(directory: Path, state: CampaignState, p: PlannedRun, base, ui) -> None:
    """One planned run, its status in `state` as it goes; an error is recorded, never raised."""
    from kipcheck.harness.run import run
    state.mark(p, status=RUNNING, error=None)
    try:
        run_dir, _ = run(run_options(base, p, directory / "runs"), ui)
        state.mark(p, status=DONE, run_dir=str(run_dir))
    except KipcheckError as e:  # a HarnessError or a fault's own
        state.mark(p, status=ERROR, error=str(e))
        ui.note(f"  error: {e} (the campaign goes on)")
    except Exception as e:  # a kipcheck bug in one run must not cost the night
        state.mark(p, status=ERROR, error=f"{type(e).__name__}: {e}")
        (directory / "campaign-errors.log").open("a").write(f"--- {p.key}\n{traceback.format_exc()}\n")
        ui.note(f"  error: {type(e).__name__}: {e} (traceback in campaign-errors.log; the campaign goes on)")


def check_campaign(directory: Path, planned: list[PlannedRun], state: CampaignState, base, ui,
                   engine: str, master: str | None) -> dict:
    """One check over every finished run; verdicts back into each run directory; summary files."""
    from kipcheck.checks.api import check_many, write_verdict
    from kipcheck.harness.run import gate_uncovered
    from kipcheck.reports.summary import write_summary
    done = [p for p in planned if state.status(p) == DONE
            and (Path(state.runs[p.key]["run_dir"]) / JSONL_NAME).exists()]
    run_dirs = [Path(state.runs[p.key]["run_dir"]) for p in done]
    verdicts = {}
    if run_dirs:
        with ui.step(f"checking {len(run_dirs)} histories in one {engine} job"):
            for p, d, v in zip(done, run_dirs, check_many(run_dirs, engine=engine, master=master)):
                v = gate_uncovered(v, d, base)  # as each run judged itself
                write_verdict(v, d / "verdict.json")
                verdicts[p.key] = v
    rows = []
    for p in planned:
        entry = state.runs.get(p.key, {})
        rows.append({"key": p.key, "seed": p.seed, "faults": p.faults, "kafka_version": p.kafka_version,
                     "status": entry.get("status", "not run"), "error": entry.get("error"),
                     "run_dir": entry.get("run_dir"), "verdict": verdicts.get(p.key),
                     "reproduce": reproduce_command(run_options(base, p, directory / "runs"))})
    with ui.step("writing summary.html, summary.json, junit.xml"):
        return write_summary(directory, rows, engine)


def add_engine_arguments(c) -> None:
    """--duration, --engine and --master, as a campaign and a qualification take them; --duration is
    checked as `kipcheck run` checks it (a finite number > 0), so nan does not reach the runs."""
    c.add_argument("--duration", type=positive(float), default=60.0, help="seconds of workload per run (default 60)")
    c.add_argument("--engine", choices=("local", "spark"), default="local",
                   help="the one check over all runs: local, or one Spark job (default local)")
    c.add_argument("--master", default=None, help="Spark master for --engine spark (e.g. spark://host:7077)")


def check_engine_arguments(args) -> None:
    """--master names the Spark cluster of --engine spark: with the local engine it would be silently
    unused, so it is refused, one line, before a campaign or a qualification starts anything."""
    if args.master and args.engine != "spark":
        raise HarnessError("--master is for --engine spark")
    check_engine_environment(args.engine)


def check_engine_environment(engine: str) -> None:
    """The local engine reads KIPCHECK_LOCAL_MAX_BYTES when it is imported, and Spark KIPCHECK_SPARK_MEMORY
    when its session starts, both only to check the history, after the cluster: a bad value is refused
    here instead, before anything starts."""
    try:
        if engine == "local":
            from kipcheck.checks.engine_local import max_bytes_from_env
            max_bytes_from_env()
        elif engine == "spark":
            from kipcheck.checks.engine_spark import driver_memory
            driver_memory()
    except ValueError as e:
        raise HarnessError(str(e)) from None


def add_campaign_arguments(c) -> None:
    from kipcheck.harness.backends import registry
    from kipcheck.harness.clients.workload_options import GROUP_PROTOCOLS, WORKLOADS
    c.add_argument("--seeds", default=None, help="seeds, e.g. 1-20 or 1,4,9 (required for a new campaign)")
    c.add_argument("--faults", action="append", default=None, metavar="MIX",
                   help="a fault mix per flag: 'default', 'none', 'all' or kinds 'partition,kill' (repeatable)")
    c.add_argument("--kafka-versions", default=None, help="comma-separated Kafka versions, `latest` for the newest on Maven Central "
                        "(default: the pinned default release)")
    c.add_argument("--dir", default=None, help="campaign directory (default ./campaigns/<time>); an existing "
                                               "one resumes with its own plan")
    add_engine_arguments(c)
    c.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT,
                   help="where each run's cluster comes from, as for `kipcheck run` (default native)")
    c.add_argument("--bootstrap", default=None, help="bootstrap servers (external backend)")
    c.add_argument("--hosts", default=None, metavar="CLUSTER_JSON",
                   help="the ssh backend's cluster file (docs/backends.md), used by every run")
    c.add_argument("--brokers", type=positive(int), default=3, help="broker count of every run (default 3)")
    c.add_argument("--tiered", action="store_true")
    c.add_argument("--workload", choices=WORKLOADS, default="default",
                   help="every run's workload (kipcheck run --workload)")
    c.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default=None,
                   help="every run's subscribers' group protocol (kipcheck run --group-protocol; default: the release's)")
    c.add_argument("--allow-uncovered", action="store_true",
                   help="a run whose reachable rule decided nothing is VALID, not unknown (as for kipcheck run)")
    c.add_argument("--quiet", action="store_true")


#: the options a resumed campaign takes from its campaign.json, which a new campaign takes from the command
#: line (those whose default is None or False, so that one given is told from one left out)
RESUMED = {"faults": "--faults", "kafka_versions": "--kafka-versions", "bootstrap": "--bootstrap", "hosts": "--hosts",
           "tiered": "--tiered", "group_protocol": "--group-protocol", "allow_uncovered": "--allow-uncovered",
           "master": "--master"}


def _resume(saved: Path, args) -> tuple[list[PlannedRun], dict]:
    """The plan and settings of the campaign `saved` holds. An option of the plan or the settings given
    again was silently unused (the saved one wins), so it is refused; a damaged campaign.json is one line,
    not an internal error."""
    refuse_unused(given_options(args, RESUMED), f"{saved.parent} resumes with the plan and settings of its "
                  f"campaign.json (a new campaign needs --seeds and another --dir)")
    try:
        data = json.loads(saved.read_text())
        return [PlannedRun(**p) for p in data["plan"]], dict(data["settings"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HarnessError(f"cannot resume from {saved}: {type(e).__name__}: {e}") from None


def cmd_campaign(args) -> int:
    """`kipcheck campaign`: exit 0 all valid, 1 any anomaly, 3 any undecided, 2 any run errored."""
    import time

    from kipcheck.faults.registry import require_kinds
    from kipcheck.harness.backends import registry
    from kipcheck.harness.progress import ProgressUI
    from kipcheck.harness.run import RunOptions
    check_engine_arguments(args)
    check_backend_options(args)
    check_directory("--dir", args.dir)
    directory = Path(args.dir or Path("campaigns") / time.strftime("%Y%m%d-%H%M%S"))
    saved = directory / "campaign.json"
    if args.seeds is None:  # resume: the saved plan and settings
        if not saved.exists():
            raise HarnessError("--seeds is needed for a new campaign (or --dir of one to resume)")
        planned, settings = _resume(saved, args)
    else:
        try:
            seeds = parse_seeds(args.seeds)
        except ValueError as e:
            raise HarnessError(str(e)) from None
        mixes = args.faults or ["default"]
        for mix in mixes:
            if mix not in ("default", "none"):
                require_kinds(mix)  # an unknown kind, or none, is a one-line error before anything starts
        versions = [v.strip() for v in args.kafka_versions.split(",")] if args.kafka_versions else [None]
        if registry.get(args.backend).capabilities.starts_kafka:  # fixed once, in campaign.json: a resume runs the same releases
            from kipcheck.harness.backends.kafka_dist import LATEST, version_of
            with ProgressUI(quiet=args.quiet).step("resolving the Kafka versions"):
                # the default and `latest` become releases; anything else is each run's to resolve
                # (one that cannot is that run's error, and the campaign goes on)
                versions = list(dict.fromkeys(version_of(v or None) if v in ("", None, LATEST) else v
                                              for v in versions))
        planned = plan(seeds, mixes, versions)
        settings = {k: getattr(args, k) for k in SETTINGS}
    if settings["duration"] <= 0:
        raise HarnessError("--duration must be positive")
    # a campaign saved by an older kipcheck lacks the newer settings: their defaults
    from kipcheck.harness.clients.workload import WorkloadOptions
    base = RunOptions(**{k: settings[k] for k in SETTINGS if k in settings and k not in ("engine", "master", "workload")},
                      workload=WorkloadOptions(workload=settings.get("workload", "default")))
    preflight_plan(planned, base, directory)
    summary = run_campaign(directory, planned, base, settings, ProgressUI(quiet=args.quiet))
    totals = summary["totals"]
    print(f"campaign {directory}: " + ", ".join(f"{k.lower()} {n}" for k, n in sorted(totals.items())))
    from kipcheck.checks.conformance import summary_markdown
    print(summary_markdown(summary["conformance"]))
    print(f"summary: {directory / 'summary.html'} (and summary.md, summary.json)")
    for code, outcome in ((2, "ERROR"), (1, "INVALID"), (3, "UNKNOWN"), (3, "NOT RUN")):
        if totals.get(outcome):
            return code
    return 0
