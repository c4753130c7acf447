"""The native cluster backend: N KRaft nodes as JVMs, each in its own network namespace.

`NativeCluster.up()` formats and starts the nodes and waits until every broker is
registered and a probe topic has a full ISR. `down()` stops them (controlled
shutdown, kill -9 after a timeout) and deletes the network (harness.backends.sweep.teardown,
which also tears down what a killed harness left, from the state files alone: `reap_stale()`).
"""
from __future__ import annotations

import base64
import shutil
import sys
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kipcheck.harness.backends import network
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import KafkaDistribution
from kipcheck.harness.backends.node import (KafkaNode, NodeSpec, check_jit, consumer_group_settings, default_jit,
                                            kraft_settings, quorum_voters)
from kipcheck.harness.backends.parallel import side_by_side
from kipcheck.harness.backends.ports import free_port
from kipcheck.harness.backends.state import ClusterState, all_states, process_start_time
from kipcheck.harness.backends.sweep import reap_stale, teardown

if TYPE_CHECKING:
    from kipcheck.harness.backends.toxiproxy import LinkProxy

BROKER_PORT, CONTROLLER_PORT, CLIENT_PORT = 9092, 9093, 9094


@dataclass(frozen=True)
class ClusterOptions:
    brokers: int = 3
    dedicated_controllers: int = 0  # 0: every node is broker+controller (combined mode)
    use_namespaces: bool | None = None  # None: when root
    heap: str = "512m"
    extra_config: tuple[tuple[str, str], ...] = ()
    proxied_clients: bool = False  # clients reach each broker through a Toxiproxy proxy (link faults)
    # nodes reach each other's INTERNAL and CONTROLLER listeners through a Toxiproxy proxy in the
    # listener's namespace (faults on links between nodes: replication-*, controller-latency)
    proxied_links: bool = False
    tiered: bool = False  # remote storage on every broker (harness.backends.tiered), for KIP-1023 probes
    # extra JVM arguments for every broker (profilers, debug agents, harness.backends.seeded's bug agent);
    # "{node_dir}" in an argument becomes the node's directory
    broker_jvm_args: tuple[str, ...] = ()
    # format at this release's metadata.version ("3.9"), not the distribution's newest: a
    # cluster a rolling downgrade can leave (harness.upgrade); None: the distribution's newest
    release_version: str | None = None
    # feature levels set at format (StorageTool --feature, KIP-1022), e.g. (("eligible.leader.replicas.version", 0),)
    features: tuple[tuple[str, int], ...] = ()
    log_dirs: int = 1  # log directories per broker (JBOD; the log-dir-failure fault needs 2)
    fake_clocks: bool = False  # every node's JVM preloads libfaketime (clock faults: harness.backends.node.faketime_env)
    # KIP-853: controllers formatted with their first voters, found through controller.quorum.bootstrap.servers,
    # so voters can be removed and added at run time (harness.backends.quorum; Kafka 3.9+)
    dynamic_quorum: bool = False
    # the nodes' JIT compilers (harness.backends.node.JIT_FLAGS: "full" or "c1"); by default KIPCHECK_BROKER_JIT's
    jit: str = field(default_factory=default_jit)


def kafka_uuid() -> str:
    """A Kafka cluster id; like Kafka's own Uuid.randomUuid, never starting with '-' (read as an option)."""
    while True:
        u = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not u.startswith("-"):
            return u


class NativeCluster:
    """A `faults.cluster.Cluster` whose nodes (KafkaNode) this harness starts and stops."""

    def __init__(self, dist: KafkaDistribution, root: Path, options: ClusterOptions = ClusterOptions(),
                 owner_pid: int | None = None, cluster_id: str | None = None):
        self.dist = dist
        if options.tiered:  # kipcheck's remote storage manager on every node's classpath
            from kipcheck.harness.backends import tiered
            self.dist = tiered.with_storage_manager(dist)
        self.root = Path(root)
        check_jit(options.jit)  # a typo fails before anything starts
        self.options = options
        self.cluster_id = cluster_id or uuid.uuid4().hex[:8]
        self.owner_pid = owner_pid
        self.use_namespaces = network.namespaces_available() if options.use_namespaces is None else options.use_namespaces
        self.state: ClusterState | None = None
        self.nodes: list[KafkaNode] = []
        self.net: network.BridgeNetwork | None = None
        self.toxiproxy = None  # harness.backends.toxiproxy.Toxiproxy when options.proxied_clients
        self.link_servers: dict[int, object] = {}  # node id -> its own Toxiproxy, when options.proxied_links
        self.quorum = None  # harness.backends.quorum.DynamicQuorum, when options.dynamic_quorum

    # -- topology --------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return "namespaces" if self.use_namespaces else "loopback"

    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.spec.is_broker]

    @property
    def controllers(self) -> list[KafkaNode]:
        return [n for n in self.nodes if n.spec.is_controller]

    def node(self, node_id: int) -> KafkaNode:
        for n in self.nodes:
            if n.spec.node_id == node_id:
                return n
        raise HarnessError(f"no node {node_id} in this cluster")

    def bootstrap_servers(self) -> str:
        return ",".join(n.spec.client_endpoint for n in self.brokers)

    def link_proxy(self, node_id: int, listener: str = "client") -> LinkProxy | None:
        """The Toxiproxy proxy in front of a node's `listener` (faults.cluster.LISTENERS): the clients'
        proxies when options.proxied_clients, the node's own when options.proxied_links; else None."""
        from kipcheck.harness.backends.toxiproxy import LinkProxy, client_proxy_name, node_proxy_name
        spec = self.node(node_id).spec
        if listener == "client":
            server, name, has = self.toxiproxy, client_proxy_name(node_id), spec.is_broker
        else:
            server, name = self.link_servers.get(node_id), node_proxy_name(listener, node_id)
            has = spec.is_broker if listener == "replication" else spec.is_controller
        return LinkProxy(server, name) if server is not None and has else None

    def reset_link_proxies(self) -> None:
        for server in (self.toxiproxy, *self.link_servers.values()):
            if server is not None:
                server.reset()

    def _front_node_links(self, specs: list[NodeSpec], step) -> list[NodeSpec]:
        """With options.proxied_links, a Toxiproxy server in every node's namespace fronting its
        INTERNAL and CONTROLLER listeners (harness.backends.toxiproxy.front_node_listeners)."""
        if not self.options.proxied_links:
            return specs
        from kipcheck.harness.backends import toxiproxy
        step("starting toxiproxy beside every node")
        self.link_servers = dict(zip((s.node_id for s in specs), side_by_side(
            lambda s=s: toxiproxy.start_server(self.state, self.root, host=s.host) for s in specs)))
        return [toxiproxy.front_node_listeners(self.link_servers[s.node_id], s) for s in specs]

    def _dynamic_quorum(self, specs: list[NodeSpec]):
        """With options.dynamic_quorum, every controller's directory id (chosen here) and endpoint."""
        if not self.options.dynamic_quorum:
            return None
        from kipcheck.harness.backends import quorum, releases
        version = self.options.release_version or self.dist.version
        if not releases.has(version, "dynamic-quorum"):
            raise HarnessError(f"Kafka {version} has no dynamic controller quorum (KIP-853 ships from 3.9): "
                               "drop voter-removal")
        controllers = [s for s in specs if s.is_controller]
        found = quorum.DynamicQuorum({s.node_id: kafka_uuid() for s in controllers},
                                     {s.node_id: s.controller_endpoint for s in controllers})
        self.state.update(dynamic_quorum={"directory_ids": found.directory_ids, "endpoints": found.endpoints})
        return found

    # -- controller quorum (faults.cluster.Cluster's voter verbs; KIP-853) -----------------------
    def controller_voters(self) -> dict[int, str] | None:
        """The quorum's voters, id -> directory id, as its leader reports them; None without a dynamic quorum."""
        if self.quorum is None:
            return None
        from kipcheck.harness.backends import quorum
        return quorum.describe(self.dist, self.quorum.bootstrap).voters

    def remove_voter(self, node_id: int) -> None:
        from kipcheck.harness.backends import quorum
        quorum.remove_voter(self.dist, self._quorum().bootstrap, node_id, self._quorum().directory_ids[node_id])

    def add_voter(self, node_id: int) -> None:
        from kipcheck.harness.backends import quorum
        q = self._quorum()
        quorum.add_voter(self.dist, q.bootstrap, node_id, q.directory_ids[node_id], "CONTROLLER", q.endpoints[node_id])

    def unregister_broker(self, node_id: int) -> None:
        from kipcheck.harness.backends import quorum
        quorum.unregister_broker(self.dist, self.bootstrap_servers(), node_id)

    def _quorum(self):
        if self.quorum is None:
            raise HarnessError("voter changes need a cluster formatted with a dynamic quorum "
                               "(ClusterOptions(dynamic_quorum=True), KIP-853)")
        return self.quorum

    def distribution_for(self, node: KafkaNode, dist: KafkaDistribution) -> KafkaDistribution:
        """`dist` as `node` will run it (a rolling upgrade's target): here, as it is; on a remote
        host, its classpath copied there first (SshCluster)."""
        return dist

    def versions(self) -> dict[int, str]:
        """node id -> the Kafka version it runs (each node carries its own distribution)."""
        return {n.spec.node_id: n.dist.version for n in self.nodes}

    def racks(self) -> dict[int, str]:
        return {n.spec.node_id: n.spec.rack for n in self.brokers}

    def kraft_settings(self) -> dict:
        """The KRaft settings the KIP-1166 check needs (`harness.backends.node.kraft_settings`)."""
        first = self.controllers[0].server_properties() if self.controllers else {}
        return kraft_settings(first, [n.spec.node_id for n in self.controllers])

    def consumer_group_settings(self) -> dict:
        """The brokers' KIP-848 group timeouts the slow-rebalance bound needs (`node.consumer_group_settings`)."""
        return consumer_group_settings(self.brokers[0].server_properties() if self.brokers else {})

    def _plan(self) -> list[NodeSpec]:
        o = self.options
        roles = []
        if o.dedicated_controllers:
            roles += [("controller",)] * o.dedicated_controllers
            roles += [("broker",)] * o.brokers
        else:
            roles += [("broker", "controller")] * o.brokers
        extra = dict(o.extra_config)
        if o.tiered:
            from kipcheck.harness.backends import tiered
            extra = {**tiered.broker_config(self.root / "remote-storage", self.dist.version), **extra}
        specs = []
        for i, r in enumerate(roles, start=1):
            if self.use_namespaces:
                host = self.net.add_host(f"n{i}", 10 + i)
                ports = (BROKER_PORT, CONTROLLER_PORT, CLIENT_PORT)
            else:
                host = network.Host(f"n{i}", "127.0.0.1", None)
                ports = (free_port(), free_port(), free_port())
            broker_index = sum(1 for x in roles[:i] if "broker" in x)
            specs.append(NodeSpec(node_id=i, roles=r, rack=f"rack-{broker_index if 'broker' in r else 'c' + str(i)}",
                                  host=host, internal_port=ports[0], controller_port=ports[1], client_port=ports[2],
                                  extra_config=extra))
        return specs

    # -- lifecycle -------------------------------------------------------------------
    def up(self, timeout: float = 120.0, progress=None) -> None:
        """Create the network, format and start every node, and wait until ready."""
        step = progress or (lambda msg: None)
        reap_stale()
        self.root.mkdir(parents=True, exist_ok=True)
        for old in self.root.glob("node-*"):  # a reused directory must not leak an old cluster id
            shutil.rmtree(old, ignore_errors=True)
        subnet_index = None
        if self.use_namespaces:
            used = network.used_subnet_indices(all_states())
            subnet_index = next(i for i in range(16, 250) if i not in used)
        self.state = ClusterState.create(self.cluster_id, self.owner_pid, root=str(self.root), mode=self.mode,
                                         kafka_version=self.dist.version)
        if self.owner_pid is not None:
            self._start_reaper()
        if self.use_namespaces:
            step("creating network namespaces")
            self.net = network.BridgeNetwork(self.cluster_id, subnet_index, self.state)
            self.net.create_bridge()
        specs = self._plan()
        if self.net:
            self.net.check_paths([s.host for s in specs])
        self._launch(specs, timeout, step)

    def _launch(self, specs: list[NodeSpec], timeout: float, step) -> None:
        """From the planned nodes to a ready cluster, whatever runs them (this machine, remote hosts):
        client proxies, nodes, formatting, starts, readiness."""
        if self.options.proxied_clients:
            from kipcheck.harness.backends import toxiproxy
            step("starting toxiproxy")
            self.toxiproxy = toxiproxy.start_server(self.state, self.root)
            specs = [toxiproxy.front_client_listener(self.toxiproxy, s) if s.is_broker else s for s in specs]
        specs = self._front_node_links(specs, step)
        voters = quorum_voters(specs)
        uuid_ = kafka_uuid()
        self.nodes = [self._node(s, uuid_, voters) for s in specs]
        self.quorum = self._dynamic_quorum(specs)
        for n in self.nodes:
            n.release_version = self.options.release_version
            n.features = self.options.features
            n.dynamic_quorum = self.quorum
        self.state.update(cluster_uuid=uuid_, bootstrap=self.bootstrap_servers(),
                          specs=[_spec_json(s) for s in specs], jit=self.options.jit)
        step("formatting storage")
        side_by_side(n.format for n in self.nodes)
        step("starting nodes")
        for n in self.nodes:
            n.start_node()
        self._wait_ready(timeout, step)

    def _node(self, spec: NodeSpec, cluster_uuid: str, voters: str) -> KafkaNode:
        return KafkaNode(spec, self.root, self.dist, self.state, cluster_uuid, voters, self.options.heap,
                         self.options.broker_jvm_args if spec.is_broker else (), **self._node_disk_and_clock(spec),
                         jit=self.options.jit)

    def _node_disk_and_clock(self, spec: NodeSpec) -> dict:
        """JBOD log directories (brokers) and libfaketime, as the run's faults need them."""
        return {"log_dirs": self.options.log_dirs if spec.is_broker else 1, "fake_clock": self.options.fake_clocks}

    def _wait_ready(self, timeout: float, step) -> None:
        """Every node listening, every broker registered, a probe topic with a full ISR."""
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            n.wait_listening(max(1.0, deadline - time.monotonic()))
        step("waiting for brokers to register")
        from kipcheck.harness.clients.admin import Admin  # the admin client is only needed once nodes run
        with Admin(self.bootstrap_servers()) as admin:
            admin.wait_brokers(len(self.brokers), max(1.0, deadline - time.monotonic()))
            step("waiting for a full ISR")
            rf = min(3, len(self.brokers))
            admin.create_topic("__kipcheck_ready", partitions=1, replication_factor=rf)
            admin.wait_full_isr("__kipcheck_ready", max(1.0, deadline - time.monotonic()))

    def _start_reaper(self) -> None:
        """A detached watchdog that tears the cluster down if the owning harness dies."""
        proc = subprocess.Popen([sys.executable, "-m", "kipcheck.harness.backends.reaper", str(self.state.path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))
        self.state.set_entry("helpers", "reaper", {"pid": proc.pid, "start": process_start_time(proc.pid)})

    def down(self, grace: float = 0.0) -> None:
        """Stop every node (SIGTERM, SIGKILL after `grace`; by default SIGKILL at once), then delete the
        network and the state.

        All nodes stop at once: the data is thrown away, and a one-by-one controlled
        shutdown would hang on the last nodes once the quorum is gone. A SIGTERM to all of them
        hung the same way: every run's "stopping the cluster" waited out a 5 s grace (2026-11-29).
        Their logs lose nothing: log4j writes each line through."""
        if self.state is None:
            return
        side_by_side((lambda n=n: n.stop_node(clean_shutdown=True, timeout=grace)) for n in self.nodes)
        teardown(self.state)
        self.state = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.down()

    @classmethod
    def attach(cls, state: ClusterState, dist: KafkaDistribution) -> "NativeCluster":
        """Rebuild a handle on a running cluster (for `kipcheck cluster status|down`)."""
        c = cls(dist, Path(state.data["root"]), cluster_id=state.data["cluster_id"],
                owner_pid=state.data.get("owner_pid"))
        c.state = state
        c.use_namespaces = state.data["mode"] == "namespaces"
        if state.data.get("toxiproxy"):
            from kipcheck.harness.backends.toxiproxy import Toxiproxy
            c.toxiproxy = Toxiproxy(state.data["toxiproxy"]["api"])
        specs = [_spec_from_json(d) for d in state.data.get("specs", [])]
        if state.data.get("link_toxiproxies"):
            from kipcheck.harness.backends.toxiproxy import Toxiproxy
            servers = {name: Toxiproxy(rec["api"]) for name, rec in state.data["link_toxiproxies"].items()}
            c.link_servers = {s.node_id: servers[s.host.name] for s in specs if s.host.name in servers}
        voters = quorum_voters(specs)
        c.nodes = [KafkaNode(s, c.root, dist, state, state.data["cluster_uuid"], voters,
                             jit=state.data.get("jit", "full")) for s in specs]
        return c


def _spec_json(s: NodeSpec) -> dict:
    return {"node_id": s.node_id, "roles": list(s.roles), "rack": s.rack,
            "host": [s.host.name, s.host.address, s.host.netns], "remote": s.host.remote,
            "ports": [s.internal_port, s.controller_port, s.client_port], "advertised_client": s.advertised_client,
            "advertised_internal": s.advertised_internal, "advertised_controller": s.advertised_controller,
            "extra_config": s.extra_config}


def _spec_from_json(d: dict) -> NodeSpec:
    return NodeSpec(node_id=d["node_id"], roles=tuple(d["roles"]), rack=d["rack"], host=network.Host(*d["host"]),
                    internal_port=d["ports"][0], controller_port=d["ports"][1], client_port=d["ports"][2],
                    advertised_client=d.get("advertised_client"), advertised_internal=d.get("advertised_internal"),
                    advertised_controller=d.get("advertised_controller"), extra_config=d.get("extra_config", {}))

