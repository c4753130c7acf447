"""The `testcontainers` backend: the same KRaft cluster, each node a Docker container.

For users with Docker rather than root: testcontainers-python starts one container per
node on a Docker network of its own, from a Kafka image built locally
(harness.backends.container_image; no registry is needed). Each node is a `KafkaNode` with the same
properties and paths as a native one: its directory is bind-mounted at the same path, so
its configuration, data and logs are on the host and stay in the run directory.

Nodes have fixed addresses in 198.19.201-254.0/24 (never a private range; Docker's own
default pools are) and clients connect to them directly, as on the native bridge: this
needs the Docker host's network (Linux; Docker Desktop's VM does not route to its
containers). Node faults go through the Docker API: kill (SIGKILL), restart (SIGTERM,
a controlled shutdown), pause (the cgroup freezer), and disk faults on the bind mount;
link faults put Toxiproxy (on the harness's side) in front of each broker's client listener,
as on the native backend; Admin-API elections work on any cluster. Packet-level partitions
are not offered: harness.backends.containers_backend says which run, the run reports the rest as skipped.

The cluster has a state file like a native one (harness.backends.state) with its Docker host, so
its watchdog, `kipcheck cluster down --id` and the next run's stale sweep remove the
containers of a harness that was SIGKILLed (harness.backends.docker_cleanup), with the Toxiproxy server.
"""
from __future__ import annotations

import dataclasses
import os
import shlex
from pathlib import Path

from kipcheck.harness.backends.cluster import (BROKER_PORT, CLIENT_PORT, CONTROLLER_PORT, ClusterOptions, NativeCluster,
                                               kafka_uuid)
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import KafkaDistribution
from kipcheck.harness.backends.network import Host
from kipcheck.harness.backends.node import KafkaNode, quorum_voters
from kipcheck.harness.backends.docker_cleanup import LABEL, docker_client, owner_label, reap_stale_containers
from kipcheck.harness.backends.state import ClusterState
from kipcheck.harness.backends.sweep import reap_stale, teardown

SUBNETS = range(201, 255)  # 198.19.<i>.0/24; 198.19.200/24 is the Docker bridge of kipcheck's tests


class ContainerNode(KafkaNode):
    """A KafkaNode whose JVM runs in a container; its lifecycle goes through the Docker API."""

    def __init__(self, *args, image: str, network, labels: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.image, self.network, self.labels = image, network, labels
        self.container = None  # testcontainers DockerContainer, once created

    def format(self) -> None:
        """Nothing here: the container formats its storage at every start (`--ignore-formatted`),
        so a directory a disk fault wiped is formatted again with the cluster's id."""

    def _command(self) -> list[str]:
        config = self.dir / "server.properties"
        fmt = self.format_command(config)
        run = self.dist.java_command("kafka.Kafka", str(config), jvm_opts=self._jvm_opts())
        out = shlex.quote(str(self.dir / "stdout.log"))
        return ["/bin/sh", "-c", f"{shlex.join(fmt)} >>{out} 2>&1 && exec {shlex.join(run)} >>{out} 2>&1"]

    def _create(self):
        from docker.types import EndpointConfig
        from testcontainers.core.container import DockerContainer
        self.write_config()
        name = f"kipcheck-{self.labels[LABEL]}-n{self.spec.node_id}"
        endpoint = EndpointConfig("1.41", ipv4_address=self.spec.host.address, aliases=[self.spec.host.name])
        container = DockerContainer(self.image).with_volume_mapping(str(self.dir), str(self.dir), "rw")
        shared = self.spec.extra_config.get("rsm.config.dir")  # tiered storage: one directory every node shares
        if shared:
            Path(shared).mkdir(parents=True, exist_ok=True)
            container = container.with_volume_mapping(shared, shared, "rw")
        return (container
                .with_name(name).with_network(self.network).with_command(self._command())
                .with_kwargs(networking_config={self.network.name: endpoint}, labels=self.labels,
                             hostname=self.spec.host.name, user=f"{os.getuid()}:{os.getgid()}",
                             stop_signal="SIGTERM"))

    @property
    def _docker(self):
        return self.container.get_wrapped_container() if self.container else None

    def _status(self) -> str:
        c = self._docker
        if c is None:
            return "absent"
        try:
            c.reload()
        except Exception:  # removed behind our back
            return "absent"
        return c.status

    def start_node(self) -> None:
        if self.alive():
            return
        if self.container is None:
            self.container = self._create().start()  # testcontainers: create + start
        else:
            self.write_config()
            self._docker.start()

    @property
    def pid(self) -> int | None:
        """The JVM's pid as the host sees it (the container's init: `exec java`)."""
        if not self.alive():
            return None
        return self._docker.attrs["State"]["Pid"] or None

    def alive(self) -> bool:
        return self._status() in ("running", "paused")

    def paused(self) -> bool:
        return self._status() == "paused"

    def stop_node(self, clean_shutdown: bool = True, timeout: float = 30.0) -> None:
        """`docker stop` (SIGTERM, SIGKILL after `timeout`) or `docker kill` (SIGKILL)."""
        c = self._docker
        if c is None or not self.alive():
            return
        if self.paused():
            c.unpause()
        if clean_shutdown:
            c.stop(timeout=int(max(1, timeout)))
        else:
            c.kill()
        c.wait(timeout=max(30, int(timeout) + 10))

    def pause(self) -> None:
        if not self.alive():
            raise HarnessError(f"node {self.spec.node_id} is not running")
        self._docker.pause()

    def resume(self) -> None:
        if self.paused():
            self._docker.unpause()


class ContainerCluster(NativeCluster):
    """A NativeCluster's topology (nodes, racks, properties, readiness) on Docker containers."""

    def __init__(self, dist: KafkaDistribution, root: Path, options: ClusterOptions = ClusterOptions(),
                 owner_pid: int | None = None):
        super().__init__(dist, root, dataclasses.replace(options, use_namespaces=False), owner_pid)
        self.client = None
        self.network = None
        self.image: str | None = None

    @property
    def mode(self) -> str:
        return "testcontainers"

    def up(self, timeout: float = 180.0, progress=None) -> None:
        from testcontainers.core.config import testcontainers_config
        from kipcheck.harness.backends import container_image
        step = progress or (lambda msg: None)
        testcontainers_config.ryuk_disabled = True  # Ryuk is pulled from a registry; our state file does its job
        self.client = docker_client()
        reap_stale()  # native and container clusters whose harness died
        reap_stale_containers(self.client)  # containers whose state file is gone too
        self.image = container_image.ensure_image(self.client, self.dist, step)
        self.root.mkdir(parents=True, exist_ok=True)
        self.state = ClusterState.create(self.cluster_id, self.owner_pid, root=str(self.root), mode=self.mode,
                                         kafka_version=self.dist.version, docker_host=os.environ.get("DOCKER_HOST"))
        if self.owner_pid is not None:
            self._start_reaper()
        labels = {LABEL: self.cluster_id, f"{LABEL}.owner": owner_label(self.owner_pid)}
        subnet = _free_subnet(self.client)
        step(f"creating Docker network {subnet}.0/24")
        self.network = _network(subnet, labels)
        _require_local_bridge(subnet)
        specs = [dataclasses.replace(s, host=Host(s.host.name, f"{subnet}.{10 + s.node_id}", None),
                                     internal_port=BROKER_PORT, controller_port=CONTROLLER_PORT, client_port=CLIENT_PORT)
                 for s in self._plan()]
        if self.options.proxied_clients:
            from kipcheck.harness.backends import toxiproxy
            step("starting toxiproxy")
            self.toxiproxy = toxiproxy.start_server(self.state, self.root)
            specs = [toxiproxy.front_client_listener(self.toxiproxy, s) if s.is_broker else s for s in specs]
        voters = quorum_voters(specs)
        image_dist = container_image.in_image(self.dist)
        uuid_ = kafka_uuid()
        self.nodes = [ContainerNode(s, self.root, image_dist, None, uuid_, voters, self.options.heap,
                                    self.options.broker_jvm_args if s.is_broker else (),
                                    image=self.image, network=self.network, labels=labels, jit=self.options.jit)
                      for s in specs]
        step(f"starting {len(self.nodes)} containers from {self.image}")
        for n in self.nodes:
            n.start_node()
        self._wait_ready(timeout, step)

    def down(self, grace: float = 5.0) -> None:
        """Remove every container (docker rm -f), the network and the helpers; the node directories stay."""
        if self.state is None:
            return
        for n in self.nodes:
            n.container = None  # teardown removes them by label, with whatever a half-done up left
        teardown(self.state)  # -> remove_cluster, then the Toxiproxy server and the reaper
        self.state = None


def _require_local_bridge(subnet: str) -> None:
    """Clients connect to the containers' addresses directly, so Docker's bridge for the
    network (its gateway, `<subnet>.1`) must be an address of this host; else every
    connection would fail only after the readiness timeout, as "cluster not ready"."""
    import socket
    with socket.socket() as s:
        try:
            s.bind((f"{subnet}.1", 0))
        except OSError:
            raise HarnessError(
                f"Docker's network {subnet}.0/24 is not on this host's network (is Docker in a VM, on another "
                f"machine or in another network namespace?): the testcontainers backend connects to the "
                f"containers directly (docs/containers.md)") from None


def _free_subnet(client) -> str:
    used = {cfg.get("Subnet") for net in client.networks.list() for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []}
    for i in SUBNETS:
        if f"198.19.{i}.0/24" not in used:
            return f"198.19.{i}"
    raise HarnessError("no free 198.19.x.0/24 subnet for a Docker network: remove old kipcheck networks")


def _network(subnet: str, labels: dict):
    from docker.types import IPAMConfig, IPAMPool
    from testcontainers.core.network import Network
    ipam = IPAMConfig(pool_configs=[IPAMPool(subnet=f"{subnet}.0/24", gateway=f"{subnet}.1")])
    return Network(docker_network_kw={"ipam": ipam, "labels": labels}).create()
