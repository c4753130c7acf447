"""What a run, the selftest and the pytest plugin share: the context faults touch, the
workload topic's set-up, the follower rack a consumer reads from, and the drive loop
(workers, probes, the nemesis and a rolling upgrade for a duration).

`kipcheck run` (harness.run) wraps these in a run directory, config.json and the check;
`kipcheck selftest` (harness.selftest) in one window per seeded bug; the pytest plugin's
`workload` and `nemesis` fixtures (harness.pytest_plugin) in a test.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kipcheck.faults.base import FaultContext
from kipcheck.harness import runlog
from kipcheck.harness.backends import releases
from kipcheck.harness.clients.admin import Admin
from kipcheck.harness.clients.capabilities import Skipped
from kipcheck.rundir.writer import History
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.runlog import LOG_NAME, internal_error
from kipcheck.harness.service import WorkloadService

if TYPE_CHECKING:
    from kipcheck.faults.cluster import Cluster
    from kipcheck.faults.plan import FaultPlan
    from kipcheck.harness.run import RunOptions

#: how long the workload may go on past --duration for a rolling upgrade to finish its steps
UPGRADE_OVERRUN = 300.0
#: how long it may go on for KIP-1166's statistic to have its sample (`gather_propagation_sample`)
PROPAGATION_OVERRUN = 60.0


class RunContext(FaultContext):
    """What faults may touch during a run (faults.base.FaultContext; its `stop_event` is None
    until a nemesis runs on it)."""

    def __init__(self, cluster: Cluster, topic: str):
        self.cluster, self.topic = cluster, topic

    def admin(self) -> Admin:
        return Admin(self.cluster.bootstrap_servers())

    def leader_of(self, topic: str, partition: int) -> int:
        leader = self.admin().leader(topic, partition)
        if leader < 0:
            raise HarnessError(f"{topic}-{partition} has no leader")
        return leader


def create_topic(ctx: RunContext, topic: str, partitions: int, replication_factor: int, tiered: bool = False,
                 log_append_time: bool = False):
    """Create the workload topic (tiered: with remote storage, harness.backends.tiered; with
    `log_append_time`, stamped by its leader's clock, KIP-32: where the brokers share this machine's
    clock, the history's, `Capabilities.same_clock`; the checker judges it, checks/rules/timestamp_rules.py)
    and wait until every partition has a full ISR; return its partitions (Admin.wait_full_isr)."""
    from kipcheck.harness.backends.tiered import topic_config
    admin = ctx.admin()
    config = {**(topic_config() if tiered else {}),
              **({"message.timestamp.type": "LogAppendTime"} if log_append_time else {})}
    admin.create_topic(topic, partitions, replication_factor, config=config or None)
    return admin.wait_full_isr(topic, 60)


def follower_rack(cluster, parts) -> str | None:
    """The rack of a follower of partition 0: a consumer there reads from a follower (KIP-392).
    None when partition 0 has no follower (replication factor 1) or its follower no rack."""
    p0 = next((p for p in parts if p.partition == 0), None)
    follower = next((r for r in p0.replicas if r != p0.leader), None) if p0 else None
    return None if follower is None else cluster.racks().get(follower)


def drive(cluster, ctx: RunContext, options: RunOptions, faults: FaultPlan, history: History, rack: str | None, ui,
          skip: set[str] = frozenset(), config: dict | None = None, save_config=None,
          propagation_sample: bool = True) -> dict:
    """Run workers, probes and the nemesis of `faults` for the run's duration; return where consumers fetched from.
    `skip`: Skipped keys (harness.clients.capabilities) of probes the cluster cannot answer. A rolling
    upgrade runs beside them (harness.upgrade); the workload goes on until its last step is done.
    `propagation_sample`: go on past the duration until KIP-1166's statistic has its sample
    (`gather_propagation_sample`); the selftest turns it off in windows that do not judge KIP-1166."""
    skip = {*skip, *(s.key for s in release_gaps(cluster, options))}
    measured = history.keep("metadata_propagation", "fault") if (
        propagation_sample and options.probes and "observer.metadata_propagation" not in skip) else None
    service = WorkloadService(cluster, ctx, options.workload, history, rack, faults, options.seed, options.probes,
                              frozenset(skip))
    upgrader = _upgrader(ctx, options, history, config)
    service.start()
    if upgrader:
        upgrader.start()
    try:
        with ui.timed("workload and faults" + (" and the rolling upgrade" if upgrader else ""),
                      options.duration) as tick:
            t0 = time.monotonic()
            while ((elapsed := time.monotonic() - t0) < options.duration
                   or (upgrader and not upgrader.done.is_set() and elapsed < options.duration + UPGRADE_OVERRUN)):
                service.raise_errors()
                tick(elapsed, **service.progress(), **({"rolled": _rolled(upgrader)} if upgrader else {}))
                time.sleep(0.25)
        if measured is not None:
            gather_propagation_sample(service, measured, ui)
    finally:
        if upgrader:
            upgrader.abort.set()
            if upgrader.ident is not None:  # started
                upgrader.join(timeout=60)
            _record_upgrade(upgrader, cluster, config, save_config, ui)
        service.stop()
        if save_config and service.transactions():
            save_config(transactions=service.transactions())
    service.raise_errors()  # one that died in the last moments counts too
    with ui.step("probing the settled partitions"):
        service.settled_probes()
    for spec, why in service.nemesis.failed:
        ui.note(f"fault {spec.kind} at {spec.start:.0f} s not injected (recorded as `info`): {why.splitlines()[0][:150]}")
    for what, why in service.prober_skipped().items():
        ui.note(f"prober: not asked ({why}): {what}")
    for who, n in sorted(runlog.COUNTS.items()):
        ui.note(f"{who}: {n} internal error(s) (a request it failed is `info` with `internal: true`); "
                f"tracebacks in {LOG_NAME}")
    return service.fetch_sources()


def gather_propagation_sample(service: WorkloadService, measured: list[dict], ui) -> None:
    """KIP-1166's statistic decides nothing below `MIN_CHANGES` metadata changes measured with
    no fault near a node they depend on (checks.rules.kip1166_rules.counted_probes), and a
    run whose faults left fewer would leave the rule undecided: the workload, the observer
    included, goes on past the duration until it has them, for at most `PROPAGATION_OVERRUN`."""
    from kipcheck.checks.rules.kip1166_rules import counted_probes
    from kipcheck.reference_model.kip1166 import MIN_CHANGES

    def decided() -> int:
        return len(counted_probes(list(measured))[0])

    if (have := decided()) >= MIN_CHANGES:
        return
    with ui.timed(f"KIP-1166: {MIN_CHANGES - have} more metadata changes with no fault near them",
                  PROPAGATION_OVERRUN) as tick:
        t0 = time.monotonic()
        while (have := decided()) < MIN_CHANGES and (elapsed := time.monotonic() - t0) < PROPAGATION_OVERRUN:
            service.raise_errors()
            tick(elapsed, changes=f"{have} of {MIN_CHANGES}")
            time.sleep(0.5)
    if have < MIN_CHANGES:
        ui.note(f"KIP-1166: {have} of the {MIN_CHANGES} metadata changes the statistic needs after "
                f"{PROPAGATION_OVERRUN:.0f} s more: it stays undecided")


def release_gaps(cluster, options: RunOptions) -> list[Skipped]:
    """What the cluster's release cannot show: KIP-1166 probes only where it shipped, or where
    the release's profile says what its KRaft does instead (`kraft-fetch-parks-without-hwm`,
    read in 4.0's code): there the probes show the KIP's absence under `kip` and stay within
    the profile's bound. Older lines' parking was found by `kipcheck profile read` but is not in
    their profiles, so a probe there would judge them by a rule they never had."""
    from kipcheck.reference_model import profiles
    version = version_of(cluster, options)
    if releases.has(version, "kip-1166") or \
            profiles.get(profiles.for_version(version)).allows(profiles.KRAFT_FETCH_PARKS_WITHOUT_HWM):
        return []
    return [Skipped("observer.metadata_propagation", "KIP-1166 metadata propagation timing",
                    f"Kafka {version} predates KIP-1166 (from {'.'.join(map(str, releases.FEATURES['kip-1166'][0]))}) "
                    f"and its profile does not say how its KRaft propagates")]


def version_of(cluster, options: RunOptions) -> str | None:
    """The Kafka version the cluster runs (one with no distribution of ours, an external cluster:
    what --kafka-version said);
    during a rolling upgrade the older release, which both ends of a mixed cluster have."""
    if options.upgrade_from:
        from kipcheck.harness.upgrade import older
        return older(options.upgrade_from, options.upgrade_to)
    return cluster.dist.version if cluster.dist is not None else options.kafka_version


def _upgrader(ctx, options: RunOptions, history: History, config: dict | None):
    """The rolling upgrade's thread (None without --upgrade-from): it starts a tenth into the workload."""
    if not options.upgrade_from:
        return None
    from kipcheck.harness.upgrade import Upgrader
    return Upgrader(ctx, options.upgrade_target, history, start_after=max(2.0, options.duration * 0.1),
                    finalize=bool((config or {}).get("upgrade", {}).get("finalize")))


def _rolled(upgrader) -> str:
    versions = upgrader.ctx.cluster.versions()
    return f"{sum(v == upgrader.target.version for v in versions.values())}/{len(versions)}"


def _record_upgrade(upgrader, cluster, config: dict | None, save_config, ui) -> None:
    """The upgrade's outcome into config.json and onto the terminal."""
    if upgrader.error is not None:
        internal_error("upgrade", "the rolling upgrade failed", upgrader.error)
    outcome = {"steps": upgrader.steps, "finalized": upgrader.finalized, "completed": upgrader.completed,
               "versions": {str(k): v for k, v in sorted(cluster.versions().items())}}
    if save_config and config is not None:
        save_config(upgrade={**config.get("upgrade", {}), **outcome})
    if not upgrader.completed:
        failed = next((s["error"] for s in upgrader.steps if s.get("error")), None)
        ui.note(f"warning: the rolling upgrade did not complete ({failed or 'stopped before its last step'}); "
                f"nodes run {outcome['versions']}")
