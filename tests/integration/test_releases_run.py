"""Old KRaft releases run the main job end to end: the oldest (3.3) and a 3.x with tiered
storage (3.9). Each run must start, complete and be checked; config.json must say which
KIP features the release lacks, and the prober must not have asked for them."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kipcheck.harness.backends import kafka_dist, releases
from kipcheck.reference_model.profiles import newest_read_line
from tests.integration.run_support import leftovers

pytestmark = pytest.mark.cluster


def _run(tmp_path, version: str, *extra: str) -> tuple[subprocess.CompletedProcess, object]:
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--kafka-version", version,
                           "--duration", "20", "--seed", "1", "--runs-dir", str(tmp_path), "--quiet", *extra],
                          capture_output=True, text=True, timeout=900)
    return proc, next(tmp_path.iterdir())


# the oldest KRaft line in the default suite; 3.9 with tiered storage (80 s) in the nightly form (`-m long`, issue 32)
@pytest.mark.parametrize("version, tiered", [(releases.NEWEST_PATCH["3.3"], False),
                                             pytest.param(releases.NEWEST_PATCH["3.9"], True, marks=pytest.mark.long)])
def test_old_release_starts_runs_and_is_checked(tmp_path, version, tiered):
    """Valid under the release's own profile, as docs/releases.md says (2026-11-25: 3 of 3 runs
    each). The one duplicate mechanism seen on 3.3.2 (librdkafka's epoch bump after a delivery
    timeout, docs/releases.md "3.3.2: duplicates under a partition") needs a send outstanding for
    the producers' 30 s delivery timeout, which a 20 s run (open sends purged 5 s after its end)
    cannot have."""
    proc, run_dir = _run(tmp_path, version, *(["--tiered"] if tiered else []))
    verdict_file = run_dir / "verdict.json"
    verdict = json.loads(verdict_file.read_text()) if verdict_file.exists() else {}
    found = {name: n for name, n in verdict.get("counts", {}).get("anomalies", {}).items() if n}
    assert proc.returncode == 0, (f"exit {proc.returncode}, anomalies {found}\n{proc.stdout[-2000:]}\n"
                                  f"{proc.stderr[-3000:]}")
    assert not leftovers(run_dir)
    assert verdict["counts"]["records"] > 0 and verdict["valid"] is True
    assert verdict["profile"] == "kafka-%s.%s" % tuple(version.split(".")[:2])
    config = json.loads((run_dir / "config.json").read_text())
    assert config["kafka_version"] == version
    features = config["features"]
    assert features["kip-1023"] == releases.NOT_IN_RELEASE and features["kip-1166"] == releases.NOT_IN_RELEASE
    assert features["tiered-storage"] == ("present" if tiered else releases.NOT_IN_RELEASE)

    ops = [json.loads(l) for l in (run_dir / "history.jsonl").read_text().splitlines() if l.strip()]
    asked = {op["value"]["timestamp"] for op in ops if op.get("f") == "list_offsets" and op.get("type") == "invoke"}
    assert asked, "the prober asked no ListOffsets at all"
    # a timestamp is asked only where its ListOffsets version exists: -4 v8 (3.5), -5 v9 (3.9), -6 v11 (4.2)
    assert (-6 in asked) == releases.has(version, "list-offsets-pending-upload")
    assert (-5 in asked) == releases.has(version, "list-offsets-latest-tiered")
    assert (-4 in asked) == releases.has(version, "list-offsets-earliest-local")
    assert not any(op.get("f") == "metadata_propagation" for op in ops), "KIP-1166 probed where it did not ship"


@pytest.mark.long  # 90 s of a real cluster for one version string; tests/test_releases.py judges the inheritance itself
def test_a_newer_release_appearing_on_maven_central_is_run_on_purpose_and_judged_as_inherited(tmp_path):
    """`--kafka-version latest` on the day Maven Central lists a release newer than every read
    profile. Offline: a fake listing, and a fake release 9.9.0 whose cached classpath is the
    default release's jars, so a real cluster runs and only the version is new."""
    cache = tmp_path / "cache"
    real = kafka_dist.cache_root()
    for entry in real.iterdir():  # everything else the run needs stays where it is
        if entry.name != "kafka":
            (cache / entry.name).parent.mkdir(parents=True, exist_ok=True)
            (cache / entry.name).symlink_to(entry)
    lib = cache / "kafka" / "9.9.0"
    lib.mkdir(parents=True)
    for jar in kafka_dist.resolve(releases.DEFAULT_VERSION).classpath:
        (lib / jar.name).symlink_to(jar)
    (lib / ".complete").write_text("9.9.0")
    listing = tmp_path / "maven-metadata.xml"
    listing.write_text("<versions><version>4.3.1</version><version>9.9.0</version></versions>")
    env = {**os.environ, "KIPCHECK_CACHE": str(cache), "KIPCHECK_MAVEN_METADATA": listing.as_uri()}
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--kafka-version", "latest", "--duration", "20",
                           "--seed", "2", "--runs-dir", str(tmp_path / "runs"), "--no-probes"],
                          capture_output=True, text=True, timeout=900, env=env)
    run_dir = next((tmp_path / "runs").iterdir())
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert not leftovers(run_dir)
    assert "--kafka-version latest: Kafka 9.9.0" in proc.stdout + proc.stderr  # the run names the release
    newest = "kafka-%d.%d" % newest_read_line()
    assert f"profile: {newest} (judged as {newest}: 9.9 not read" in proc.stdout
    config = json.loads((run_dir / "config.json").read_text())
    assert config["kafka_version"] == "9.9.0" and config["options"]["kafka_version"] == "latest"
    assert "--kafka-version 9.9.0" in config["reproduce"]  # next month's `latest` is another release
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True and verdict["profile"] == newest
    assert verdict["judged_as"] == {**verdict["judged_as"], "release": "9.9.0", "line": "9.9", "read": False}
