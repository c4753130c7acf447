"""The run's clients as one service: producers, consumers, the prober, the observer and the
nemesis of a fault plan (faults.plan; an empty one injects nothing), started and stopped together.

`kipcheck run` drives it for a fixed duration (harness.run); the pytest `workload` fixture
starts and stops it around a test's own steps (harness.pytest_plugin), like a ducktape service.
"""
from __future__ import annotations

import logging
import secrets
import threading

from kipcheck.harness.errors import HarnessError
from kipcheck.rundir.writer import History
from kipcheck.harness.backends.node import OFFSETS_TOPIC_REPLICATION
from kipcheck.harness.clients.admin import wait_group_coordinator
from kipcheck.harness.clients.group_describer import GroupDescriber
from kipcheck.harness.clients.observer import Observer
from kipcheck.harness.clients.prober import Prober
from kipcheck.harness.runlog import internal_error, one_line
from kipcheck.harness.clients.workload import ConsumerWorker, ProducerWorker, WorkloadOptions

log = logging.getLogger(__name__)

#: how long the start waits for the subscribers' group coordinator (admin.wait_group_coordinator)
COORDINATOR_WAIT_S = 60.0


class WorkloadService:
    def __init__(self, cluster, ctx, options: WorkloadOptions, history: History, rack: str | None,
                 faults, seed: int = 0, probes: bool = True, skip: frozenset = frozenset()):
        """`faults`: a faults.plan.FaultPlan, whose nemesis runs here; `skip`: Skipped keys
        (harness.clients.capabilities) of probes the cluster cannot answer."""
        self.options = options
        self.stop_event = threading.Event()
        bootstrap = cluster.bootstrap_servers()
        if options.workload == "txn":  # transactional producers and copiers (harness.clients.txn_workload)
            from kipcheck.harness.clients.txn_workload import CopierWorker, TxnProducerWorker
            self.producers = [*(TxnProducerWorker(bootstrap, options, history, self.stop_event, i, seed)
                                for i in range(options.producers)),
                              *(CopierWorker(bootstrap, options, history, self.stop_event, i)
                                for i in range(options.copiers))]
        else:
            self.producers = [ProducerWorker(bootstrap, options, history, self.stop_event, i)
                              for i in range(options.producers)]
        # one group per run: a group that outlived an earlier run on the same cluster would hand its
        # committed offsets to this run's subscribers, offsets no commit of this history made
        self.group = group = f"kipcheck-subscribers-{options.topic}-{secrets.token_hex(3)}"
        self.bootstrap, self.topic = bootstrap, options.topic
        # kipcheck's own clusters replicate __consumer_offsets 3 times: with fewer brokers no coordinator comes
        self.coordinator_possible = cluster.mode == "external" or len(cluster.brokers) >= OFFSETS_TOPIC_REPLICATION
        self.consumers = [ConsumerWorker(bootstrap, options, history, self.stop_event, i, rack, group=group)
                          for i in range(options.consumers)]
        self.share_group, self.share_consumers = None, []
        if options.workload == "share":  # KIP-932 share consumers in one share group (harness.clients.share_workload)
            from kipcheck.harness.clients.share_workload import ShareConsumerWorker
            from kipcheck.harness.clients.workload_options import share_group_name
            self.share_group = options.share_group or share_group_name(options.topic, secrets.token_hex(3))
            self.share_consumers = [ShareConsumerWorker(bootstrap, options, history, self.stop_event, i, self.share_group)
                                    for i in range(options.share_consumers)]
        self.nemesis = faults.nemesis(ctx, history, self.stop_event)
        prober_skip = frozenset(k.removeprefix("prober.") for k in skip if k.startswith("prober."))
        if "workload.log_append_time" in skip:  # CreateTime topics: no stamps to judge an answer by time against
            prober_skip |= {"list_offsets@time"}
        no_propagation = {"propagation_every": 0} if "observer.metadata_propagation" in skip else {}
        self.probes = [Prober(bootstrap, list(options.topics), history, self.stop_event, seed=seed, skip=prober_skip,
                              share_group=self.share_group),
                       Observer(bootstrap, [options.topic], history, self.stop_event, kraft=cluster.kraft_settings(),
                                seed=seed, **no_propagation)] if probes else []
        # the coordinator's view of the subscribers' KIP-848 group (harness.clients.group_describer)
        self.describers = [GroupDescriber(bootstrap, group, history, self.stop_event)] if (
            probes and self.coordinator_possible and "observer.group_describe" not in skip
            and any(c.mode == "subscribe" and c.protocol == "consumer" for c in self.consumers)) else []
        self.threads = [*self.producers, *self.consumers, *self.share_consumers, *self.probes, *self.describers,
                        self.nemesis]
        self.started = self.stopped = False

    def start(self) -> "WorkloadService":
        """Start every thread; a run with subscribers first waits for its group's coordinator."""
        if self.coordinator_possible and any(c.mode == "subscribe" for c in self.consumers) and not wait_group_coordinator(
                self.bootstrap, self.group, self.topic, COORDINATOR_WAIT_S):
            log.warning("the coordinator of %s did not answer within %.0f s; starting anyway",
                        self.group, COORDINATOR_WAIT_S)
        if self.share_group:
            from kipcheck.harness.clients.share_workload import broker_settings, start_from_earliest, warm_up
            if not warm_up(self.bootstrap, self.topic, COORDINATOR_WAIT_S):
                log.warning("the share coordinators did not serve a share group within %.0f s; starting anyway",
                            COORDINATOR_WAIT_S)
            o = self.options
            settings = broker_settings(self.bootstrap, o.share_lock_ms, o.share_delivery_limit)
            for c in self.share_consumers:
                c.lock_ms, c.limit = settings
            if (why := start_from_earliest(self.bootstrap, self.share_group)) is not None:
                log.warning("share.auto.offset.reset of %s not set (%s): it starts at the latest offset",
                            self.share_group, why)
            for c in self.share_consumers:
                c.offset_reset = "latest" if why else "earliest"
        for t in self.threads:
            t.start()
        self.started = True
        return self

    def raise_errors(self) -> None:
        """A thread that died is kipcheck's own failure (the history keeps what it recorded):
        its traceback to harness.log, one line up."""
        for t in self.threads:
            if t.error:
                internal_error(t.name, "the thread ended with an exception", t.error)
                raise HarnessError(f"{t.name} failed: {one_line(t.error)}")

    def progress(self) -> dict:
        crashes = sum(w.crashes for w in [*self.producers, *self.consumers, *self.share_consumers])
        txns = self.transactions()
        return {"sent": sum(p.sent for p in self.producers), "read": sum(c.read for c in self.consumers),
                **({"share read": sum(c.read for c in self.share_consumers)} if self.share_consumers else {}),
                **({"txns": "/".join(str(txns[k]) for k in ("committed", "aborted", "unknown"))} if txns else {}),
                "faults": len(self.nemesis.windows), **({"client crashes": crashes} if crashes else {})}

    def stop(self, timeout: float = 30) -> None:
        """Stop every thread (the nemesis first, so it heals its open window); idempotent."""
        self.stop_event.set()
        if self.started and not self.stopped:
            for t in [self.nemesis, *self.threads[:-1]]:
                t.join(timeout=timeout)
        self.stopped = True

    def settled_probes(self) -> None:
        """The prober's last round, every partition once, after `stop` (`Prober.settled_round`)."""
        if self.probes and self.stopped:
            self.probes[0].settled_round()

    def transactions(self) -> dict:
        """Transactions committed, aborted and unknown so far (empty: not the txn workload)."""
        out: dict = {}
        for p in self.producers:
            for k, n in getattr(p, "counts", {}).items():
                out[k] = out.get(k, 0) + n
        return out

    def prober_skipped(self) -> dict:
        """Probes the prober left out because the broker's ApiVersions lack them: {what: why}."""
        return dict(getattr(self.probes[0], "skipped", {})) if self.probes else {}

    def fetch_sources(self) -> dict:
        """Where each consumer fetched each partition from (KIP-392), for config.json."""
        return {c.name: {str(p): v for p, v in sorted(c.fetch_sources.items())} for c in self.consumers}
