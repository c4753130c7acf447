"""Toxiproxy link faults on a cluster whose clients reach brokers through proxies, and whose
nodes reach each other's replication and controller listeners through proxies of their own.

Most effects are seen on one raw ApiVersions round trip through the leader's proxy
(precise: one request, one answer); latency and bandwidth also on real produce calls, the
links between nodes on acks=all sends (followers' fetches) and topic creation (KRaft commits).
"""
from __future__ import annotations

import socket
import statistics
import struct
import sys
import time

import pytest

from kipcheck.faults.base import FaultSpec
from tests.integration.faults_support import native_cluster, produce

pytestmark = pytest.mark.cluster

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 8) + b"kipcheck"


@pytest.fixture(scope="module")
def proxied(kafka_dist, tmp_path_factory):
    with native_cluster(kafka_dist, tmp_path_factory.mktemp("proxied"), proxied_clients=True,
                        proxied_links=True) as c:
        yield c


@pytest.fixture
def link(proxied, history):
    """A nemesis on the proxied cluster, plus a topic and its leader's proxy address."""
    from kipcheck.harness.clients.admin import Admin, wait_known_by_each
    from kipcheck.harness.pytest_plugin import NemesisHandle
    import uuid
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = Admin(proxied.bootstrap_servers())
    admin.create_topic(topic, partitions=1, replication_factor=3)
    leader = admin.wait_full_isr(topic, 60)[0].leader
    wait_known_by_each([n.spec.client_endpoint for n in proxied.brokers], topic, 60)
    handle = NemesisHandle(proxied, topic, history)
    handle.topic, handle.leader_address = topic, proxied.node(leader).spec.advertised_client
    yield handle
    handle.heal_all()
    for server in (proxied.toxiproxy, *proxied.link_servers.values()):
        assert all(not server.toxics(p) for p in server.proxies())


def roundtrip(address: str, timeout: float = 15.0) -> tuple[str, float, int]:
    """Send ApiVersions v0; return ("answer" | "eof" | "reset" | "timeout", seconds, recv calls)."""
    host, port = address.rsplit(":", 1)
    t0, chunks, data = time.monotonic(), 0, b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = s.recv(65536)
                if not chunk:
                    return "eof", time.monotonic() - t0, chunks
                chunks += 1
                data += chunk
        except ConnectionResetError:
            return "reset", time.monotonic() - t0, chunks
        except socket.timeout:
            return "timeout", time.monotonic() - t0, chunks
    return "answer", time.monotonic() - t0, chunks


def _spec(kind, link, **params):
    return FaultSpec(kind, 0, 0, {"topic": link.topic, "partition": 0, "target": "leader", **params})


def test_clients_go_through_the_proxies(proxied, link):
    assert all(n.spec.advertised_client.startswith("127.0.0.1:") for n in proxied.brokers)
    assert set(proxied.toxiproxy.proxies()) == {f"client-{n.spec.node_id}" for n in proxied.brokers}
    assert roundtrip(link.leader_address)[0] == "answer"


@pytest.mark.parametrize("kind, proxy", [("latency", "client"), ("replication-latency", "replication")])
def test_latency_raises_acks_all_produce_latency_until_healed(proxied, link, kind, proxy):
    """On the clients' link the produce request waits; on the leader's replication link the
    followers' fetch answers do, and acks=all waits for the followers' next fetch."""
    before = statistics.median(produce(proxied, link.topic, 10))
    spec = _spec(kind, link, latency=800, jitter=0)
    injected = link.inject(spec)
    during = statistics.median(produce(proxied, link.topic, 5))
    link.heal(spec, injected)
    after = statistics.median(produce(proxied, link.topic, 10))
    print(f"acks=all produce p50: before {before * 1000:.0f} ms, under 800 ms {kind} {during * 1000:.0f} ms, "
          f"after {after * 1000:.0f} ms")
    assert injected["proxies"] == [f"{proxy}-{injected['targets'][0]}"]
    assert during >= 0.7 and during > before + 0.5
    assert after < during - 0.5


def test_bandwidth_limits_a_large_send(proxied, link):
    spec = _spec("bandwidth", link, rate=16, stream="upstream")  # KB/s
    injected = link.inject(spec)
    took = produce(proxied, link.topic, 1, size=96 * 1024)[0]
    link.heal(spec, injected)
    assert took >= 3.0  # 96 KB at 16 KB/s is six seconds of upstream


def test_slow_close_delays_the_close(proxied, link):
    spec = _spec("slow-close", link, delay=2000)
    injected = link.inject(spec)
    host, port = link.leader_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as s:
        t0 = time.monotonic()
        s.sendall(struct.pack(">i", 0x7fffffff))  # a request larger than the broker accepts: it closes
        while s.recv(4096):
            pass
        closed_after = time.monotonic() - t0
    link.heal(spec, injected)
    assert closed_after >= 1.8


def test_timeout_swallows_the_answer_then_closes(proxied, link):
    spec = _spec("timeout", link, timeout=2000)
    injected = link.inject(spec)
    outcome, seconds, _ = roundtrip(link.leader_address)
    link.heal(spec, injected)
    assert outcome == "eof" and seconds >= 1.8
    assert roundtrip(link.leader_address)[0] == "answer"


@pytest.mark.parametrize("kind, params", [("reset-peer", {"timeout": 0}), ("limit-data", {"bytes": 100})])
def test_connection_cutting_toxics_cut_and_heal(proxied, link, kind, params):
    """reset-peer resets the connection; limit-data cuts it after its bytes."""
    spec = _spec(kind, link, **params)
    injected = link.inject(spec)
    outcome, _, _ = roundtrip(link.leader_address)
    link.heal(spec, injected)
    assert outcome in ("reset", "eof")
    assert roundtrip(link.leader_address)[0] == "answer"


def test_slicer_splits_the_answer_into_many_pieces(proxied, link):
    baseline = roundtrip(link.leader_address)[2]
    spec = _spec("slicer", link, average_size=16, size_variation=4, delay=2000)
    injected = link.inject(spec)
    outcome, _, chunks = roundtrip(link.leader_address)
    link.heal(spec, injected)
    assert outcome == "answer" and chunks >= 10 > baseline



# -- links between nodes: each node's own Toxiproxy, in its namespace -----------------------

def test_nodes_reach_each_other_through_proxies_in_the_listeners_namespace(proxied):
    voters = proxied.nodes[0].server_properties()["controller.quorum.voters"]
    for n in proxied.nodes:
        server = proxied.link_servers[n.spec.node_id]
        assert server.host == n.spec.host.address  # in the node's own namespace, on its own address
        names = set(server.proxies())
        assert names == {f"replication-{n.spec.node_id}", f"controller-{n.spec.node_id}"}
        props = n.server_properties()
        assert f"INTERNAL://{n.spec.advertised_internal}" in props["advertised.listeners"]
        assert n.spec.advertised_internal.split(":")[0] == n.spec.host.address
        assert n.spec.advertised_internal != f"{n.spec.host.address}:{n.spec.internal_port}"
        assert f"{n.spec.node_id}@{n.spec.advertised_controller}" in voters.split(",")


def _connects(from_node, address: str) -> bool:
    """Whether a TCP connection from `from_node`'s namespace to `address` opens within 2 s."""
    host, port = address.rsplit(":", 1)
    code = f"import socket; socket.create_connection(({host!r}, {port}), timeout=2).close()"
    return from_node.spec.host.run([sys.executable, "-c", code], timeout=30).returncode == 0


def test_a_partition_still_cuts_a_proxied_link_by_the_peers_address(proxied):
    """The proxy sees the peer's own address, so the victim's drop rule for one peer stops that
    peer's connections to its proxies and no other's (a proxy in the root namespace would not)."""
    victim, peer, other = proxied.nodes[:3]
    assert _connects(peer, victim.spec.advertised_internal)
    victim.drop_packets_from(peer)
    try:
        assert not _connects(peer, victim.spec.advertised_internal)
        assert not _connects(peer, victim.spec.advertised_controller)
        assert _connects(other, victim.spec.advertised_internal)
    finally:
        victim.allow_packets_from(peer)
    assert _connects(peer, victim.spec.advertised_internal)


def test_replication_reset_cuts_connections_to_the_leaders_replication_listener(proxied, link):
    spec = _spec("replication-reset", link, timeout=0)
    injected = link.inject(spec)
    address = proxied.node(injected["targets"][0]).spec.advertised_internal
    outcome = roundtrip(address)[0]
    link.heal(spec, injected)
    assert outcome in ("reset", "eof")
    assert roundtrip(address)[0] == "answer"
    assert roundtrip(link.leader_address)[0] == "answer"  # the clients' link was never touched


def test_controller_latency_slows_every_metadata_commit(proxied, link):
    """A topic's creation commits once a majority of controllers fetched it: latency on every
    controller's listener delays the fetches that carry it."""
    from kipcheck.harness.clients.admin import Admin
    import uuid

    def create() -> float:
        t0 = time.monotonic()
        Admin(proxied.bootstrap_servers()).create_topic(f"c-{uuid.uuid4().hex[:8]}", 1, 3)
        return time.monotonic() - t0
    before = statistics.median(create() for _ in range(3))
    spec = _spec("controller-latency", link, target="all", latency=1000, jitter=0)
    injected = link.inject(spec)
    during = statistics.median(create() for _ in range(3))
    link.heal(spec, injected)
    print(f"topic creation p50: before {before * 1000:.0f} ms, under 1000 ms controller latency {during * 1000:.0f} ms")
    assert sorted(injected["targets"]) == sorted(n.spec.node_id for n in proxied.nodes if n.spec.is_controller)
    assert during > before + 0.8
