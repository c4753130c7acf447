"""harness.backends.releases: what each KRaft release has, checked against the releases' own jars."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from kipcheck.harness.backends import releases, tiered
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import cache_root, resolve
from kipcheck.harness.pytest_plugin import matrix_versions


def test_features_follow_the_release_line():
    old, tiered_line, kraft_fetch, newest = (releases.features(v) for v in ("3.3.2", "3.9.2", "4.1.2", "4.3.1"))
    assert not old["tiered-storage"] and not old["kip-1166"] and not old["kip-1023"]
    assert tiered_line["tiered-storage"] and not tiered_line["kip-1166"] and not tiered_line["kip-1023"]
    assert kraft_fetch["kip-1166"] and not kraft_fetch["kip-1023"]
    assert all(newest.values())
    # the boundaries themselves: the last release before a feature lacks it
    assert not releases.has("3.5.2", "tiered-storage") and releases.has("3.6.0", "tiered-storage")
    assert not releases.has("4.0.2", "kip-1166") and releases.has("4.1.0", "kip-1166")
    assert not releases.has("4.2.2", "kip-1023") and releases.has("4.3.0", "kip-1023")


def test_report_names_absent_features():
    report = releases.report("3.3.2")
    assert report["kip-1023"] == releases.NOT_IN_RELEASE and report["tiered-storage"] == releases.NOT_IN_RELEASE
    assert set(releases.report("4.3.1").values()) == {"present"}
    assert set(releases.report(None).values()) == {"present"}  # unknown (external): nothing claimed absent


def test_all_kraft_is_one_newest_patch_per_minor_line():
    versions = releases.all_kraft()
    lines = [releases.parse(v)[:2] for v in versions]
    assert lines == sorted(set(lines)) and lines[0] == (3, 3) and lines[-1] == (4, 4)
    assert lines == [(3, m) for m in range(3, 10)] + [(4, m) for m in range(0, 5)]


def test_matrix_expands_all_kraft_and_keeps_explicit_versions():
    assert matrix_versions("all-kraft") == releases.all_kraft()
    assert matrix_versions("4.2.1, all-kraft,4.2.1") == ["4.2.1", *releases.all_kraft()]
    assert matrix_versions("3.9.2,") == ["3.9.2"]


def test_tiered_config_only_where_the_release_has_it(tmp_path):
    with pytest.raises(HarnessError, match="no tiered storage"):
        tiered.broker_config(tmp_path, "3.5.2")
    assert tiered.FOLLOWER_FROM_TIERED not in tiered.broker_config(tmp_path, "4.2.2")
    assert tiered.broker_config(tmp_path, "4.3.1")[tiered.FOLLOWER_FROM_TIERED] == "true"


def test_pre_kraft_release_is_refused_with_one_line():
    with pytest.raises(HarnessError, match="predates production KRaft"):
        resolve("3.2.3")


def _highest(jar, message: str) -> int:
    out = subprocess.run(["javap", "-constants", "-cp", str(jar), f"org.apache.kafka.common.message.{message}"],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split("HIGHEST_SUPPORTED_VERSION = ")[1].split(";")[0])


def test_table_matches_the_request_versions_each_cached_release_ships():
    """Read from the releases' kafka-clients jars: the table must agree with every one on disk."""
    jars = sorted(cache_root().glob("kafka/*/kafka-clients-*[0-9].jar"))
    if not shutil.which("javap") or not jars:
        pytest.skip("no javap or no resolved Kafka in the cache")
    for jar in jars:
        v = jar.parent.name
        list_offsets, fetch = _highest(jar, "ListOffsetsRequestData"), _highest(jar, "FetchRequestData")
        assert releases.has(v, "list-offsets-earliest-local") == (list_offsets >= 8), v
        assert releases.has(v, "list-offsets-latest-tiered") == (list_offsets >= 9), v
        assert releases.has(v, "list-offsets-pending-upload") == (list_offsets >= 11), v
        assert releases.has(v, "kip-1166") == (fetch >= 18), v
        raft = jar.parent / f"kafka-raft-{v}.jar"
        if raft.exists():
            methods = subprocess.run(["javap", "-p", "-cp", str(raft), "org.apache.kafka.raft.KafkaRaftClient"],
                                     capture_output=True, text=True).stdout
            assert releases.has(v, "kip-1166") == ("isHighWatermarkUpdated" in methods), v



_RSM = "org.apache.kafka.server.log.remote.storage.RemoteStorageManager"
#: what kipcheck's remote storage manager (harness/backends/remote_storage) implements and calls,
#: as javap prints it from 3.6.2's kafka-storage-api jar, the one it is compiled against
_RSM_API = {
    _RSM: {
        "copyLogSegmentData(RemoteLogSegmentMetadata, LogSegmentData) -> Optional<RemoteLogSegmentMetadata$CustomMetadata>",
        "fetchLogSegment(RemoteLogSegmentMetadata, int) -> InputStream",
        "fetchLogSegment(RemoteLogSegmentMetadata, int, int) -> InputStream",
        "fetchIndex(RemoteLogSegmentMetadata, RemoteStorageManager$IndexType) -> InputStream",
        "deleteLogSegmentData(RemoteLogSegmentMetadata) -> void",
    },
    "org.apache.kafka.server.log.remote.storage.LogSegmentData": {
        "logSegment() -> Path", "offsetIndex() -> Path", "timeIndex() -> Path",
        "transactionIndex() -> Optional<Path>", "producerSnapshotIndex() -> Path", "leaderEpochIndex() -> ByteBuffer",
    },
}


def _methods(jar, cls: str, abstract_only: bool) -> set[str]:
    """`name(args) -> return` of cls's public methods, package names dropped."""
    out = subprocess.run(["javap", "-cp", str(jar), cls], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        m = re.match(r"\s+public (abstract )?(?:static )?(?:final )?(\S+) (\w+)\((.*)\)", line)
        if m and (m.group(1) or not abstract_only):
            strip = lambda t: re.sub(r"(?:[a-z]\w*\.)+", "", t)
            found.add(f"{m.group(3)}({strip(m.group(4))}) -> {strip(m.group(2))}")
    return found


def test_one_remote_storage_manager_fits_every_cached_tiered_release():
    """--tiered puts one jar on every release from 3.6 on: each cached release's RemoteStorageManager
    must be the interface it implements (no method added or changed) and LogSegmentData must
    still have what it calls."""
    jars = sorted(cache_root().glob("kafka/*/kafka-storage-api-*[0-9].jar"))
    if not shutil.which("javap") or not jars:
        pytest.skip("no javap or no resolved Kafka in the cache")
    checked = []
    for jar in jars:
        v = jar.parent.name
        if not releases.has(v, "tiered-storage"):
            continue
        assert _methods(jar, _RSM, abstract_only=True) == _RSM_API[_RSM], v
        data = "org.apache.kafka.server.log.remote.storage.LogSegmentData"
        assert _RSM_API[data] <= _methods(jar, data, abstract_only=False), v
        checked.append(v)
    if not checked:
        pytest.skip("no release with tiered storage in the cache")


# --- the pinned default and `latest`: no test depends on what Maven Central serves today ------
def _listing(tmp_path, *versions: str) -> str:
    """A maven-metadata.xml of kafka_2.13 listing `versions`, as a file:// URL."""
    xml = tmp_path / "maven-metadata.xml"
    xml.write_text("<metadata><versioning><versions>" + "".join(f"<version>{v}</version>" for v in versions)
                   + "</versions></versioning></metadata>")
    return xml.as_uri()


def _cached(cache, version: str) -> None:
    """A resolved classpath in the cache (`.complete`), so resolving it needs no Maven."""
    lib = cache / "kafka" / version
    lib.mkdir(parents=True)
    (lib / ".complete").write_text(version)


def test_the_default_release_is_pinned_and_never_asks_maven_central(tmp_path, monkeypatch):
    from kipcheck.harness.backends.kafka_dist import version_of
    from kipcheck.reference_model.profiles import profile_for
    monkeypatch.setenv("KIPCHECK_MAVEN_METADATA", (tmp_path / "absent.xml").as_uri())  # reading it would fail
    assert version_of(None) == releases.DEFAULT_VERSION
    # the default has a profile read in its own sources (no note, nothing inherited)
    assert profile_for(releases.DEFAULT_VERSION) == (f"kafka-{releases.DEFAULT_VERSION.rsplit('.', 1)[0]}", None)


def test_latest_is_the_newest_listed_release_that_resolves(tmp_path, monkeypatch):
    from kipcheck.harness.backends.kafka_dist import LATEST, latest_version, listed_versions, version_of
    cache = tmp_path / "cache"
    monkeypatch.setenv("KIPCHECK_CACHE", str(cache))
    monkeypatch.setenv("KIPCHECK_MAVEN_METADATA", _listing(tmp_path, "3.2.3", "4.3.1", "9.10.0", "9.9.1", "4.3.1-rc1"))
    assert listed_versions() == ["9.10.0", "9.9.1", "4.3.1"]  # newest first, pre-KRaft and non-releases left out
    _cached(cache, "9.9.1")
    _cached(cache, "9.10.0")
    assert latest_version() == version_of(LATEST) == "9.10.0"


def test_an_unreadable_listing_is_one_line_naming_it(tmp_path, monkeypatch):
    from kipcheck.harness.backends.kafka_dist import LATEST, version_of
    url = (tmp_path / "absent.xml").as_uri()
    monkeypatch.setenv("KIPCHECK_MAVEN_METADATA", url)
    with pytest.raises(HarnessError, match="cannot read Kafka versions from .*absent.xml.*--kafka-version") as e:
        version_of(LATEST)
    assert "\n" not in str(e.value)
    with pytest.raises(HarnessError, match="not a Kafka version: 'newest'"):
        version_of("newest")


def test_the_reproduce_command_names_the_resolved_release_and_the_workload(monkeypatch):
    monkeypatch.delenv("KIPCHECK_BROKER_JIT")  # the suite's c1 would be named too (tests/test_broker_jit.py)
    from kipcheck.harness.clients.workload import WorkloadOptions
    from kipcheck.harness.reproduce import reproduce_command
    from kipcheck.harness.run import RunOptions
    line = reproduce_command(RunOptions(seed=7), releases.DEFAULT_VERSION)
    assert line == f"kipcheck run --seed 7 --kafka-version {releases.DEFAULT_VERSION}"
    line = reproduce_command(RunOptions(seed=3, kafka_version="latest", tiered=True, recovery_bound=5.0,
                                        workload=WorkloadOptions(producers=4, rate=0.0),
                                        broker_jvm_args=("-Xmx1g",)), "9.10.0")
    assert line == ("kipcheck run --seed 3 --kafka-version 9.10.0 --tiered --recovery-bound 5 --producers 4 "
                    "--rate 0 --broker-jvm-arg=-Xmx1g")
    # the share group decides which brokers the seed's coordinator faults hit: a repeat names it
    share = reproduce_command(RunOptions(seed=14, workload=WorkloadOptions(workload="share").with_share_group("a1b2c3")),
                              "4.3.1")
    assert share.endswith("--workload share --share-group kipcheck-share-kipcheck-a1b2c3"), share
    # an external cluster of unknown release, and a rolling upgrade, name what they were given
    assert "--kafka-version" not in reproduce_command(RunOptions(seed=1, backend="external", bootstrap="h:9092"),
                                                      "unknown")
    upgrade = reproduce_command(RunOptions(seed=1, upgrade_from="3.9.2", upgrade_to="4.3.1"), "3.9.2")
    assert "--kafka-version" not in upgrade and "--upgrade-from 3.9.2 --upgrade-to 4.3.1" in upgrade
