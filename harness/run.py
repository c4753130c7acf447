"""`kipcheck run`: cluster up, workload + faults, heal, final reads, check, report.

Whatever goes wrong (an exception, Ctrl-C, SIGTERM), the run heals every fault,
stops the cluster, closes the history and still writes what it can: the history
and node logs are never lost. A SIGKILLed run is cleaned up by its reaper or by
the next start.

Failures of the cluster or the clients are history (`info` completions), and the run
goes on. A failure of kipcheck itself ends the run with a `HarnessError` whose line
names the verdict of the history so far; its traceback is in the run's harness.log
(harness.runlog), never on the terminal.
"""
from __future__ import annotations

import os
import platform
import secrets
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from typing import TYPE_CHECKING

from kipcheck.rundir import config as run_config
from kipcheck.errors import KipcheckError
from kipcheck.faults.plan import FaultPlan
from kipcheck.harness.backends import registry, releases
from kipcheck.harness.backends.backend import Backend
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.reproduce import reproduce_command
from kipcheck.harness.backends.kafka_dist import LATEST, KafkaDistribution, resolve
from kipcheck.harness.backends.node import default_jit
from kipcheck.harness.runlog import LOG_NAME, harness_log, internal_error, one_line
from kipcheck.harness.clients.workload_options import PRODUCER_REQUEST_TIMEOUT_MS, WorkloadOptions
from kipcheck.rundir.records import JSONL_NAME, PARQUET_NAME

if TYPE_CHECKING:
    from kipcheck.harness.clients.capabilities import Skipped
    from kipcheck.rundir.writer import History

# The fault kinds asked for go into faults once, when the options are checked (`_prepare`): the
# FaultPlan made then is carried to the session, which hands it to the nemesis (faults.plan).
# What validates the options stays light (no client library, Docker, SSH, Spark, Arrow): a bad
# option fails in well under a second, before any process starts. What starts the run is
# imported where the run starts (`_run_in`, `_check_and_report`).


@dataclass
class RunOptions:
    duration: float = 60.0
    seed: int = 0
    backend: str = registry.DEFAULT  # a name of harness.backends.registry
    bootstrap: str | None = None
    hosts: str | None = None  # the ssh backend's cluster file (harness.backends.ssh.load_hosts)
    kafka_version: str | None = None
    kafka_home: str | None = None
    brokers: int = 3
    controllers: int = 0
    faults: list[str] | None = None  # None: the single leader isolation; []: no faults
    intensity: float = 1.0
    runs_dir: str = "runs"
    engine: str = "local"
    profile: str | None = None
    workload: WorkloadOptions = field(default_factory=WorkloadOptions)
    tiered: bool = False  # remote storage on every broker, the workload topic tiered (KIP-1023 data)
    group_protocol: str | None = None  # the subscribers' "classic"/"consumer" (KIP-848); None: the release's
    elr: str | None = None  # "on"/"off": eligible.leader.replicas.version 1/0 at format (KIP-966); None: the release's
    probes: bool = True  # the raw-protocol prober and the metadata observer (harness.clients.prober/observer)
    require_coverage: str | None = None  # checks.coverage.parse_requirement: too little makes the verdict unknown
    allow_uncovered: bool = False  # VALID although a reachable rule decided nothing (checks.coverage.require_reachable)
    recovery_bound: float | None = None  # liveness bound in s (None: derived, see checks/recovery.py)
    crash_loop: int | None = None  # crashes in a row before client-crash-loop (None: the checker's default)
    broker_jvm_args: tuple[str, ...] = ()  # ClusterOptions.broker_jvm_args
    # ClusterOptions.jit: "full" or "c1" (harness.backends.node.JIT_FLAGS); by default KIPCHECK_BROKER_JIT's
    broker_jit: str = field(default_factory=default_jit)
    upgrade_from: str | None = None  # a rolling upgrade (or downgrade) from this release ... (harness.upgrade)
    upgrade_to: str | None = None  # ... to this one, during the workload
    #: the resolved distribution of `upgrade_to` (harness.backends.kafka_dist.KafkaDistribution), set by
    #: the run: not an option of the command line, so neither in config.json nor in the reproduce command
    upgrade_target: KafkaDistribution | None = field(default=None, repr=False, compare=False)


def _options_json(options: RunOptions) -> dict:
    """config.json's `options`: every RunOptions field but the workload (config.json's own
    `workload`) and the upgrade target (what the run resolved, not what was asked)."""
    return {k: v for k, v in asdict(replace(options, upgrade_target=None)).items()
            if k not in ("workload", "upgrade_target")}


def new_run_dir(runs_dir: str, seed: int) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(runs_dir) / f"{stamp}-s{seed}"
    path, n = base, 1
    while path.exists():
        n += 1
        path = Path(f"{base}-{n}")
    path.mkdir(parents=True)
    return path


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _sigterm_as_interrupt():
    """SIGTERM unwinds like Ctrl-C, so the finally blocks heal and tear down. SIGINT is made
    Python's own again: a process started in the background by a script inherits it ignored,
    and Python then never raises KeyboardInterrupt (a fresh clone's suite, run with `&`, sent
    Ctrl-C to a run that went on for its whole 300 s)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _raise_interrupt)
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run(options: RunOptions, ui) -> tuple[Path, dict | None]:
    """Do a whole run; return the run directory and the verdict (None when it did not get that far).

    `ui` shows progress (see harness.progress); errors propagate after cleanup. The steps:
    prepare (the options, one line for a bad one, nothing started), the distribution, what the
    backend needs outside; then, in the run directory, plan, start, drive, check, report."""
    _sigterm_as_interrupt()
    backend, options, faults = _prepare(options, ui)
    dist = _distribution(backend, options, ui)  # first: a bad version or no java leaves nothing behind
    version = dist.version if dist else options.kafka_version or "unknown"
    backend.reach(options, dist, ui)  # likewise a missing Docker, an unreachable cluster
    protocol = group_protocol(options.group_protocol,
                              _older_release(options) if options.upgrade_from else version)
    options.workload = replace(options.workload, group_protocol=protocol)
    run_dir = new_run_dir(options.runs_dir, options.seed)
    ui.note(f"run directory {run_dir}")
    with harness_log(run_dir):
        try:
            return _run_in(run_dir, backend, options, version, dist, ui, faults)
        except KipcheckError:  # a HarnessError or a fault's own: already one line
            raise
        except Exception as e:  # before the history existed (e.g. a bad schedule): nothing to judge
            raise HarnessError(f"internal error: {internal_error('run', 'the run failed', e)} "
                               f"(no verdict; see {run_dir / LOG_NAME})") from None


def _prepare(options: RunOptions, ui) -> tuple[Backend, RunOptions, FaultPlan]:
    """The run's backend and its options, checked and completed (harness.backends.registry.prepare),
    and its faults: the asked kinds checked against what the backend injects and the brokers the
    run starts, the cluster they need and their schedule (faults.plan). `options.faults` becomes
    the kinds the run injects (config.json, the reproduce command)."""
    backend, options = registry.prepare(options)
    from kipcheck.harness.backends.toxiproxy import server_override
    server_override()  # a bad KIPCHECK_TOXIPROXY_SERVER fails here, not when the cluster's proxies start
    # the share group is named here, before the schedule that may aim at its coordinators
    options = replace(options, workload=options.workload.with_share_group(secrets.token_hex(3)))
    support, w = backend.capabilities.faults, options.workload
    faults = FaultPlan.asked(options.faults, seed=options.seed, duration=options.duration, topic=w.topic,
                             intensity=options.intensity, partitions=w.partitions,
                             transactional_ids=w.transactional_ids, share_group=w.share_group,
                             runs=support.kinds, why_not=support.why_not,
                             default=support.default,
                             brokers=options.brokers if backend.capabilities.starts_kafka else None)
    if (note := support.default_note(options.faults)) is not None:
        ui.note(note)
    return backend, replace(options, faults=None if faults.kinds is None else list(faults.kinds)), faults


def _distribution(backend: Backend, options: RunOptions, ui) -> KafkaDistribution | None:
    """The Kafka the backend starts (None: it starts none), after the release checks of the options."""
    if not backend.capabilities.starts_kafka:
        return None
    refuse_for_release(options)
    if options.upgrade_from or options.upgrade_to:
        return _resolve_upgrade(options, ui)
    with ui.step("resolving Kafka"):
        dist = resolve(options.kafka_version, options.kafka_home)
    if options.kafka_version == LATEST:
        ui.note(f"--kafka-version latest: Kafka {dist.version}, the newest release Maven Central serves whole")
    if options.elr:
        _refuse_without_elr(dist.version)  # a --kafka-home distribution's own release
    _refuse_without_share(options, dist.version)
    if options.tiered:
        if not releases.has(dist.version, "tiered-storage"):
            raise HarnessError(f"Kafka {dist.version} has no tiered storage (KIP-405 ships from 3.6): drop --tiered")
        from kipcheck.harness.backends.tiered import with_storage_manager
        with ui.step("kipcheck's remote storage manager"):  # built by Maven once per source change
            dist = with_storage_manager(dist)  # on the classpath (and in a container image)
    return dist


def preflight(options: RunOptions) -> None:
    """Every check `run` makes of its options before it starts anything: a plan of runs (a
    campaign, a qualification) refuses a bad one in one line before its first cluster."""
    from kipcheck.harness.progress import ProgressUI
    backend, options, _ = _prepare(options, ProgressUI(quiet=True))
    if backend.capabilities.starts_kafka:
        refuse_for_release(options)


def refuse_for_release(options: RunOptions) -> None:
    """What the asked release (or both of a rolling upgrade) cannot do, one line, before any
    Kafka is resolved; an unknown release is let through (its distribution is checked later)."""
    from kipcheck.harness import upgrade
    if not (options.upgrade_from or options.upgrade_to):
        if options.elr and releases.parse(options.kafka_version):
            _refuse_without_elr(options.kafka_version)
        group_protocol(options.group_protocol, options.kafka_version)
        _refuse_without_share(options)
        return
    if not (options.upgrade_from and options.upgrade_to):
        raise HarnessError("a rolling upgrade needs both --upgrade-from and --upgrade-to")
    if options.kafka_version or options.kafka_home:
        raise HarnessError("--upgrade-from/--upgrade-to roll between Maven's releases: "
                           "drop --kafka-version and --kafka-home")
    if options.tiered:
        raise HarnessError("--tiered is not supported with a rolling upgrade (the tiered configuration is per release)")
    upgrade.direction(options.upgrade_from, options.upgrade_to)
    older = upgrade.older(options.upgrade_from, options.upgrade_to)
    group_protocol(options.group_protocol, older)
    _refuse_without_share(options, older)


def _resolve_upgrade(options: RunOptions, ui):
    """Both distributions of a rolling upgrade (`refuse_for_release` has checked them); the
    starting one is returned, the target kept in `options.upgrade_target`."""
    with ui.step(f"resolving Kafka {options.upgrade_from} and {options.upgrade_to}"):
        start = resolve(options.upgrade_from)
        options.upgrade_target = resolve(options.upgrade_to)
    return start


def _upgrade_config(options: RunOptions) -> dict:
    """config.json's `upgrade` (docs/history.md): what rolls where; the run adds its steps."""
    from kipcheck.harness import upgrade
    a, b = options.upgrade_from, options.upgrade_to
    return {"from": a, "to": b, "direction": upgrade.direction(a, b), "judged_as": upgrade.older(a, b),
            "format_release": upgrade.format_release(a, b), "finalize": upgrade.direction(a, b) == "upgrade"}


ELR_FEATURE = "eligible.leader.replicas.version"


def _refuse_without_elr(version: str) -> None:
    if not releases.has(version, "eligible-leader-replicas"):
        raise HarnessError(f"Kafka {version} has no eligible leader replicas (KIP-966 ships from 4.0): drop --elr")


def _refuse_without_share(options: RunOptions, version: str | None = None) -> None:
    """`--workload share` needs share groups (KIP-932, GA in 4.2); an unknown release is let through."""
    version = version or options.kafka_version
    if options.workload.workload == "share" and releases.parse(version) and not releases.has(version, "share-groups"):
        raise HarnessError(f"Kafka {version} has no share groups (KIP-932 is GA from 4.2): "
                           f"use --kafka-version 4.2 or later, or another --workload")


def group_protocol(asked: str | None, version: str | None) -> str:
    """`--group-protocol`, or the release's default: KIP-848's consumer protocol from 4.0 (GA),
    classic before it and on a cluster of unknown release (it may not speak ConsumerGroupHeartbeat)."""
    known = releases.parse(version) is not None
    if asked == "consumer" and known and not releases.has(version, "consumer-group-protocol"):
        raise HarnessError(f"Kafka {version} has no consumer group protocol (KIP-848 ships from 4.0): "
                           f"drop --group-protocol consumer")
    return asked or ("consumer" if known and releases.has(version, "consumer-group-protocol") else "classic")


def elr_feature(elr: str | None) -> tuple[tuple[str, int], ...]:
    """`--elr on|off` as the feature level StorageTool formats with (none: the release's default)."""
    return () if elr is None else ((ELR_FEATURE, 1 if elr == "on" else 0),)


def _run_in(run_dir: Path, backend: Backend, options: RunOptions, version: str, dist: KafkaDistribution | None,
            ui, faults: FaultPlan) -> tuple[Path, dict | None]:
    """The run inside its directory, on the backend's cluster (of `dist` where it starts one), with
    the faults `_prepare` planned."""
    from kipcheck.harness.backends.cluster import ClusterOptions
    from kipcheck.harness.clients.workload import final_read
    from kipcheck.harness.session import RunContext, create_topic, drive, follower_rack
    from kipcheck.rundir.writer import History
    w = options.workload
    config = run_config.RunConfig(seed=options.seed, duration=options.duration, backend=options.backend,
                                  options=_options_json(options),
                                  workload=asdict(w), schedule=[s.as_json() for s in faults.schedule],
                                  python=platform.python_version(), started=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    config.update(kafka_version=version, features=releases.report(version), reproduce=reproduce_command(options, version))
    if options.upgrade_from:
        config.update(upgrade=_upgrade_config(options),
                      features=releases.report(_older_release(options)))  # what both releases have

    def save_config(**fields) -> None:
        """config.json grows as the run learns things (racks, where consumers fetched from)."""
        config.update(fields)
        run_config.write(run_dir, config)
    save_config()

    cluster_options = ClusterOptions(options.brokers, options.controllers, **faults.cluster_options,
                                     extra_config=w.share_broker_config(),  # the share workload's lock and limit
                                     tiered=options.tiered, broker_jvm_args=tuple(options.broker_jvm_args),
                                     jit=options.broker_jit,
                                     release_version=config.get("upgrade", {}).get("format_release"),
                                     features=elr_feature(options.elr))
    cluster = backend.cluster(options, dist, run_dir / "cluster", cluster_options, owner_pid=os.getpid())
    history = History(run_dir / JSONL_NAME)
    verdict = None
    failure: Exception | None = None
    try:
        started = time.monotonic()
        backend.start(cluster, options, version, ui)
        save_config(mode=cluster.mode, racks=cluster.racks(), bootstrap=cluster.bootstrap_servers(),
                    recovery_bound=_recovery_bound(cluster, time.monotonic() - started),
                    kraft=cluster.kraft_settings(), consumer_groups=cluster.consumer_group_settings())
        if cluster.mode == "loopback":
            ui.note("not root: nodes share loopback; packet-level partitions are unavailable, proxy faults only")
        ctx = RunContext(cluster, w.topic)
        with ui.step("creating the workload topic"):
            rf, stamped = min(3, len(cluster.racks()) or options.brokers), backend.capabilities.same_clock
            parts = create_topic(ctx, w.topic, w.partitions, rf, options.tiered, log_append_time=stamped)
            for extra in w.topics[1:]:  # the txn workload's second topic and its copier's output
                create_topic(ctx, extra, w.partitions, rf, options.tiered, log_append_time=stamped)
        rack = w.consumer_rack or follower_rack(cluster, parts)
        skipped = _skipped(backend, cluster, parts, rack, options, faults)
        for s in skipped:
            ui.note(f"skipped: {s.feature}: {s.reason}")
        save_config(consumer_rack=rack, skipped=[s.as_json() for s in skipped])
        save_config(consumer_fetch_sources=drive(cluster, ctx, options, faults, history, rack, ui,
                                                 {s.key for s in skipped}, config, save_config))
        with ui.step("healing and waiting for a full ISR"):
            faults.heal_all(ctx, history)
            try:
                ctx.admin().wait_full_isr(w.topic, 60)
            except HarnessError as e:
                ui.note(f"warning: {e}")
        with ui.step("final reads from the beginning"):
            if not final_read(cluster.bootstrap_servers(), w, history):
                ui.note("warning: the final reads did not reach every partition's end; lost-write is incomplete")
    except Exception as e:  # Ctrl-C and SIGTERM (KeyboardInterrupt) pass through, after the cleanup below
        failure = e
    finally:
        try:
            if cluster.state is not None:
                if backend.capabilities.metadata_log:  # before down: a crashed run keeps it too
                    _record_metadata_log(cluster, history, ui)
                with ui.step("stopping the cluster"):
                    try:
                        if cluster.nodes:  # a cluster stopped before any node was made has nothing to heal
                            faults.heal_all(RunContext(cluster, w.topic))
                    finally:
                        cluster.down()
        except Exception as e:
            failure = failure or e
            if failure is not e:
                internal_error("run", "stopping the cluster failed too", e)
        finally:
            history.close()
            verdict = _check_and_report(run_dir, options, ui)
    if failure is not None:
        raise HarnessError(f"{_failure_line(failure)} ({_so_far(verdict, run_dir)})") from None
    return run_dir, verdict


def _recovery_bound(cluster, node_start_s: float) -> dict:
    """The default liveness bound from this cluster's own timeouts and its measured start
    (checks/recovery.py); an external cluster's settings are unknown: Kafka's defaults."""
    from kipcheck.checks.recovery import derive_bound
    props = cluster.brokers[0].server_properties() if cluster.brokers else None
    return derive_bound(props, PRODUCER_REQUEST_TIMEOUT_MS, node_start_s if props is not None else None)


def _failure_line(failure: Exception) -> str:
    """One line for the terminal; the traceback goes to harness.log."""
    if isinstance(failure, KipcheckError):  # a HarnessError or a fault's own
        internal_error("run", "the run failed", failure)
        return str(failure)
    return f"internal error: {internal_error('run', 'the run failed', failure)}"


def _so_far(verdict: dict | None, run_dir: Path) -> str:
    """What the history recorded before the failure says, and where to look."""
    log = run_dir / LOG_NAME
    if verdict is None:
        return f"no verdict; see {log}"
    state = {True: "VALID", False: "INVALID"}.get(verdict.get("valid"), "UNKNOWN")
    n = sum(len(v) for v in verdict.get("anomalies", {}).values())
    return f"history so far: {state}, {n} anomal{'y' if n == 1 else 'ies'}; see {run_dir / 'verdict.json'}, {log}"


def _record_metadata_log(cluster, history: History, ui) -> None:
    """The controllers' metadata log into the history (KIP-966's election rule); a run goes on without it.
    Only where the backend can read it (else named in `skipped`)."""
    if not cluster.nodes:
        return  # stopped before any node was made
    from kipcheck.harness import metadata_log
    with ui.step("reading the controllers' metadata log"):
        try:
            decoded = metadata_log.record(history, cluster.nodes)
        except Exception as e:  # a host gone, a torn tail, a decoding slip: the traceback goes to harness.log
            why = one_line(e) if isinstance(e, KipcheckError) else internal_error("run", "reading the metadata log", e)
            ui.note(f"warning: the metadata log could not be read ({why}): KIP-966 decides nothing")
            return
    if decoded.skipped_versions:
        ui.note(f"metadata records newer than kipcheck decodes were skipped: {decoded.skipped_versions}")


def _skipped(backend: Backend, cluster, parts, rack: str | None, options: RunOptions,
             faults: FaultPlan) -> list[Skipped]:
    """What this cluster cannot be asked (its backend's fault kinds and readings, its ApiVersions, its
    replication), named with why."""
    from kipcheck.harness.clients import capabilities
    from kipcheck.harness.session import release_gaps
    p0 = next((p for p in parts if p.partition == 0), None)
    skipped = capabilities.fault_skips(faults.refused)
    skipped += capabilities.replication_gaps(list(p0.replicas) if p0 else [], rack)
    if not backend.capabilities.metadata_log:
        skipped.append(capabilities.Skipped("harness.metadata_log", "KIP-966 leader eligibility",
                                            f"the {backend.name} backend cannot read the controllers' metadata log"))
    if not backend.capabilities.same_clock:
        skipped.append(capabilities.Skipped(
            "workload.log_append_time", "KIP-32 LogAppendTime stamps",
            f"the {backend.name} backend's brokers may not stamp with this machine's clock"))
    skipped += release_gaps(cluster, options) if options.probes else []
    if options.probes:
        try:
            address, versions = capabilities.broker_versions(cluster.bootstrap_servers())
        except OSError as e:
            raise HarnessError(f"cannot ask the cluster which APIs it supports: {e}") from None
        skipped += capabilities.api_gaps(versions, address)
    first = {}
    for s in skipped:  # one line each: a release that predates an API may lack it twice
        first.setdefault(s.key, s)
    return list(first.values())


def _older_release(options: RunOptions) -> str:
    from kipcheck.harness.upgrade import older
    return older(options.upgrade_from, options.upgrade_to)


def _convert_aside(run_dir: Path):
    """`rundir.history.to_parquet` of the run's history in a process of its own (spawned: the harness has
    threads), as a future: its result or its exception comes back here. The process ends with the
    conversion (the pool is shut down without waiting; `result` waits)."""
    from concurrent.futures import ProcessPoolExecutor
    import multiprocessing
    from kipcheck.rundir.history import to_parquet
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
    try:
        return pool.submit(to_parquet, run_dir / JSONL_NAME, run_dir / PARQUET_NAME)
    finally:
        pool.shutdown(wait=False)


def gate_uncovered(verdict: dict, run_dir: Path, options: RunOptions) -> dict:
    """A run's verdict is unknown where a rule its set-up reached decided nothing, unless
    `--allow-uncovered` (checks.coverage.require_reachable); the campaign's check too."""
    from kipcheck.checks.coverage import require_reachable
    from kipcheck.rundir.config import load as load_config
    return verdict if options.allow_uncovered else require_reachable(verdict, load_config(run_dir))


def _check_and_report(run_dir: Path, options: RunOptions, ui) -> dict | None:
    """Parquet, verdict, report: each step independent, so a crash in one keeps the others. The local
    engine reads the JSONL history while another process writes the Parquet copy (the cluster is down by
    now, so the two have the machine's cores): a 30 s run's check and conversion took 8 s and 7 s."""
    from kipcheck.checks.api import check, write_verdict
    from kipcheck.rundir.history import HistoryError, to_parquet
    verdict = None
    converting = _convert_aside(run_dir) if options.engine == "local" else None
    try:
        if converting is None:
            with ui.step("writing Parquet"):
                to_parquet(run_dir / JSONL_NAME, run_dir / PARQUET_NAME)
        with ui.step(f"checking the history ({options.engine})"):
            verdict = check(run_dir, engine=options.engine, profile=options.profile,
                            require_coverage=options.require_coverage,
                            recovery_bound=options.recovery_bound, crash_loop=options.crash_loop)
            verdict = gate_uncovered(verdict, run_dir, options)
            write_verdict(verdict, run_dir / "verdict.json")
    except HistoryError as e:
        ui.note(f"error: {e}")
    except Exception as e:  # our own failure: the history is intact; the traceback to harness.log
        ui.note(f"error: no verdict: {internal_error('check', 'checking the history failed', e)} (see {LOG_NAME})")
    finally:
        if converting is not None:
            try:
                with ui.step("writing Parquet"):
                    converting.result()
            except HistoryError as e:
                if verdict is not None:  # else the check said it already: it read the same lines
                    ui.note(f"error: {e}")
            except Exception as e:
                ui.note(f"error: history.parquet not written: "
                        f"{internal_error('parquet', 'writing Parquet failed', e)} (see {LOG_NAME})")
    try:
        from kipcheck.reports.html import write_report
        with ui.step("writing the report"):
            write_report(run_dir)
    except Exception as e:  # the run's data is intact; say so
        ui.note(f"error: report not written: {internal_error('report', 'writing the report failed', e)}")
    return verdict
