"""What a fault may touch: the typed `Cluster` and `Node` protocols both backends implement.

harness.backends.cluster.NativeCluster (with harness.backends.node.KafkaNode, whose host runs its commands
here or over SSH: harness.backends.ssh) and harness.backends.external.ExternalCluster satisfy these; faults see nothing else of the harness, so the import runs one way
(harness -> faults). A node is a ducktape-style service (start_node, stop_node, clean_node,
logs) plus the packet verbs partitions need; the cluster hands out client proxies for link
faults. A backend that cannot do a verb raises `faults.errors.FaultError` in one line
(the external backend has no nodes). tests/test_cluster_protocol.py holds both backends to it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable


@runtime_checkable
class NodeSpec(Protocol):
    """A node's identity (harness.backends.node.NodeSpec)."""

    @property
    def node_id(self) -> int: ...

    @property
    def is_broker(self) -> bool: ...

    @property
    def is_controller(self) -> bool: ...


@runtime_checkable
class NodeFiles(Protocol):
    """The file verbs of a node's own machine: this one, or a remote host over SSH (both runners,
    harness.backends.network.Runner, extend it; tests/test_ssh_hosts_file.py holds them to it).

    Disk, clock and log-directory faults touch a node's files only through these, never with
    this machine's file calls, so they act on a host kipcheck reaches over SSH as on a local
    node. Paths are the host's (`Node.data_dirs`, ...); only their pure parts (`/`, `.name`,
    `.stem`, `.with_suffix`) are used."""

    def read_text(self, path) -> str | None: ...  # None: no such file

    def read_bytes(self, path) -> bytes | None: ...  # None: no such file

    def write_text(self, path, text: str) -> None: ...  # whole or not at all

    def write_bytes(self, path, data: bytes) -> None: ...  # whole or not at all

    def exists(self, path) -> bool: ...

    def is_dir(self, path) -> bool: ...

    def list_dir(self, directory, dirs_only: bool = False) -> list[str]: ...  # names, sorted; [] for no such directory

    def file_sizes(self, directory, suffix: str) -> dict[str, int]: ...  # name -> size of the files ending in suffix

    def truncate(self, path, size: int) -> None: ...

    def rename(self, source, target) -> None: ...

    def remove(self, path) -> None: ...  # one file; one already gone is fine


@runtime_checkable
class Node(Protocol):
    """One Kafka node (harness.backends.node.KafkaNode): its process, its disk and its packet filter."""

    @property
    def spec(self) -> NodeSpec: ...

    @property
    def data_dir(self) -> Path: ...  # the log directory (partition replicas)

    @property
    def data_dirs(self) -> Sequence[Path]: ...  # every log directory (JBOD: more than one), data_dir first

    @property
    def metadata_dir(self) -> Path: ...  # the KRaft metadata log

    @property
    def files(self) -> NodeFiles: ...  # its machine's file verbs (every fault's way to its disk)

    @property
    def pid(self) -> int | None: ...  # None when not running

    def alive(self) -> bool: ...

    def paused(self) -> bool:
        """Stopped by `pause()` (SIGSTOP, or a container's freezer) and not yet resumed."""

    def format(self) -> None:
        """Format storage with the cluster's id (a wiped node rejoins the same cluster)."""

    def formatted(self) -> bool:
        """Its log directory and metadata log are formatted (false after a wipe)."""

    def start_node(self) -> None: ...

    def wait_listening(self, timeout: float) -> None: ...

    def stop_node(self, clean_shutdown: bool = True, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown), SIGKILL after `timeout` or at once when not clean."""

    def pause(self) -> None: ...  # SIGSTOP

    def resume(self) -> None: ...  # SIGCONT

    def clean_node(self, metadata: bool = False) -> None:
        """Wipe the stopped node's log directory (and its metadata log) and reformat it."""

    def logs(self) -> list[Path]: ...  # readable on this machine (copied from a remote host)

    def set_clock(self, offset: str | None) -> None:
        """Move the running JVM's wall clock by a libfaketime offset ("+60", "-300"); None: real again.
        An offset on a node started without libfaketime is a KipcheckError; None there does nothing."""

    def drop_packets_from(self, peer: Node) -> None:
        """Drop every packet arriving from `peer` (its inter-node traffic; clients are never cut)."""

    def allow_packets_from(self, peer: Node) -> None:
        """Undo one `drop_packets_from` (a rule already gone is fine)."""

    def allow_all_packets(self) -> None:
        """Remove every drop rule of this node (heal-all; a node without rules is fine)."""


#: The listeners a link fault can slow: clients' links to a broker, followers' fetches from a
#: leader (and every other inter-broker request), and KRaft traffic to a controller
LISTENERS = ("client", "replication", "controller")


@runtime_checkable
class LinkProxy(Protocol):
    """The Toxiproxy proxy in front of one node's listener (harness.backends.toxiproxy.LinkProxy):
    its client listener (clients' links) or its replication or controller listener (links between nodes)."""

    @property
    def name(self) -> str: ...

    def add_toxic(self, name: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> None: ...

    def remove_toxic(self, name: str) -> None:
        """Remove one toxic; one already gone is fine (heals are idempotent)."""


@runtime_checkable
class Cluster(Protocol):
    """A running cluster as faults and the run see it (the lifecycle, up and down, stays the harness's)."""

    @property
    def mode(self) -> str: ...  # "namespaces", "loopback" or "external"

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def brokers(self) -> Sequence[Node]: ...

    def node(self, node_id: int) -> Node:
        """The node with this id; FaultError when there is none or the backend cannot reach nodes."""

    def bootstrap_servers(self) -> str: ...

    def racks(self) -> dict[int, str]: ...

    def kraft_settings(self) -> dict: ...

    def link_proxy(self, node_id: int, listener: str = "client") -> LinkProxy | None:
        """The proxy in front of this node's `listener` (one of LISTENERS); None when that listener
        is reached directly (the cluster runs without such proxies, or the node has no such listener)."""

    def reset_link_proxies(self) -> None:
        """Remove every toxic from every proxy (nothing to do without proxies)."""

    def controller_voters(self) -> dict[int, str] | None:
        """KIP-853: the controller quorum's voters (node id -> directory id) as its leader reports
        them; None when the cluster has no dynamic quorum (its voters cannot change)."""

    def remove_voter(self, node_id: int) -> None:
        """RemoveRaftVoter: the controller leaves the voters (it runs on as an observer)."""

    def add_voter(self, node_id: int) -> None:
        """AddRaftVoter: the controller, an observer caught up with the leader, becomes a voter again."""

    def unregister_broker(self, node_id: int) -> None:
        """UnregisterBroker: a stopped broker is decommissioned (it registers anew when started again)."""


class Admin(Protocol):
    """The admin calls faults make (harness.clients.admin.Admin)."""

    client: object  # confluent_kafka.admin.AdminClient (elections)

    def partitions(self, topic: str) -> list: ...  # views with topic, partition, leader, replicas, isr

    def topic_id(self, topic: str) -> str: ...  # Kafka's Uuid.toString of the topic's id (share coordinators key on it)

    def wait_brokers(self, count: int, timeout: float) -> None: ...

    def wait_full_isr(self, topic: str, timeout: float) -> list: ...
