"""The `native` backend: the nodes are JVMs on this machine (harness.backends.cluster), each in
its own network namespace when run as root, else on loopback with proxy-level faults only."""
from __future__ import annotations

from kipcheck.harness.backends.backend import Backend, Capabilities, FaultSupport


class NativeBackend(Backend):
    name = "native"
    capabilities = Capabilities(starts_kafka=True, faults=FaultSupport(), same_clock=True, upgrades=True,
                                tiered_refused=None, elr=True, metadata_log=True,
                                hosts="this machine: a network namespace per node when root, else loopback")

    def cluster(self, options, dist, root, cluster_options, owner_pid):
        from kipcheck.harness.backends.cluster import NativeCluster
        return NativeCluster(dist, root, cluster_options, owner_pid=owner_pid)


BACKEND = NativeBackend()
