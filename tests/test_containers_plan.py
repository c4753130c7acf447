"""The testcontainers backend's pure parts: which faults run or are skipped, and the image's tag.

The live test is tests/integration/test_testcontainers.py."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kipcheck.faults.registry import KINDS
from kipcheck.harness.backends import container_image
from kipcheck.harness.backends.containers_backend import BACKEND, DEFAULT_FAULTS, SUPPORTED_FAULTS
from kipcheck.harness.backends.kafka_dist import KafkaDistribution, find_java
from kipcheck.harness.clients.capabilities import fault_skips
from kipcheck.harness.run import RunOptions, _prepare


class _Notes:
    def __init__(self):
        self.lines = []

    def note(self, text):
        self.lines.append(text)


def _container_faults(options: RunOptions, ui):
    """The run's first step on the testcontainers backend: its options and the fault kinds it skips."""
    _, options, faults = _prepare(replace(options, backend=BACKEND.name), ui)
    assert options.faults == (None if faults.kinds is None else list(faults.kinds))
    assert {s.kind for s in faults.schedule} <= set(faults.kinds)  # the schedule has only kinds it runs
    return options, fault_skips(faults.refused)


def test_every_supported_fault_is_a_known_kind_and_partitions_are_not_supported():
    assert set(SUPPORTED_FAULTS) <= set(KINDS)
    assert not [k for k in SUPPORTED_FAULTS if k.startswith("partition")]


def test_partitions_are_skipped_by_name_and_the_rest_keep_their_order():
    ui = _Notes()
    opts, skips = _container_faults(RunOptions(faults=["partition", "kill", "partition-oneway", "latency"]), ui)
    assert opts.faults == ["kill", "latency"]
    assert [s.key for s in skips] == ["fault.partition", "fault.partition-oneway"]
    assert all("namespace" in s.reason for s in skips)
    assert ui.lines == []


def test_the_default_leader_isolation_becomes_kill_and_pause_and_says_so():
    ui = _Notes()
    opts, skips = _container_faults(RunOptions(faults=None), ui)
    assert opts.faults == list(DEFAULT_FAULTS) and skips == []
    assert len(ui.lines) == 1 and "kill,pause" in ui.lines[0]


def test_no_faults_stays_no_faults():
    opts, skips = _container_faults(RunOptions(faults=[]), _Notes())
    assert opts.faults == [] and skips == []


def _dist(tmp_path: Path, contents: dict[str, bytes]) -> KafkaDistribution:
    jars = []
    for name, data in contents.items():
        (tmp_path / name).write_bytes(data)
        jars.append(tmp_path / name)
    return KafkaDistribution("4.3.1", tuple(jars), find_java())


def test_image_tag_follows_the_jars_content_not_their_timestamps(tmp_path):
    a = _dist(tmp_path, {"kafka_2.13-4.3.1.jar": b"one", "kafka-clients-4.3.1.jar": b"two"})
    tag = container_image.image_tag(a)
    assert tag.startswith("kipcheck/kafka:4.3.1-")
    (tmp_path / "kafka-clients-4.3.1.jar").touch()
    assert container_image.image_tag(a) == tag
    (tmp_path / "kafka-clients-4.3.1.jar").write_bytes(b"two!")
    assert container_image.image_tag(a) != tag


def test_in_image_paths_are_the_image_lib_and_the_same_java(tmp_path):
    d = _dist(tmp_path, {"x.jar": b"x"})
    inside = container_image.in_image(d)
    assert inside.classpath == (Path(container_image.KAFKA_LIB, "x.jar"),)
    assert inside.java.endswith("/bin/java") and Path(inside.java).resolve() == Path(d.java).resolve()
