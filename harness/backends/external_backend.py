"""The `external` backend: a running cluster at --bootstrap (harness.backends.external).
kipcheck starts and stops nothing there, so it reads no node's disk, log or clock."""
from __future__ import annotations

from kipcheck.harness.backends.backend import Backend, Capabilities, FaultSupport
from kipcheck.harness.errors import HarnessError


class ExternalBackend(Backend):
    name = "external"
    # every fault kind is asked for: those needing node access fail in one line at injection (FaultError)
    capabilities = Capabilities(starts_kafka=False, faults=FaultSupport(), same_clock=False, upgrades=False,
                                tiered_refused=None, elr=False, metadata_log=False,
                                hosts="none of kipcheck's: the brokers at --bootstrap, reached as a client")

    def complete(self, options):
        if not options.bootstrap:
            raise HarnessError("the external backend needs --bootstrap HOST:PORT[,...]")
        return options

    def reach(self, options, dist, ui) -> None:
        """An unreachable cluster fails here, before the run directory; its Kafka version is what --kafka-version says."""
        from kipcheck.harness.backends.external import ExternalCluster
        with ui.step(f"reaching {options.bootstrap}"):
            ExternalCluster(options.bootstrap).up()
        if not options.kafka_version:
            ui.note("the external cluster's Kafka version is unknown: the checker uses the KIP-text profile "
                    "(pass --kafka-version to judge it by that release's known deviations)")

    def cluster(self, options, dist, root, cluster_options, owner_pid):
        from kipcheck.harness.backends.external import ExternalCluster
        return ExternalCluster(options.bootstrap)

    def start(self, cluster, options, version, ui) -> None:
        """Nothing starts: the cluster, reached before, tells its brokers' racks again."""
        cluster.up()


BACKEND = ExternalBackend()
