"""pytest plugin: ducktape-style services as fixtures for tests against live Kafka.

Fixtures
- `kafka_version`, `kafka_dist` (session): the Kafka to run (`--kafka-version`, `--kafka-home`,
  or one entry of `--kafka-matrix 4.2.1,4.3.1`, which runs every cluster test per version;
  `--kafka-matrix all-kraft` is the newest patch of every KRaft minor line, 3.3 ... 4.3,
  from kipcheck.harness.backends.releases).
- `cluster` (session): one native KRaft cluster shared by the session's tests; a test
  that breaks it must heal it (the `nemesis` fixture does that for faults). It is stopped as
  soon as the next test does not use it, and started again for a later one that does: order
  the tests that share it together (an idle cluster of three costs a sixth of a core).
- `fresh_cluster` (function): a private cluster for tests that are destructive.
- With `--kipcheck-hosts CLUSTER_JSON` both run on the remote hosts of a ducktape cluster file
  (harness.backends.ssh_cluster) instead of this machine, one cluster at a time.
- `topic` (function): a new RF=3 topic with a full ISR on `cluster`.
- `history` (function): a History in the test's own directory.
- `nemesis` (function): injects FaultSpecs on `cluster`; heals everything afterwards.
- `workload` (function): the run's producers, consumers, prober and observer (and a fault
  plan's nemesis) on `topic` as one service: `start(**options)`, `wait(s)`, `stop()`, and
  `verify()`, which heals, reads every partition to its end, checks the history and fails
  the test with each anomaly and its proof records.
- `kipcheck_check` (function): `kipcheck_check(history)` checks any history a test recorded
  and fails the test the same way.
- `kipcheck_seed` (session): `--kipcheck-seed`, the seed of the workload's random draws.

With allure-pytest recording (`--alluredir DIR`), each test's verdict goes to its Allure
test (reports.allure.report_to_current_test) and cluster tests carry the Kafka version as
a parameter. Node logs of a failed test are attached to its report, and its history and
logs stay under pytest's base temp directory. See docs/pytest.md.
"""
from __future__ import annotations

import os
import time
import uuid
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from kipcheck.rundir.records import JSONL_NAME


def pytest_addoption(parser):
    g = parser.getgroup("kipcheck")
    g.addoption("--kafka-version", default=os.environ.get("KIPCHECK_KAFKA_VERSION"),
                help="Kafka version for cluster tests, or `latest` (default: the pinned "
                     "harness.backends.releases.DEFAULT_VERSION)")
    g.addoption("--kafka-home", default=None, help="unpacked Kafka distribution for cluster tests")
    g.addoption("--kipcheck-brokers", type=int, default=3, help="brokers in the shared test cluster")
    g.addoption("--kipcheck-hosts", default=os.environ.get("KIPCHECK_HOSTS"), metavar="CLUSTER_JSON",
                help="run the cluster fixtures on the remote hosts of this ducktape cluster file "
                     "(the ssh backend, docs/backends.md) instead of natively")
    g.addoption("--kafka-matrix", default=os.environ.get("KIPCHECK_KAFKA_MATRIX"),
                help="comma-separated Kafka versions: every cluster test runs once per version "
                     "(release qualification), e.g. 4.2.1,4.3.1; `all-kraft`: the newest patch of "
                     "every KRaft minor line 3.3 ... 4.4; `latest`: the newest on Maven Central")
    g.addoption("--kipcheck-seed", type=int, default=int(os.environ.get("KIPCHECK_SEED", "0")),
                help="seed of the workload fixture's random draws (the prober's choices)")


def pytest_generate_tests(metafunc):
    """Release qualification: parametrize every test that needs Kafka by the version matrix."""
    matrix = metafunc.config.getoption("--kafka-matrix")
    if matrix and "kafka_version" in metafunc.fixturenames:
        versions = matrix_versions(matrix)
        metafunc.parametrize("kafka_version", versions, indirect=True, scope="session",
                             ids=[f"kafka-{v}" for v in versions])


# Deprecations inside dependencies, not the user's business: kafka-python loads its protocol
# schemas (harness.clients.wire) through importlib.resources' legacy API, 109 warnings at import; the
# second line is the same calls as seen from inside importlib. A user's own calls still warn.
THIRD_PARTY_WARNINGS = (
    r"ignore::DeprecationWarning:kafka\..*",
    r"ignore:open_text is deprecated:DeprecationWarning:importlib\.resources\._legacy",
)


def matrix_versions(matrix: str) -> list[str]:
    """`--kafka-matrix` as versions: a comma-separated list, where `all-kraft` stands for
    the newest patch of every KRaft minor line (harness.backends.releases.all_kraft) and
    `latest` for the newest release Maven Central serves (asked once, here)."""
    from kipcheck.harness.backends.kafka_dist import LATEST, version_of
    from kipcheck.harness.backends.releases import all_kraft
    out = []
    for entry in (v.strip() for v in matrix.split(",")):
        for v in (all_kraft() if entry == "all-kraft" else [version_of(LATEST)] if entry == LATEST
                  else [entry] if entry else []):
            if v not in out:
                out.append(v)
    return out


def pytest_configure(config):
    config.addinivalue_line("markers", "cluster: needs a live Kafka cluster (slow)")
    for line in THIRD_PARTY_WARNINGS:
        config.addinivalue_line("filterwarnings", line)


@pytest.fixture(scope="session")
def kafka_version(request):
    """The Kafka version under test: one matrix entry, or `--kafka-version`, or the default."""
    return getattr(request, "param", None) or request.config.getoption("--kafka-version")


@pytest.fixture(scope="session")
def kafka_dist(kafka_version, pytestconfig):
    from kipcheck.harness.backends.kafka_dist import resolve
    return resolve(kafka_version, pytestconfig.getoption("--kafka-home"))


def _start(dist, root: Path, brokers: int, hosts: str | None = None):
    from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
    if hosts:  # the ssh backend: the file's Kafka nodes, no tiered storage (it needs a directory all brokers share)
        from kipcheck.harness.backends.ssh import load_hosts
        from kipcheck.harness.backends.ssh_cluster import SshCluster
        cluster = SshCluster(dist, root, load_hosts(hosts), ClusterOptions(), owner_pid=os.getpid())
    else:
        # tiered storage on (harness.backends.tiered): topics without remote.storage.enable are unaffected,
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
    c = _start(kafka_dist, tmp_path_factory.mktemp("cluster"), pytestconfig.getoption("--kipcheck-brokers"),
               pytestconfig.getoption("--kipcheck-hosts"))
    yield c
    c.down()


def _shared_cluster(item) -> "pytest.FixtureDef | None":
    """This plugin's session `cluster` as `item` sees it (a module may define its own `cluster`
    over it), or None when no fixture of `item` needs a cluster."""
    defs = getattr(item, "_fixtureinfo", None) and item._fixtureinfo.name2fixturedefs.get("cluster")
    return next((d for d in defs or () if d.func.__module__ == __name__ and d.scope == "session"), None)


def _uses_shared_cluster(item) -> bool:
    defs = getattr(item, "_fixtureinfo", None) and item._fixtureinfo.name2fixturedefs.get("cluster")
    return bool(defs) and defs[-1] is _shared_cluster(item)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop the shared `cluster` once the next test does not use it: idle, three KRaft nodes
    still burn ~0.15 of a core (measured 2026-11-29), for the rest of the session otherwise.
    pytest sets the fixture up again for a later test that uses it. At the session's end
    (`nextitem` None) pytest's own teardown stops it."""
    shared = _shared_cluster(item)
    if nextitem is None or shared is None or shared.cached_result is None or _uses_shared_cluster(nextitem):
        return
    shared.finish(item._request)


@pytest.fixture
def fresh_cluster(kafka_dist, tmp_path, pytestconfig):
    c = _start(kafka_dist, tmp_path / "cluster", 3, pytestconfig.getoption("--kipcheck-hosts"))
    yield c
    c.down()


@pytest.fixture
def topic(cluster):
    from kipcheck.harness.clients.admin import Admin, wait_known_by_each
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = Admin(cluster.bootstrap_servers())
    admin.create_topic(name, partitions=3, replication_factor=min(3, len(cluster.brokers)))
    admin.wait_full_isr(name, 60)
    wait_known_by_each([n.spec.client_endpoint for n in getattr(cluster, "brokers", ())], name, 60)
    return name


@pytest.fixture
def history(tmp_path):
    from kipcheck.rundir.writer import History
    h = History(tmp_path / JSONL_NAME)
    yield h
    h.close()


class NemesisHandle:
    """Inject and heal single faults from a test, each recorded in the test's history."""

    def __init__(self, cluster, topic: str, history):
        from kipcheck.harness.session import RunContext
        self.ctx = RunContext(cluster, topic)
        self.history = history

    def inject(self, spec) -> dict:
        from kipcheck.faults.nemesis import fault_value
        from kipcheck.faults.registry import kind
        op = self.history.invoke("nemesis", "fault", fault_value(spec, "start"))
        injected = kind(spec.kind).inject(self.ctx, spec)
        op.ok(**injected)
        return injected

    def heal(self, spec, injected: dict) -> None:
        from kipcheck.faults.nemesis import fault_value
        from kipcheck.faults.registry import kind
        op = self.history.invoke("nemesis", "fault", fault_value(spec, "stop", injected))
        kind(spec.kind).heal(self.ctx, spec, injected)
        op.ok()

    def heal_all(self) -> None:
        """Undo every fault; recorded while the history is open (a test that checked it closed it)."""
        from kipcheck.faults.nemesis import heal_all
        heal_all(self.ctx, None if self.history.closed else self.history)


@pytest.fixture
def nemesis(cluster, topic, history):
    handle = NemesisHandle(cluster, topic, history)
    yield handle
    handle.heal_all()


@pytest.fixture(scope="session")
def kipcheck_seed(pytestconfig) -> int:
    return pytestconfig.getoption("--kipcheck-seed")


def _node_log_tails(cluster, lines: int) -> dict[str, str]:
    tails = {}
    for node in getattr(cluster, "nodes", None) or []:
        for log in node.logs():
            try:
                tail = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            tails[f"{log.parent.name}/{log.name}"] = "\n".join(tail)
    return tails


def _test_cluster(item):
    funcargs = getattr(item, "funcargs", {})
    return next((funcargs[n] for n in ("fresh_cluster", "cluster") if funcargs.get(n) is not None), None)


def _kafka_version(item) -> str | None:
    dist = getattr(item, "funcargs", {}).get("kafka_dist")
    return getattr(dist, "version", None)


@pytest.fixture
def kipcheck_check(request, kipcheck_seed):
    """`kipcheck_check(history, profile=None)`: close and check the history; fail the test with
    each anomaly and its proof records unless it is valid; return the verdict."""
    def check(history, profile: str | None = None) -> dict:
        from kipcheck.checks.profiles import profile_for_version
        from kipcheck.harness import verify
        from kipcheck.reports.allure import report_to_current_test
        version = _kafka_version(request.node)
        verdict = verify.check_history(history, profile or (profile_for_version(version) if version else None))
        _remember_for_matrix(request.config, version, verdict)
        cluster = _test_cluster(request.node)
        request.node.kipcheck_logs_reported = cluster is not None
        parameters = {"seed": kipcheck_seed, "profile": verdict.get("profile")}
        report_to_current_test(verdict, verify.records_at(history.path, verify.proof_indices(verdict)),
                               parameters=parameters, faults=verify.fault_records(history.path),
                               excerpt=verify.history_excerpt(history.path, verdict),
                               logs=_node_log_tails(cluster, 200) if cluster is not None else {})
        message = verify.failure_message(verdict, history.path)
        if message:
            pytest.fail(message, pytrace=False)
        return verdict
    return check


_MATRIX_VERDICTS = pytest.StashKey[dict]()


def _remember_for_matrix(config, version: str | None, verdict: dict) -> None:
    """Keep each checked verdict under its release for the matrix summary. A test's history
    has no config.json, so its conformance table learns the release's features here
    (harness.backends.releases), from the one function that builds tables."""
    if version and verdict.get("conformance"):
        from kipcheck.checks.conformance import conformance_table
        from kipcheck.harness.backends import releases
        verdict["conformance"] = conformance_table(verdict, {"kafka_version": version, "skipped": [],
                                                             "features": releases.report(version)})
    config.stash.setdefault(_MATRIX_VERDICTS, {}).setdefault(version or "default", []).append(verdict)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """With --kafka-matrix: which KIP rules each release conforms to, over the verdicts its
    tests checked (summary.md and summary.json in <basetemp>/kipcheck-matrix/)."""
    columns = config.stash.get(_MATRIX_VERDICTS, None)
    if not config.getoption("--kafka-matrix") or not columns:
        return
    import json
    from kipcheck.reports.summary import write_release_summary
    factory = getattr(config, "_tmp_path_factory", None)
    directory = (factory.getbasetemp() if factory else Path.cwd()) / "kipcheck-matrix"
    directory.mkdir(parents=True, exist_ok=True)
    release = write_release_summary(directory, columns)
    (directory / "summary.json").write_text(json.dumps({"conformance": release}, indent=2))
    terminalreporter.section("kipcheck: KIP conformance per release")
    terminalreporter.write((directory / "summary.md").read_text())
    terminalreporter.write_line(f"written: {directory / 'summary.md'}, {directory / 'summary.json'}")


class Workload:
    """The run's clients on the test's topic as one service (what `kipcheck run` drives),
    plus an optional fault plan (FaultSpecs, `start` seconds after `start()`)."""

    def __init__(self, cluster, topic: str, history, seed: int, check):
        from kipcheck.harness.session import RunContext
        from kipcheck.harness.clients.workload import WorkloadOptions
        self.cluster, self.topic, self.history, self.seed, self._check = cluster, topic, history, seed, check
        self.ctx = RunContext(cluster, topic)
        self.options = WorkloadOptions(topic=topic, partitions=3)
        self.service = None

    def start(self, faults=(), probes: bool = True, **options) -> "Workload":
        """Start producers, consumers, probes (and the nemesis of `faults`); `options` are
        harness.clients.workload.WorkloadOptions fields, e.g. producers=3, acks="1"."""
        from kipcheck.faults.plan import FaultPlan
        from kipcheck.harness.errors import HarnessError
        from kipcheck.harness.session import follower_rack
        from kipcheck.harness.service import WorkloadService
        if self.service is not None and not self.service.stopped:
            raise HarnessError("the workload is already running")
        self.options = replace(self.options, **options)
        for extra in self.options.topics[1:]:  # the txn workload's second topic and its copier's output
            self.ctx.admin().create_topic(extra, self.options.partitions, min(3, len(self.cluster.brokers)))
            self.ctx.admin().wait_full_isr(extra, 60)
        parts = self.ctx.admin().wait_full_isr(self.topic, 60)
        rack = self.options.consumer_rack or follower_rack(self.cluster, parts)
        self.service = WorkloadService(self.cluster, self.ctx, self.options, self.history, rack,
                                       FaultPlan.of(faults), self.seed, probes).start()
        return self

    def wait(self, seconds: float) -> "Workload":
        """Let it run; a failed client, probe or fault fails the test at once."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.service.raise_errors()
            time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))
        return self

    def wait_until(self, condition, timeout: float) -> bool:
        """Let it run until `condition()` holds or `timeout` seconds pass (what it needs may come
        late on a loaded machine, e.g. a transaction coordinator still loading); whether it held."""
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() >= deadline:
                return False
            self.wait(min(0.5, max(0.0, deadline - time.monotonic())))
        return True

    def progress(self) -> dict:
        """{"sent", "read", "faults"} so far."""
        return self.service.progress() if self.service else {"sent": 0, "read": 0, "faults": 0}

    def stop(self) -> None:
        if self.service is not None:
            self.service.stop()
            self.service.raise_errors()

    def verify(self, profile: str | None = None) -> dict:
        """Stop, heal every fault, wait for a full ISR, read every partition to its end, then
        check the history: the test fails with the anomalies and their proofs unless it is valid."""
        from kipcheck.faults.nemesis import heal_all
        from kipcheck.harness.errors import HarnessError
        from kipcheck.harness.clients.workload import final_read
        self.stop()
        heal_all(self.ctx, self.history)
        try:
            self.ctx.admin().wait_full_isr(self.topic, 60)
        except HarnessError as e:
            warnings.warn(f"kipcheck: {e}", stacklevel=2)
        if not final_read(self.cluster.bootstrap_servers(), self.options, self.history):
            warnings.warn("kipcheck: the final reads did not reach every partition's end; lost-write is incomplete",
                          stacklevel=2)
        return self._check(self.history, profile)


@pytest.fixture
def workload(cluster, topic, history, kipcheck_seed, kipcheck_check):
    w = Workload(cluster, topic, history, kipcheck_seed, kipcheck_check)
    yield w
    if w.service is not None:
        w.service.stop()
    from kipcheck.faults.nemesis import heal_all
    heal_all(w.ctx, None if history.closed else history)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """The Kafka version of a cluster test as an Allure parameter (a matrix entry already is one)."""
    version = _kafka_version(item)
    params = getattr(getattr(item, "callspec", None), "params", {})
    if version and "kafka_version" not in params:
        import allure
        allure.dynamic.parameter("kafka_version", version)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    cluster = _test_cluster(item)
    if cluster is None:
        return
    tails = _node_log_tails(cluster, 40)
    for name, tail in tails.items():
        report.sections.append((f"{name} (last 40 lines)", tail))
    if not getattr(item, "kipcheck_logs_reported", False):
        import allure
        for name, tail in tails.items():
            allure.attach(tail, f"node log {name}", allure.attachment_type.TEXT)
