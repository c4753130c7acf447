"""Every kafka-X.Y profile held against `kipcheck profile read` (harness/profile_read.py) on that
line's newest patch (releases.NEWEST_PATCH): each deviation in the profile is found in the
code, each probed deviation outside it is not. Needs mvn and javap; the jars come from Maven
Central once (pinned versions) and stay in ~/.m2. Deselect with -m 'not maven'."""
import shutil

import pytest

from kipcheck.harness.backends import releases
from kipcheck.harness.errors import HarnessError
from kipcheck.reference_model import profiles

pytestmark = [pytest.mark.maven,
              pytest.mark.skipif(not (shutil.which("mvn") and shutil.which("javap")), reason="needs mvn and javap")]

#: Found in 3.x code by the reader but not in the 3.x profiles (reference_model.profiles, the
#: 3.x block; the fetch-session deviations are in them since 2026-11-28): the missing follower
#: bootstrap (KIP-1023 is 4.3) and KRaft fetches parked without an HWM (KIP-1166 is 4.1). Listed
#: exactly, so a change shows.
UNPROFILED_3X = {f"kafka-3.{m}": {profiles.FOLLOWER_BOOTSTRAP_ABSENT, profiles.KRAFT_FETCH_PARKS_WITHOUT_HWM}
                 for m in range(3, 10)}

#: The line the default suite reads: the pinned default release's. The others are `long` (the nightly
#: form, scripts/nightly.sh, reads them all): on a fresh machine each costs 60-140 s of source-jar
#: downloads and reading (2026-11-29: 3.3 75 s, 3.9 81 s, 4.4 143 s), and on pinned jars their result
#: changes only with profiles.py or profile_read.py, whose changes should run `-m long` on this
#: module (docs/releases.md).
DEFAULT_LINES = {"4.3"}
LINES = [pytest.param(line, marks=() if line in DEFAULT_LINES else pytest.mark.long, id=line)
         for line in sorted((line for line in releases.NEWEST_PATCH if f"kafka-{line}" in profiles.PROFILES),
                            key=lambda line: releases.parse(line))]


@pytest.fixture(scope="module")
def reader():
    from functools import lru_cache

    from kipcheck.harness import profile_read

    class Reader:  # one read per version for the whole module
        PROBES = profile_read.PROBES
        read = staticmethod(lru_cache(maxsize=None)(profile_read.read))
        read_deviation = staticmethod(profile_read.read_deviation)
    return Reader


@pytest.mark.parametrize("line", LINES)
def test_profile_matches_the_code_of_its_newest_patch(reader, line):
    version = releases.NEWEST_PATCH[line]
    name = f"kafka-{line}"
    profile = profiles.get(name)
    result = reader.read(version)
    found = {d for d, r in result["deviations"].items() if r["present"]}
    for d in profile.deviations & set(reader.PROBES):
        assert d in found, f"{name}: {d} not found in {version}: {result['deviations'][d]['missing']}"
    extra = (found - profile.deviations)
    assert extra == UNPROFILED_3X.get(name, set()), f"{name}: found in {version} but not in the profile: {extra}"
    for d, r in result["deviations"].items():
        assert not r.get("changed") or r["present"] or d not in profile.deviations, (d, r["missing"])


@pytest.mark.parametrize("line", LINES)
def test_features_agree_with_releases_table(reader, line):
    f = reader.read(releases.NEWEST_PATCH[line])["features"]
    assert {k: v for k, v in f["features"].items() if v["read"] != v["releases.FEATURES"]} == {}


def test_every_evidence_deviation_has_a_probe(reader):
    assert set(reader.PROBES) == set(profiles.EVIDENCE)


def test_reading_442_shows_bytecode_evidence(reader):
    """4.2.2 and 4.4.0 publish no source jars: read in bytecode against the nearest release that has them."""
    r = reader.read_deviation("4.4.0", profiles.RESPONSE_HWM_SAMPLED_BEFORE_READ)
    assert r["present"] and r["how"] == "bytecode vs 4.3.1 sources"
    assert any("kafka/cluster/Partition.scala:" in e and "initialHighWatermark" in e for e in r["evidence"])


def test_bad_versions_are_one_line_errors(reader, capsys):
    from kipcheck.harness.cli import main
    with pytest.raises(HarnessError, match="not a Kafka version"):
        reader.read("4.x")
    assert main(["profile", "read", "4.x"]) == 2
    assert main(["profile", "read", "0.0.1"]) == 2  # refused before Maven is asked (it is no KRaft release)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("kipcheck: ") for line in err)
    assert "Traceback" not in "".join(err)
