"""The `external` backend: an existing cluster given by bootstrap servers.

kipcheck starts and stops nothing here, so only faults that need no node access can
run (Admin-API leader elections); node and link faults say so in one line. It is a
`faults.cluster.Cluster` with no nodes and no client proxies.
"""
from __future__ import annotations

from confluent_kafka import KafkaException

from kipcheck.faults.errors import FaultError
from kipcheck.harness.clients.admin import Admin
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.node import kraft_settings


class ExternalCluster:
    mode = "external"
    state = None  # nothing of ours to tear down
    dist = None  # no distribution of ours: its release is what --kafka-version says (harness.session.version_of)
    nodes: list = []
    brokers: list = []

    def __init__(self, bootstrap: str, timeout: float = 15.0):
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._racks: dict[int, str] = {}

    def up(self, progress=None) -> None:
        """Check that the cluster answers; learn its brokers' racks."""
        admin = Admin(self.bootstrap, timeout=self.timeout)  # kept referenced while the future runs
        try:
            desc = admin.client.describe_cluster(request_timeout=self.timeout).result(timeout=self.timeout + 5)
        except (KafkaException, Exception) as e:
            msg = e.args[0].str() if isinstance(e, KafkaException) and e.args else str(e) or type(e).__name__
            raise HarnessError(f"cannot reach the Kafka cluster at {self.bootstrap}: {msg}") from None
        self._racks = {n.id: n.rack for n in desc.nodes}

    def down(self) -> None:
        pass

    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def racks(self) -> dict[int, str]:
        return dict(self._racks)

    def kraft_settings(self) -> dict:
        """Kafka's defaults; the controllers are unknown, so any fault voids a KIP-1166 probe."""
        return kraft_settings({}, None)

    def consumer_group_settings(self) -> dict:
        """Unknown (the brokers' settings are not ours to read): the checker takes Kafka's defaults."""
        return {}

    def node(self, node_id: int):
        raise FaultError("this fault needs node access: use the native backend (the external one only elects leaders)")

    def link_proxy(self, node_id: int, listener: str = "client") -> None:
        """Clients and nodes connect to the brokers directly: no proxy to put toxics on."""
        return None

    def reset_link_proxies(self) -> None:
        pass

    def controller_voters(self) -> None:
        """The external cluster's quorum is not kipcheck's to change."""
        return None

    def remove_voter(self, node_id: int) -> None:
        raise FaultError("voter changes need a cluster kipcheck formatted with a dynamic quorum (native or ssh backend)")

    def add_voter(self, node_id: int) -> None:
        self.remove_voter(node_id)

    def unregister_broker(self, node_id: int) -> None:
        raise FaultError("decommissioning a broker needs a cluster kipcheck runs (its nodes are not ours to stop)")
