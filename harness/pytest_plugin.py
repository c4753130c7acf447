"""pytest plugin: ducktape-style services as fixtures for tests against live Kafka.

Fixtures
- `kafka_version`, `kafka_dist` (session): the Kafka to run (`--kafka-version`, `--kafka-home`,
  or one entry of `--kafka-matrix 4.2.1,4.3.1`, which runs every cluster test per version;
  `--kafka-matrix all-kraft` is the newest patch of every KRaft minor line, 3.3 ... 4.3,
  from harness.releases).
- `cluster` (session): one native KRaft cluster shared by the session's tests; a test
  that breaks it must heal it (the `nemesis` fixture does that for faults).
- `fresh_cluster` (function): a private cluster for tests that are destructive.
- `topic` (function): a new RF=3 topic with a full ISR on `cluster`.
- `history` (function): a History in the test's own directory.
- `nemesis` (function): injects FaultSpecs on `cluster`; heals everything afterwards.

Node logs of a failed test are attached to its report, and its history and logs
stay under pytest's base temp directory.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest


def pytest_addoption(parser):
    g = parser.getgroup("kipcheck")
    g.addoption("--kafka-version", default=os.environ.get("KIPCHECK_KAFKA_VERSION"),
                help="Kafka version for cluster tests (default: newest 4.x >= 4.3 that resolves)")
    g.addoption("--kafka-home", default=None, help="unpacked Kafka distribution for cluster tests")
    g.addoption("--kipcheck-brokers", type=int, default=3, help="brokers in the shared test cluster")
    g.addoption("--kafka-matrix", default=os.environ.get("KIPCHECK_KAFKA_MATRIX"),
                help="comma-separated Kafka versions: every cluster test runs once per version "
                     "(release qualification), e.g. 4.2.1,4.3.1; `all-kraft`: the newest patch of "
                     "every KRaft minor line 3.3 ... 4.3")


def pytest_generate_tests(metafunc):
    """Release qualification: parametrize every test that needs Kafka by the version matrix."""
    matrix = metafunc.config.getoption("--kafka-matrix")
    if matrix and "kafka_version" in metafunc.fixturenames:
        versions = matrix_versions(matrix)
        metafunc.parametrize("kafka_version", versions, indirect=True, scope="session",
                             ids=[f"kafka-{v}" for v in versions])


def matrix_versions(matrix: str) -> list[str]:
    """`--kafka-matrix` as versions: a comma-separated list, where `all-kraft` stands for
    the newest patch of every KRaft minor line (harness.releases.all_kraft)."""
    from harness.releases import all_kraft
    out = []
    for entry in (v.strip() for v in matrix.split(",")):
        for v in (all_kraft() if entry == "all-kraft" else [entry] if entry else []):
            if v not in out:
                out.append(v)
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: needs a live Kafka cluster (slow)")


@pytest.fixture(scope="session")
def kafka_version(request):
    """The Kafka version under test: one matrix entry, or `--kafka-version`, or the default."""
    return getattr(request, "param", None) or request.config.getoption("--kafka-version")


@pytest.fixture(scope="session")
def kafka_dist(kafka_version, pytestconfig):
    from harness.kafka_dist import resolve
    return resolve(kafka_version, pytestconfig.getoption("--kafka-home"))


def _start(dist, root: Path, brokers: int):
    from harness.cluster import ClusterOptions, NativeCluster
    # tiered storage on (harness.tiered): topics without remote.storage.enable are unaffected,
    # and KIP-1023 tests get tiered offsets on the shared cluster
    cluster = NativeCluster(dist, root, ClusterOptions(brokers=brokers, tiered=True), owner_pid=os.getpid())
    try:
        cluster.up()
    except BaseException:
        cluster.down()
        raise
    return cluster


@pytest.fixture(scope="session")
def cluster(kafka_dist, tmp_path_factory, pytestconfig):
    c = _start(kafka_dist, tmp_path_factory.mktemp("cluster"), pytestconfig.getoption("--kipcheck-brokers"))
    yield c
    c.down()


@pytest.fixture
def fresh_cluster(kafka_dist, tmp_path):
    c = _start(kafka_dist, tmp_path / "cluster", 3)
    yield c
    c.down()


@pytest.fixture
def topic(cluster):
    from harness.admin import Admin
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = Admin(cluster.bootstrap_servers())
    admin.create_topic(name, partitions=3, replication_factor=min(3, len(cluster.brokers)))
    admin.wait_full_isr(name, 60)
    return name


@pytest.fixture
def history(tmp_path):
    from harness.history import History
    h = History(tmp_path / "history.jsonl")
    yield h
    h.close()


class NemesisHandle:
    """Inject and heal single faults from a test, each recorded in the test's history."""

    def __init__(self, cluster, topic: str, history):
        from harness.run import RunContext
        self.ctx = RunContext(cluster, topic)
        self.history = history

    def inject(self, spec) -> dict:
        from faults.registry import kind
        op = self.history.invoke("nemesis", "fault", {"fault": spec.kind, **spec.params, "phase": "start"})
        injected = kind(spec.kind).inject(self.ctx, spec)
        op.ok(**injected)
        return injected

    def heal(self, spec, injected: dict) -> None:
        from faults.registry import kind
        op = self.history.invoke("nemesis", "fault", {"fault": spec.kind, **spec.params, "phase": "stop"})
        kind(spec.kind).heal(self.ctx, spec, injected)
        op.ok()

    def heal_all(self) -> None:
        from faults.nemesis import heal_all
        heal_all(self.ctx, self.history)


@pytest.fixture
def nemesis(cluster, topic, history):
    handle = NemesisHandle(cluster, topic, history)
    yield handle
    handle.heal_all()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    for name in ("cluster", "fresh_cluster"):
        c = item.funcargs.get(name) if hasattr(item, "funcargs") else None
        if c is None:
            continue
        for node in c.nodes:
            for log in node.logs():
                try:
                    tail = log.read_text(errors="replace").splitlines()[-40:]
                except OSError:
                    continue
                report.sections.append((f"{log.parent.name}/{log.name} (last 40 lines)", "\n".join(tail)))
