"""The `kipcheck` command line. Every user error is one line on stderr and exit code 2.

Exit codes of `kipcheck run`: 0 VALID, 1 anomalies, 3 unknown (the verdict of the history,
whatever the cluster and its clients did), 2 a failure of kipcheck itself or bad input
(its line names the verdict of the history so far), 130 interrupted."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from kipcheck.errors import EXIT_ANOMALIES, EXIT_ERROR, EXIT_VALID, KipcheckError, exit_code
from kipcheck.harness.backends import releases
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.options import check_backend_options, check_directory, given_options, refuse_unused
from kipcheck.harness.options import positive as _positive
from kipcheck.harness.backends.node import JIT_ENV, JIT_FLAGS, check_jit, default_jit
from kipcheck.rundir.records import JSONL_NAME



class _Parser(argparse.ArgumentParser):
    """argparse's parser, its refusal one line: argparse prints the whole usage (up to 19 lines for `run`)
    above its `error:` line, and the project's rule for bad input is one line and exit 2. Subcommands'
    parsers are of this class too (add_subparsers takes the parent's)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _group_id(text: str) -> str:
    """An argparse type: a group id kipcheck may create (Kafka's legal topic characters, so that it reads
    the same in every tool and log); a bad one is argparse's one-line error, exit 2."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", text):
        raise argparse.ArgumentTypeError(f"not a group id (letters, digits, '.', '_', '-'; at most 249): {text!r}")
    return text


def _jvm_arg(text: str) -> str:
    """An argparse type: one JVM option for --broker-jvm-arg. The options go before the broker's main class,
    so an empty one or one without its leading '-' (a value split from its option) would be taken for the
    class and every broker would fail to start; a bad one is argparse's one-line error, exit 2."""
    if not text.startswith("-") or not text.strip("-").strip():
        raise argparse.ArgumentTypeError(f"not a JVM option (it starts with '-', e.g. -XX:+UseZGC): {text!r}")
    return text


def _kafka_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kafka-version", default=None,
                   help=f"Kafka version from Maven Central, or `latest` for the newest it serves "
                        f"(default: {releases.DEFAULT_VERSION}, pinned)")
    p.add_argument("--kafka-home", default=None, help="use an unpacked Kafka distribution instead of Maven")
    p.add_argument("--brokers", type=_positive(int), default=3, help="broker count (default 3)")
    p.add_argument("--controllers", type=int, default=0, choices=range(0, 8), metavar="N",
                   help="dedicated controllers (default 0: every node is broker+controller)")
    p.add_argument("--broker-jvm-arg", action="append", default=[], metavar="ARG", dest="broker_jvm_args", type=_jvm_arg,
                   help="an extra JVM argument for every broker (repeatable; '{node_dir}' becomes the node's "
                        "directory), e.g. --broker-jvm-arg=-agentlib:jdwp=transport=dt_socket,server=y,suspend=n")
    p.add_argument("--broker-jit", default=None, metavar="{" + ",".join(JIT_FLAGS) + "}",
                   help=f"the Kafka nodes' JIT compilers: full (HotSpot's own, C1 then C2) or c1 (C1 alone: less "
                        f"CPU for short runs on a small machine); default: ${JIT_ENV}, else full")


def _one_kafka(args) -> None:
    """--kafka-home runs the release of its own jars and --kafka-version was silently unused beside it
    (a run would then be judged, and named, by another release than the one asked): both is refused."""
    if args.kafka_home and args.kafka_version:
        raise HarnessError(f"--kafka-home runs its own release, so --kafka-version {args.kafka_version} would be "
                           f"unused: give one of them")


def _broker_jit(args) -> str:
    """--broker-jit, else the environment's default, checked before anything starts."""
    return check_jit(args.broker_jit or default_jit())


#: options only --workload share reads (--share-consumers' parser default is None, so that an explicit
#: value equal to the workload's default is refused too; None becomes that default in cmd_run)
SHARE_OPTIONS = {"share_group": "--share-group", "share_consumers": "--share-consumers"}


def _refuse_share_options_without_share(args) -> None:
    """The share group's name and size are read by --workload share alone: refused with another workload."""
    if args.workload != "share":
        refuse_unused(given_options(args, SHARE_OPTIONS), f"the share group's options are for --workload share, "
                      f"and this run's workload is {args.workload} (or add --workload share)")


def cmd_run(args) -> int:
    from kipcheck.harness.progress import ProgressUI
    from kipcheck.harness.run import RunOptions, run
    from kipcheck.harness.clients.workload_options import WorkloadOptions
    from kipcheck.checks.cli_check import liveness_options
    try:
        recovery_bound, crash_loop = liveness_options(args)
    except ValueError as e:
        raise HarnessError(str(e)) from None
    # the names as given: the run checks them with the rest, before anything starts (faults.plan)
    faults = None if args.faults is None else ([] if args.faults == "none" else args.faults.split(","))
    if args.require_coverage:
        from kipcheck.checks.coverage import parse_requirement
        try:
            parse_requirement(args.require_coverage)  # a typo fails before the cluster starts
        except ValueError as e:
            raise HarnessError(str(e)) from None
    _refuse_share_options_without_share(args)
    check_directory("--runs-dir", args.runs_dir)
    _one_kafka(args)
    check_backend_options(args)
    from kipcheck.harness.campaign import check_engine_environment
    check_engine_environment(args.engine)
    if args.profile:
        from kipcheck.reference_model import profiles
        try:
            profiles.get(args.profile)  # an unknown profile fails before the cluster starts, as `check` says it
        except ValueError as e:
            raise HarnessError(f"--profile: {e}") from None
    opts = RunOptions(duration=args.duration, seed=args.seed, backend=args.backend, bootstrap=args.bootstrap,
                      hosts=args.hosts,
                      kafka_version=args.kafka_version,
                      kafka_home=args.kafka_home, brokers=args.brokers, controllers=args.controllers,
                      faults=faults, intensity=args.intensity, runs_dir=args.runs_dir, engine=args.engine,
                      profile=args.profile, probes=not args.no_probes, tiered=args.tiered, elr=args.elr,
                      group_protocol=args.group_protocol,
                      require_coverage=args.require_coverage, allow_uncovered=args.allow_uncovered,
                      recovery_bound=recovery_bound, crash_loop=crash_loop,
                      broker_jvm_args=tuple(args.broker_jvm_args), broker_jit=_broker_jit(args),
                      upgrade_from=args.upgrade_from, upgrade_to=args.upgrade_to,
                      workload=WorkloadOptions(producers=args.producers, in_flight=args.in_flight, rate=args.rate,
                                               consumers=args.consumers, workload=args.workload,
                                               share_group=args.share_group,
                                               **({} if args.share_consumers is None
                                                  else {"share_consumers": args.share_consumers})))
    ui = ProgressUI(quiet=args.quiet)
    run_dir, verdict = run(opts, ui)
    if verdict is not None:
        flagged = {k: n for k, n in verdict["counts"]["anomalies"].items() if n}
        known = {k: n for k, n in verdict["counts"]["known"].items() if n}
        print(f"valid: {verdict['valid']}" + (f"  anomalies: {flagged}" if flagged else "")
              + (f"  known: {known}" if known else ""))
        print(f"profile: {verdict['profile']}" + (f" ({verdict['profile_note']})" if verdict.get("profile_note") else ""))
        from kipcheck.checks.cli_check import (commits_line, conformance_lines, deviation_lines, share_line,
                                               unknown_lines)
        commits, share = commits_line(verdict), share_line(verdict)
        print("\n".join(deviation_lines(verdict) + unknown_lines(verdict) + ([commits] if commits else [])
                        + ([share] if share else []) + conformance_lines(verdict)))
    print(f"report: {run_dir / 'report' / 'index.html'}")
    return exit_code(verdict)


#: `kipcheck cluster` options -> the actions that read them (the rest of the actions ignored them)
CLUSTER_OPTIONS = {"id": ("--id", ("down",)), "hosts": ("--hosts", ("down",)), "dir": ("--dir", ("up",)),
                   "tiered": ("--tiered", ("up",)), "kafka_version": ("--kafka-version", ("up",)),
                   "kafka_home": ("--kafka-home", ("up",)), "broker_jvm_args": ("--broker-jvm-arg", ("up",)),
                   "broker_jit": ("--broker-jit", ("up",))}


def _check_cluster_options(args) -> None:
    """Each `kipcheck cluster` option is read by one action: `cluster up --hosts cluster.json` started a
    local cluster, and `cluster down --dir runs/a` stopped every cluster, not that one. An option given to
    an action that does not read it is refused, one line, before anything starts or stops."""
    for field, (flag, actions) in CLUSTER_OPTIONS.items():
        if args.action not in actions:
            refuse_unused(given_options(args, {field: flag}),
                          f"{flag} is for `kipcheck cluster {'/'.join(actions)}`, not {args.action}")


def cmd_cluster(args) -> int:
    from kipcheck.harness.backends.state import all_states
    from kipcheck.harness.backends.sweep import reap_stale, teardown
    _check_cluster_options(args)
    if args.action == "up":
        from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
        from kipcheck.harness.backends.kafka_dist import resolve
        from kipcheck.harness.progress import ProgressUI
        _one_kafka(args)
        check_directory("--dir", args.dir)
        dist = resolve(args.kafka_version, args.kafka_home)
        root = Path(args.dir or Path("runs") / "cluster").resolve()
        cluster = NativeCluster(dist, root, ClusterOptions(args.brokers, args.controllers, tiered=args.tiered,
                                                             broker_jvm_args=tuple(args.broker_jvm_args),
                                                             jit=_broker_jit(args)),
                                owner_pid=None)
        ui = ProgressUI()
        try:
            with ui.step(f"starting {args.brokers} Kafka {dist.version} nodes ({cluster.mode})"):
                cluster.up(progress=ui.substep)
        except BaseException:
            cluster.down()
            raise
        print(json.dumps({"cluster_id": cluster.cluster_id, "bootstrap": cluster.bootstrap_servers(),
                          "mode": cluster.mode, "racks": cluster.racks(), "dir": str(root)}))
        return 0
    if args.action == "status":
        reaped = reap_stale()
        for r in reaped:
            print(f"cleaned up stale {r}")
        states = all_states()
        if not states:
            print("no clusters")
        for st in states:
            d = st.data
            if d.get("mode") == "ssh":  # its pids are the hosts': ask them
                from kipcheck.harness.backends.ssh_cleanup import node_status
                nodes = node_status(st)
            else:
                from kipcheck.harness.backends.state import same_process_alive
                nodes = {k: ("up" if same_process_alive(v.get("pid"), v.get("start")) else "down")
                         for k, v in d.get("nodes", {}).items()}
            print(json.dumps({"cluster_id": d["cluster_id"], "kafka_version": d.get("kafka_version"),
                              "mode": d.get("mode"), "bootstrap": d.get("bootstrap"), "nodes": nodes,
                              "owner_pid": d.get("owner_pid"), "dir": d.get("root")}))
        return 0
    if args.action == "down" and args.hosts:  # from the hosts alone: after a lost harness and its state
        from kipcheck.harness.backends.ssh_cleanup import down_hosts
        reaped = reap_stale()  # this machine's side (a Toxiproxy, the watchdog) of a SIGKILLed run first
        done = down_hosts(args.hosts)
        for line in done:
            print(f"removed {line}")
        print(f"cleaned the hosts of {args.hosts}" + (f", and {len(reaped)} stale cluster(s) here" if reaped else ""))
        return 0
    if args.action == "down":
        reaped = reap_stale()
        n = 0
        for st in all_states():
            if args.id and st.data["cluster_id"] != args.id:
                continue
            teardown(st)
            n += 1
        print(f"stopped {n} cluster(s)" + (f", cleaned {len(reaped)} stale" if reaped else ""))
        return 0
    raise HarnessError(f"unknown cluster action {args.action}")


def _selftest_bugs(text: str | None) -> list[str] | None:
    """--bugs as a list (None: every seeded bug). One that names none (',', or '' from an empty shell
    variable) is refused: run_matrix would take the empty list for 'all' and run every bug's window."""
    if text is None:
        return None
    bugs = [b.strip() for b in text.split(",") if b.strip()]
    if not bugs:
        raise HarnessError(f"--bugs {text!r} names no seeded bug: give names such as lost-write,duplicate, "
                           f"or drop --bugs for all")
    return bugs


def _markdown_target(path: str | None) -> None:
    """--markdown is written after the whole matrix: a path whose directory is missing (or a directory
    itself) would fail only then, so it is refused before any cluster starts."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir() or not target.resolve().parent.is_dir():
        raise HarnessError(f"--markdown {path}: not a file in an existing directory")


#: seconds each seeded bug is on in `kipcheck selftest` (--window)
SELFTEST_WINDOW_S = 20.0
#: selftest options that only measuring a matrix reads: `--from` prints a measured one again
_MEASURING = {"kafka_version": "--kafka-version", "kafka_home": "--kafka-home", "window": "--window",
              "bugs": "--bugs", "runs_dir": "--runs-dir"}


def _refuse_measuring_options_with_from(args) -> None:
    """`selftest --from MATRIX_JSON` prints a measured matrix again and starts nothing, so an option that
    shapes a measurement (--bugs, --window, ...) would be silently unused: refused, one line."""
    refuse_unused(given_options(args, _MEASURING), "--from prints a measured matrix again (or drop --from to measure)")


def cmd_selftest(args) -> int:
    from kipcheck.harness.progress import ProgressUI
    from kipcheck.harness.selftest import format_markdown, format_text, matrix_passes, restatus, run_matrix
    _markdown_target(args.markdown)
    if args.from_matrix:
        _refuse_measuring_options_with_from(args)
        try:
            matrix = restatus(json.loads(Path(args.from_matrix).read_text()))
        except (OSError, ValueError, KeyError) as e:
            raise HarnessError(f"cannot read {args.from_matrix}: {e}") from None
    else:
        bugs = _selftest_bugs(args.bugs)
        check_directory("--runs-dir", args.runs_dir)
        _one_kafka(args)
        matrix = run_matrix(args.kafka_version, args.kafka_home, args.window or SELFTEST_WINDOW_S, bugs,
                            args.runs_dir or "runs", ProgressUI(args.quiet))
    print(format_text(matrix))
    if args.markdown:
        Path(args.markdown).write_text(format_markdown(matrix))
        print(f"wrote {args.markdown}")
    print(f"matrix: {args.from_matrix or Path(matrix['dir']) / 'matrix.json'}")
    return EXIT_VALID if matrix_passes(matrix) else EXIT_ANOMALIES


def cmd_report(args) -> int:
    from kipcheck.reports.html import write_report
    if not (Path(args.run) / JSONL_NAME).is_file():
        raise HarnessError(f"{args.run} is not a run directory (no history.jsonl)")
    from kipcheck.rundir.history import HistoryError
    try:
        path = write_report(Path(args.run))
    except HistoryError as e:
        raise HarnessError(f"{args.run}: {e}") from None
    except json.JSONDecodeError as e:  # a damaged verdict.json or config.json
        raise HarnessError(f"{args.run}: a JSON file of the run is damaged: {e}") from None
    print(path)
    return 0


def cmd_model(args) -> int:
    from kipcheck.reference_model.scenario import SHIPPED, ScenarioError, replay
    path = Path(args.scenario)
    if not path.exists() and (SHIPPED / f"{args.scenario}.json").exists():  # a shipped scenario, by name
        path = SHIPPED / f"{args.scenario}.json"
    try:
        scenario = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        shipped = ", ".join(sorted(p.stem for p in SHIPPED.glob("*.json")))
        raise HarnessError(f"cannot read scenario {args.scenario}: {e} (shipped: {shipped})") from None
    try:
        steps = replay(scenario, profile=args.profile)
    except ScenarioError as e:
        raise HarnessError(f"{args.scenario}: {e}") from None
    print(json.dumps(steps, indent=2))
    return 0


def cmd_history(args) -> int:
    from kipcheck.rundir.history import HistoryError, iter_history
    from collections import Counter
    by_f, by_type, by_process = Counter(), Counter(), Counter()
    try:
        for rec in iter_history(args.run):
            by_f[rec["f"]] += 1
            by_type[rec["type"]] += 1
            by_process[str(rec["process"])] += 1
    except HistoryError as e:
        raise HarnessError(str(e)) from None
    print(json.dumps({"records": sum(by_f.values()), "by_f": dict(by_f.most_common()),
                      "by_type": dict(by_type.most_common()), "by_process": dict(by_process.most_common())},
                     indent=2))
    return 0


def cmd_profile_read(args) -> int:
    from kipcheck.harness.profile_read import cmd_profile_read as read
    return read(args)


def build_parser() -> argparse.ArgumentParser:
    from kipcheck.harness.backends import registry
    from kipcheck.harness.clients.workload_options import GROUP_PROTOCOLS, WORKLOADS
    from kipcheck.harness.clients.workload_options import WorkloadOptions as WorkloadDefaults
    p = _Parser(prog="kipcheck", description="Chaos and KIP conformance checks for Kafka (KRaft)")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="cluster up, workload + faults, check, report")
    r.add_argument("--duration", type=_positive(float), default=60.0, help="seconds of workload (default 60)")
    r.add_argument("--workload", choices=WORKLOADS, default="default",
                   help="default: idempotent producers; txn: transactional producers, a consume-transform-produce "
                        "copier and read_committed beside read_uncommitted consumers (docs/history.md, 'Transactions'); "
                        "share: share consumers in one share group beside the default clients (KIP-932, Kafka 4.2+; "
                        "docs/history.md, 'Share groups')")
    r.add_argument("--seed", type=int, default=0, help="seed of the fault schedule")
    r.add_argument("--faults", default=None,
                   help="comma-separated fault kinds for a seeded schedule, or 'none' "
                        "(default: isolate partition 0's leader once)")
    r.add_argument("--intensity", type=_positive(float), default=1.0, help="fault schedule intensity (default 1.0)")
    r.add_argument("--runs-dir", default="runs", help="where run directories go (default ./runs)")
    r.add_argument("--engine", choices=("local", "spark"), default="local", help="checker engine")
    r.add_argument("--profile", default=None, help="model profile (default: from the Kafka version)")
    r.add_argument("--quiet", action="store_true", help="no progress display")
    r.add_argument("--require-coverage", default=None, metavar="N|RULE=N,...",
                   help="the verdict is unknown (exit 3) unless every judged KIP rule (or each RULE) "
                        "had at least N observations")
    r.add_argument("--allow-uncovered", action="store_true",
                   help="VALID (exit 0) even when a rule the run's set-up made reachable decided nothing "
                        "(by default such a run is unknown, exit 3: see docs/checker.md 'Coverage')")
    r.add_argument("--tiered", action="store_true",
                   help="tiered storage (kipcheck's file-backed remote storage manager) on every broker and for the workload topic: "
                        "gives KIP-1023's tiered offsets something to be about")
    r.add_argument("--elr", choices=("on", "off"), default=None,
                   help="eligible leader replicas (KIP-966, Kafka 4.0+) on or off, set at format "
                        "(default: the release's own; 4.3 formats with it on)")
    r.add_argument("--group-protocol", choices=GROUP_PROTOCOLS, default=None,
                   help="the subscribers' consumer group protocol: consumer (KIP-848, Kafka 4.0+) or classic "
                        "(default: consumer where the release has it, classic before 4.0 and on an external cluster)")
    r.add_argument("--no-probes", action="store_true",
                   help="no raw-protocol prober or metadata observer (client workload only)")
    w = WorkloadDefaults()
    r.add_argument("--producers", type=_positive(int), default=w.producers,
                   help=f"Kafka producers (default {w.producers})")
    r.add_argument("--in-flight", type=_positive(int), default=w.in_flight,
                   help=f"sends outstanding per producer, each its own history process (default {w.in_flight})")
    r.add_argument("--rate", type=_positive(float, zero=True), default=w.rate,
                   help=f"sends/s over all producers, 0 for as fast as acknowledged (default {w.rate:g})")
    r.add_argument("--consumers", type=_positive(int, zero=True), default=w.consumers,
                   help=f"consumers, cycling assign/subscribe, rack-aware but the last, some read_uncommitted "
                        f"(default {w.consumers})")
    r.add_argument("--share-consumers", type=_positive(int), default=None,
                   help=f"share consumers of --workload share (default {w.share_consumers})")
    r.add_argument("--share-group", type=_group_id, default=None, metavar="GROUP",
                   help="the share group of --workload share (default: a new one each run); a reproduce command "
                        "names it, so the seed's coordinator faults hit the same brokers")
    r.add_argument("--backend", choices=registry.names(), default=registry.DEFAULT,
                   help="native: start an embedded cluster (default); external: use --bootstrap; testcontainers: "
                        "a cluster of Docker containers (DOCKER_HOST), node and election faults only; ssh: a cluster "
                        "on the remote hosts of --hosts (docs/backends.md)")
    r.add_argument("--bootstrap", default=None, help="bootstrap servers of an existing cluster (external backend)")
    r.add_argument("--hosts", default=None, metavar="CLUSTER_JSON",
                   help="the ssh backend's hosts: a ducktape cluster.json (docs/backends.md)")
    r.add_argument("--upgrade-from", default=None, metavar="VERSION",
                   help="rolling upgrade under fire: start on this Kafka release, roll every node to "
                        "--upgrade-to during the workload, then raise metadata.version (an older --upgrade-to: "
                        "a software downgrade at its metadata.version; docs/releases.md)")
    r.add_argument("--upgrade-to", default=None, metavar="VERSION", help="the release a rolling upgrade rolls to")
    _kafka_args(r)
    from kipcheck.checks.cli_check import add_liveness_arguments
    add_liveness_arguments(r)
    r.set_defaults(func=cmd_run)

    from kipcheck.harness.campaign import add_campaign_arguments, cmd_campaign
    cp = sub.add_parser("campaign", help="many runs (seeds x fault mixes x versions), one check, one summary")
    add_campaign_arguments(cp)
    cp.set_defaults(func=cmd_campaign)

    from kipcheck.harness.qualify import add_qualify_arguments, cmd_qualify
    qp = sub.add_parser("qualify", help="qualify a release against a baseline: one documented plan on both, "
                                        "regressions first")
    add_qualify_arguments(qp)
    qp.set_defaults(func=cmd_qualify)

    c = sub.add_parser("cluster", help="keep a cluster running to poke at it")
    c.add_argument("action", choices=("up", "status", "down"))
    c.add_argument("--id", default=None, help="with down: only this cluster")
    c.add_argument("--hosts", default=None, metavar="CLUSTER_JSON",
                   help="with down: clean every host of this ssh cluster file (processes, chains, kipcheck's directory)")
    c.add_argument("--dir", default=None, help="with up: node directories (default ./runs/cluster)")
    c.add_argument("--tiered", action="store_true", help="with up: tiered storage on every broker")
    _kafka_args(c)
    c.set_defaults(func=cmd_cluster)

    st = sub.add_parser("selftest", help="seed broker bugs one at a time; show which anomalies the checker names")
    st.add_argument("--kafka-version", default=None, help=f"Kafka version under qualification, or `latest` (default: {releases.DEFAULT_VERSION})")
    st.add_argument("--kafka-home", default=None, help="use an unpacked Kafka distribution instead of Maven")
    st.add_argument("--window", type=_positive(float), default=None, help=f"seconds each bug is on (default {SELFTEST_WINDOW_S:g})")
    st.add_argument("--bugs", default=None, help="comma-separated seeded bugs (default: all; see harness/backends/seeded.py)")
    st.add_argument("--markdown", default=None, metavar="FILE", help="also write the matrix as Markdown "
                    "(docs/detection.md is made this way)")
    st.add_argument("--runs-dir", default=None, help="where the selftest directory goes (default ./runs)")
    st.add_argument("--from", dest="from_matrix", default=None, metavar="MATRIX_JSON",
                    help="print (and with --markdown write) a measured matrix.json again, without a cluster")
    st.add_argument("--quiet", action="store_true", help="no progress display")
    st.set_defaults(func=cmd_selftest)

    from kipcheck.checks.cli_check import add_check_arguments, run_check_command
    k = sub.add_parser("check", help="check a history against the reference model")
    add_check_arguments(k)
    k.set_defaults(func=run_check_command)

    rep = sub.add_parser("report", help="(re)write a run's HTML report")
    rep.add_argument("run", help="run directory")
    rep.set_defaults(func=cmd_report)

    m = sub.add_parser("model", help="replay a scenario through the reference model")
    msub = m.add_subparsers(dest="model_command", required=True)
    mr = msub.add_parser("replay", help="print each step's allowed outcomes as JSON")
    mr.add_argument("scenario", help="scenario JSON file (docs/model.md), or the name of one shipped in "
                                     "reference_model/scenarios, e.g. kip227-session")
    mr.add_argument("--profile", default="kip", help="kip or kafka-X.Y")
    mr.set_defaults(func=cmd_model)

    pr = sub.add_parser("profile", help="profiles of Kafka releases")
    prsub = pr.add_subparsers(dest="profile_command", required=True)
    prr = prsub.add_parser("read", help="read a release's jars from Maven Central: which known deviations and KIP "
                                        "features its code has (docs/releases.md, 'Reading a new release')")
    prr.add_argument("version", help="Kafka release X.Y.Z, e.g. 4.4.0")
    prr.add_argument("--json", action="store_true", help="machine-readable output")
    prr.set_defaults(func=cmd_profile_read)

    h = sub.add_parser("history", help="history tools")
    hsub = h.add_subparsers(dest="history_command", required=True)
    hs = hsub.add_parser("stats", help="counts by f, type and process")
    hs.add_argument("run", help="run directory or history file")
    hs.set_defaults(func=cmd_history)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KipcheckError as e:  # a HarnessError, or a fault's own (e.g. an unknown --faults name)
        print(f"kipcheck: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("kipcheck: interrupted; faults healed and cluster stopped", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`kipcheck check RUN | head`): nothing to report
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 0
    except Exception as e:  # a bug of kipcheck outside a run's directory: one line, the traceback in a file
        from kipcheck.harness.runlog import one_line, save_traceback
        print(f"kipcheck: internal error: {one_line(e)} (traceback in {save_traceback(e)})", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
