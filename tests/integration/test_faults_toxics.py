"""Toxiproxy link faults on a cluster whose clients reach brokers through proxies.

Most effects are seen on one raw ApiVersions round trip through the leader's proxy
(precise: one request, one answer); latency and bandwidth also on real produce calls.
"""
from __future__ import annotations

import socket
import statistics
import struct
import time

import pytest

from kipcheck.faults.base import FaultSpec
from tests.integration.faults_support import native_cluster, produce

pytestmark = pytest.mark.cluster

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 8) + b"kipcheck"


@pytest.fixture(scope="module")
def proxied(kafka_dist, tmp_path_factory):
    with native_cluster(kafka_dist, tmp_path_factory.mktemp("proxied"), proxied_clients=True) as c:
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
    assert all(not proxied.toxiproxy.toxics(p) for p in proxied.toxiproxy.proxies())


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


def test_latency_raises_produce_latency_until_healed(proxied, link):
    before = statistics.median(produce(proxied, link.topic, 10))
    spec = _spec("latency", link, latency=800, jitter=50)
    injected = link.inject(spec)
    during = statistics.median(produce(proxied, link.topic, 5))
    link.heal(spec, injected)
    after = statistics.median(produce(proxied, link.topic, 10))
    print(f"produce p50: before {before * 1000:.0f} ms, under 800 ms latency {during * 1000:.0f} ms, "
          f"after {after * 1000:.0f} ms")
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

