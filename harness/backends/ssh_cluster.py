"""The `ssh` backend: a KRaft cluster on remote hosts named by a ducktape cluster file.

The same `KafkaNode`s as the native backend, each with an `SshHost` as its runner
(harness.backends.ssh): properties, formatting, starts, signals, disk faults and the
iptables drop rules are the native code, run over SSH. kipcheck runs on the control host
(the file may name it, with roles ["client"]); clients, probes and Toxiproxy (link faults:
it fronts each broker's client listener, as natively) run here and reach the brokers at
their `externally_routable_ip`.

On each host kipcheck touches only: its directory (`kipcheck.dir`, default
/tmp/kipcheck-hosts: the Kafka classpath under kafka/, copied from this machine's cache
when missing, and one directory per cluster), the processes it starts there, and one
iptables chain per cluster (KIPCHECK-<cluster id>, jumped to from INPUT and OUTPUT).
Everything is recorded in the cluster state before it is made, so `down()`, the watchdog of
a SIGKILLed harness and `kipcheck cluster down` undo it; `kipcheck cluster down --hosts FILE`
does it from the hosts alone (harness.backends.ssh.clean_host); harness.backends.ssh_cleanup
holds that undoing, apart from this module.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path, PurePosixPath

from kipcheck.harness.backends import network, ssh
from kipcheck.harness.backends.cluster import BROKER_PORT, CLIENT_PORT, CONTROLLER_PORT, ClusterOptions, NativeCluster
from kipcheck.harness.backends.kafka_dist import KafkaDistribution
from kipcheck.harness.backends.node import KafkaNode, NodeSpec
from kipcheck.harness.backends.parallel import side_by_side
from kipcheck.harness.backends.state import ClusterState
from kipcheck.harness.backends.sweep import reap_stale, teardown
from kipcheck.harness.errors import HarnessError

COPIED_BACK = ("server.properties",)  # besides the logs, what `down()` copies into the run directory


class SshCluster(NativeCluster):
    """A NativeCluster's topology and lifecycle on the hosts of a cluster file."""

    def __init__(self, dist: KafkaDistribution, root: Path, hosts: ssh.HostsFile,
                 options: ClusterOptions = ClusterOptions(), owner_pid: int | None = None):
        if options.tiered:
            raise HarnessError(ssh.TIERED_REFUSED)
        super().__init__(dist, root, dataclasses.replace(options, use_namespaces=False), owner_pid)
        self.hosts = hosts
        self.remote_root = PurePosixPath(hosts.dir) / self.cluster_id
        self.host_dists: dict[str, KafkaDistribution] = {}

    @property
    def mode(self) -> str:
        return "ssh"

    def _chain(self) -> str:
        return f"{ssh.CHAIN_PREFIX}{self.cluster_id[:8]}"

    def _roles(self) -> list[tuple[str, ...]]:
        """The file's roles where it gives them, else --controllers dedicated controllers first, the rest brokers."""
        entries = self.hosts.kafka_nodes
        if all(e.roles for e in entries):
            return [e.roles for e in entries]
        if any(e.roles for e in entries):
            raise HarnessError(f"{self.hosts.path}: give roles for every Kafka node or for none")
        n = self.options.dedicated_controllers
        if n >= len(entries):
            raise HarnessError(f"{self.hosts.path}: {n} dedicated controllers leave no broker among {len(entries)} nodes")
        if n:
            return [("controller",)] * n + [("broker",)] * (len(entries) - n)
        return [("broker", "controller")] * len(entries)

    def _plan(self) -> list[NodeSpec]:
        ports = self.hosts.ports or (BROKER_PORT, CONTROLLER_PORT, CLIENT_PORT)
        specs, brokers = [], 0
        for i, (entry, roles) in enumerate(zip(self.hosts.kafka_nodes, self._roles()), start=1):
            brokers += "broker" in roles
            rack = entry.rack or (f"rack-{brokers}" if "broker" in roles else f"rack-c{i}")
            host = ssh.SshHost(entry.ssh, entry.address, self._chain())
            specs.append(NodeSpec(node_id=i, roles=roles, rack=rack, host=host, internal_port=ports[0],
                                  controller_port=ports[1], client_port=ports[2],
                                  extra_config=dict(self.options.extra_config)))
        return specs

    def up(self, timeout: float = 180.0, progress=None) -> None:
        """Reach every host, copy what it lacks, make its chain, then start the nodes as natively."""
        step = progress or (lambda msg: None)
        reap_stale()
        self.root.mkdir(parents=True, exist_ok=True)
        self.state = ClusterState.create(self.cluster_id, self.owner_pid, root=str(self.root), mode=self.mode,
                                         kafka_version=self.dist.version, hosts=self.hosts.as_json(),
                                         remote_root=str(self.remote_root), chain=self._chain(), chains=[])
        if self.owner_pid is not None:
            self._start_reaper()
        specs = self._plan()
        hosts = [s.host for s in specs]
        step(f"reaching {len(hosts)} hosts over SSH")
        javas = side_by_side(lambda h=h: self._prepare(h) for h in hosts)
        step(f"the Kafka {self.dist.version} classpath on the hosts")
        lib = self._lib(self.dist)
        paths = side_by_side(lambda h=h: ssh.sync_classpath(h, self.dist.classpath, lib) for h in hosts)
        self.host_dists = {h.name: KafkaDistribution(self.dist.version, tuple(p), java)
                           for h, p, java in zip(hosts, paths, javas)}
        step("kipcheck's iptables chain on each host")
        for h in hosts:
            self.state.append("chains", h.name)  # recorded before it exists: teardown removes what is there
            network.install_chain(h)
        self._launch(specs, timeout, step)

    def _front_node_links(self, specs: list[NodeSpec], step) -> list[NodeSpec]:
        """With options.proxied_links, a Toxiproxy server on every node's host (the pinned binary
        copied there once, under the cluster file's directory), its API on the host's address
        (port 8474: the control node must reach it), fronting the node's INTERNAL and CONTROLLER
        listeners on that address, as in a namespace here."""
        if not self.options.proxied_links:
            return specs
        from kipcheck.harness.backends import toxiproxy
        step("starting toxiproxy on every node's host")
        local = toxiproxy.ensure_installed()
        remote_bin = PurePosixPath(self.hosts.dir) / "bin"
        hosts = list({s.host.name: s.host for s in specs}.values())
        copies = side_by_side(lambda h=h: ssh.sync_binary(h, local, remote_bin) for h in hosts)
        binaries = {h.name: path for h, path in zip(hosts, copies)}
        self.link_servers = dict(zip((s.node_id for s in specs), side_by_side(
            lambda s=s: toxiproxy.start_server(self.state, PurePosixPath(self.remote_root) / f"node-{s.node_id}" / "toxiproxy",
                                               host=s.host, binary=binaries[s.host.name]) for s in specs)))
        return [toxiproxy.front_node_listeners(self.link_servers[s.node_id], s) for s in specs]

    def _lib(self, dist: KafkaDistribution) -> PurePosixPath:
        """Where a release's classpath lies on every host (a changed local cache: a new directory)."""
        return PurePosixPath(self.hosts.dir) / "kafka" / f"{dist.version}-{ssh.classpath_tag(dist.classpath)}"

    def distribution_for(self, node: KafkaNode, dist: KafkaDistribution) -> KafkaDistribution:
        """A rolling upgrade's target on the node's host: its java checked for that release, its
        classpath copied there (once per host), the host's paths in the distribution."""
        host = node.spec.host
        java = ssh.check_java(host, self.hosts.java, dist.version)
        return KafkaDistribution(dist.version, tuple(ssh.sync_classpath(host, dist.classpath, self._lib(dist))), java)

    def _prepare(self, host: ssh.SshHost) -> str:
        """Connect, check java and sudo, and make the cluster's directory; the host's java."""
        java = ssh.check_java(host, self.hosts.java, self.dist.version)
        ssh.check_sudo(host)
        host.shell(f"mkdir -p '{self.remote_root}'", check=True)
        return java

    def _node(self, spec: NodeSpec, cluster_uuid: str, voters: str) -> KafkaNode:
        return KafkaNode(spec, self.remote_root, self.host_dists[spec.host.name], self.state, cluster_uuid, voters,
                         self.options.heap, self.options.broker_jvm_args if spec.is_broker else (),
                         local_root=self.root, **self._node_disk_and_clock(spec), jit=self.options.jit)

    def collect_logs(self) -> None:
        """Copy each node's logs and configuration into the run directory (`<root>/node-N/`)."""
        def one(n: KafkaNode) -> None:
            n.logs()
            for name in COPIED_BACK:
                n.spec.host.fetch(n.dir / name, n.local_dir / name)
        side_by_side(lambda n=n: one(n) for n in self.nodes)

    def down(self, grace: float = 5.0) -> None:
        """Stop every node, copy their logs here, then remove the hosts' files and chains (teardown)."""
        if self.state is None:
            return
        try:
            side_by_side((lambda n=n: n.stop_node(clean_shutdown=True, timeout=grace)) for n in self.nodes)
            self.collect_logs()
        finally:
            teardown(self.state)  # -> ssh_cleanup.clean_recorded, then the local helpers and the state file
            self.state = None

