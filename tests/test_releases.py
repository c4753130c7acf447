"""harness.backends.releases: what each KRaft release has, checked against the releases' own jars."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from harness.backends import releases, tiered
from harness.errors import HarnessError
from harness.backends.kafka_dist import cache_root, resolve
from harness.pytest_plugin import matrix_versions


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
    assert lines == sorted(set(lines)) and lines[0] == (3, 3) and lines[-1] == (4, 3)
    assert lines == [(3, m) for m in range(3, 10)] + [(4, m) for m in range(0, 4)]


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
        storage_test = jar.parent / f"kafka-storage-{v}-test.jar"
        if storage_test.exists():
            names = subprocess.run(["unzip", "-l", str(storage_test)], capture_output=True, text=True).stdout
            assert releases.has(v, "tiered-storage") == (f"{tiered.LOCAL_TIERED_STORAGE.replace('.', '/')}.class" in names), v
