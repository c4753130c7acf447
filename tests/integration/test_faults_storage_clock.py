"""Bit flips, clock skew and strobe, and a failed log directory on one live cluster (JBOD, libfaketime).

Each test runs the workload (producers, consumers reading from a follower, probes) while the
fault is injected and healed, checks the history VALID, and checks the fault left nothing
behind. The cluster is this module's own: two log directories per broker and every JVM
preloading libfaketime, as `kipcheck run` starts one whose schedule has these kinds."""
from __future__ import annotations

import re
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kipcheck.faults.base import FaultSpec
from kipcheck.faults.disk import recovered_segments
from kipcheck.harness.clients.admin import Admin, quiet_logger
from tests.integration.faults_support import (full_isr, history_records, native_cluster, new_topic, wait_for,
                                               wait_partition)

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster(kafka_dist, tmp_path_factory):
    with native_cluster(kafka_dist, tmp_path_factory.mktemp("jbod-faketime"), brokers=3, log_dirs=2,
                        fake_clocks=True) as c:
        yield c


@pytest.fixture
def topic(cluster):
    """The workload topic, rolling a segment every 2 s: bit flips have closed segments to hit."""
    return new_topic(cluster, "t", 3, {"segment.ms": "2000"})


#: the workload's sends per second (WorkloadOptions.rate, 2500 by default). What these tests prove is
#: each fault's effect and heal under a live workload and a VALID history, not a throughput: at the
#: default a failed log directory's heal (a broker stopped and started) left a 77 MB history whose
#: check alone took 66 s (issue 32); at 500/s every segment still rolls with records in it and
#: thousands of acknowledged sends cross each fault
RATE = 500.0


def _fault_records(history, kind: str) -> list[dict]:
    return [r for r in history_records(history) if r["f"] == "fault" and r["value"]["fault"] == kind]


def _log_since(node, mark: int) -> str:
    return (node.dir / "server.log").read_text(errors="replace")[mark:]


def _log_mark(node) -> int:
    return len((node.dir / "server.log").read_text(errors="replace"))


# -- bit flips ------------------------------------------------------------------------------

# the closed-segment, index and strobe forms are `long` (the default suite keeps one of each kind)
@pytest.mark.parametrize("segment", ["active", pytest.param("closed", marks=pytest.mark.long)])
def test_bitflip_in_a_follower_segment_is_detected_and_refetched(cluster, topic, workload, nemesis, history, segment):
    p0 = Admin(cluster.bootstrap_servers()).wait_full_isr(topic, 60)[0]
    follower = next(r for r in p0.replicas if r != p0.leader)  # the consumers' rack reads from this one
    node = cluster.node(follower)
    workload.start(rate=RATE).wait(6)
    # segments roll every 2 s: wait until recovery will re-read a closed one (the checkpoint lags)
    wait_for(lambda: len(recovered_segments(node, topic, 0)[0]) >= 2, 30, "two segments above the recovery point")
    mark = _log_mark(node)
    spec = FaultSpec("bitflip", 0, 0, {"topic": topic, "partition": 0, "target": follower, "segment": segment,
                                       "file": "log", "flips": 8, "seed": 7})
    injected = nemesis.inject(spec)
    assert injected["segment_role"] == segment and len(injected["positions"]) == 8
    workload.wait(3)
    nemesis.heal(spec, injected)
    wait_for(lambda: full_isr(cluster, topic), 120, f"node {follower} back in the ISR")
    # Kafka's log recovery found the flipped batch by its CRC and truncated the log there
    assert "Found invalid messages in log segment" in _log_since(node, mark), "recovery did not report the flip"
    workload.wait(8)  # consumers read from the recovered follower again
    verdict = workload.verify()
    assert verdict["valid"] is True
    assert workload.progress()["read"] > 0


@pytest.mark.long
def test_bitflip_in_an_offset_index_is_rebuilt(cluster, topic, workload, nemesis):
    p0 = Admin(cluster.bootstrap_servers()).wait_full_isr(topic, 60)[0]
    follower = next(r for r in p0.replicas if r != p0.leader)
    workload.start(rate=RATE).wait(6)
    spec = FaultSpec("bitflip", 0, 0, {"topic": topic, "partition": 0, "target": follower, "file": "index",
                                       "flips": 64, "seed": 3})
    injected = nemesis.inject(spec)
    assert injected["damaged"].endswith(".index")
    nemesis.heal(spec, injected)
    wait_for(lambda: full_isr(cluster, topic), 120, f"node {follower} back in the ISR")
    workload.wait(6)
    assert workload.verify()["valid"] is True


# -- clocks ---------------------------------------------------------------------------------

def _append_time_offset(cluster, topic: str) -> float:
    """Seconds between the LogAppendTime the partition leader stamped on a new record and our clock
    while the send was outstanding (0 when it falls inside)."""
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all", "logger": quiet_logger()})
    got = []
    sent = time.time()
    p.produce(topic, b"clock", partition=0, on_delivery=lambda err, msg: got.append((err, msg.offset())))
    p.flush(60)
    acked = time.time()
    assert got and got[0][0] is None, got
    offset = got[0][1]
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": f"clock-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "logger": quiet_logger()})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(1)
            if m is not None and not m.error() and m.offset() == offset:
                stamp = m.timestamp()[1] / 1000
                return stamp - sent if stamp < sent else stamp - acked if stamp > acked else 0.0
        raise AssertionError(f"record {offset} of {topic}-0 not read back")
    finally:
        c.close()


@pytest.fixture
def stamped(cluster):
    """A topic whose records carry the leader's LogAppendTime: its leader's clock, read from outside."""
    return new_topic(cluster, "clock", 1, {"message.timestamp.type": "LogAppendTime"})


def test_clock_skew_moves_only_that_jvms_wall_clock(cluster, topic, stamped, workload, nemesis, history):
    workload.start(rate=RATE).wait(5)
    before = _append_time_offset(cluster, stamped)
    assert abs(before) < 5
    spec = FaultSpec("clock-skew", 0, 0, {"topic": stamped, "partition": 0, "target": "leader", "offset": 120})
    injected = nemesis.inject(spec)
    node = cluster.node(injected["targets"][0])
    assert node.clock_file.read_text().strip() == "+120" and injected["skew_s"] == 120
    time.sleep(2)  # libfaketime re-reads its file once a second
    skewed = _append_time_offset(cluster, stamped)
    assert 110 < skewed < 130, skewed
    workload.wait(6)
    nemesis.heal(spec, injected)
    assert not node.clock_file.exists()
    time.sleep(2)
    assert abs(_append_time_offset(cluster, stamped)) < 5
    start = next(r for r in _fault_records(history, "clock-skew") if r["type"] == "ok")
    assert start["value"]["skew_s"] == 120 and start["value"]["targets"] == [node.spec.node_id]
    assert workload.verify()["valid"] is True


@pytest.mark.long
def test_clock_strobe_jumps_back_and_forth(cluster, topic, stamped, workload, nemesis):
    workload.start(rate=RATE).wait(5)
    spec = FaultSpec("clock-strobe", 0, 0, {"topic": stamped, "partition": 0, "target": "leader", "offset": -300,
                                            "period": 2})
    injected = nemesis.inject(spec)
    seen = set()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(seen) < 2:
        off = _append_time_offset(cluster, stamped)
        seen.add("skewed" if off < -250 else "real" if abs(off) < 5 else f"other {off:.0f}")
        time.sleep(0.7)
    nemesis.heal(spec, injected)
    assert seen == {"skewed", "real"}, seen
    assert not cluster.node(injected["targets"][0]).clock_file.exists()
    workload.wait(4)
    assert workload.verify()["valid"] is True


# -- a failed log directory -------------------------------------------------------------------

def test_failed_log_dir_moves_leadership_and_loses_nothing(cluster, topic, workload, nemesis):
    workload.start(rate=RATE).wait(6)
    mark = _log_mark(cluster.node(Admin(cluster.bootstrap_servers()).leader(topic, 0)))
    spec = FaultSpec("log-dir-failure", 0, 0, {"topic": topic, "partition": 0, "target": "leader"})
    injected = nemesis.inject(spec)
    victim = injected["targets"][0]
    node = cluster.node(victim)
    moved = [int(p.rsplit("-", 1)[1]) for p in injected["partitions_in_dir"] if p.rsplit("-", 1)[0] == topic]
    assert 0 in moved
    # Kafka noticed, kept running on its other directory, and gave up leadership of the failed one's partitions
    wait_partition(cluster, topic, lambda p: p.leader not in (-1, victim) and victim not in p.isr, 60,
                   f"partition 0 led by another broker, {victim} out of its ISR")
    assert node.alive()
    assert re.search(r"log directory has failed|Stopping serving logs in dir", _log_since(node, mark)), \
        "server.log does not say the directory failed"
    workload.wait(4)
    nemesis.heal(spec, injected)
    wait_for(lambda: full_isr(cluster, topic), 120, f"node {victim} back in the ISR")
    assert all(d.is_dir() for d in node.data_dirs)
    assert not list(node.dir.glob("*.failed"))
    assert workload.verify()["valid"] is True


def test_nothing_is_left_behind(cluster):
    """After the faults above: no clock file, no moved-aside directory, every log directory in place."""
    for node in cluster.nodes:
        assert not node.clock_file.exists()
        assert not list(node.dir.glob("*.failed")) and not list(node.dir.glob("faketime*"))
        assert all(d.is_dir() and (d / "meta.properties").exists() for d in node.data_dirs)
