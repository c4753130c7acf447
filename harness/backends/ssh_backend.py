"""The `ssh` backend: the nodes run on the remote hosts of a ducktape cluster file, --hosts
(harness.backends.ssh_cluster); kipcheck, its clients and probes stay on this control host."""
from __future__ import annotations

from dataclasses import replace

from kipcheck.harness.backends import ssh
from kipcheck.harness.backends.backend import Backend, Capabilities, FaultSupport
from kipcheck.harness.errors import HarnessError


class SshBackend(Backend):
    name = "ssh"
    capabilities = Capabilities(starts_kafka=True, faults=FaultSupport(), same_clock=False, upgrades=True,
                                tiered_refused=ssh.TIERED_REFUSED, elr=True, metadata_log=True,
                                hosts="the hosts of the --hosts cluster file, over SSH; kipcheck runs on this one")

    def complete(self, options):
        """The cluster file read (a bad one leaves nothing behind) and its broker and controller counts."""
        if not options.hosts:
            raise HarnessError("the ssh backend needs --hosts CLUSTER_JSON (ducktape's cluster file)")
        nodes = ssh.load_hosts(options.hosts).kafka_nodes
        if all(n.roles for n in nodes):
            brokers = sum("broker" in n.roles for n in nodes)
            controllers = sum(n.roles == ("controller",) for n in nodes)
        else:
            brokers, controllers = len(nodes) - options.controllers, options.controllers
        return replace(options, brokers=brokers, controllers=controllers)

    def cluster(self, options, dist, root, cluster_options, owner_pid):
        from kipcheck.harness.backends.ssh_cluster import SshCluster
        return SshCluster(dist, root, ssh.load_hosts(options.hosts), cluster_options, owner_pid=owner_pid)


BACKEND = SshBackend()
