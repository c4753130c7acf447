"""The hand-made histories of ../shared/histories (each a KIP violation a reader sees at
once) are flagged as their expected.json says, under each profile it names, and the proof
names the records its `why` points at."""
import json
import shutil

import pytest

from kipcheck.checks.api import check
from tests.support.shared_histories import SHARED, why_indices

CASES = sorted(p.name for p in SHARED.iterdir() if (p / "expected.json").exists()) if SHARED.is_dir() else []
RELEASE = "kafka-4.3"


#: shared histories the checker does not flag, each with the Kafka mechanism that keeps it from
#: proving the violation (docs/checker.md, "Recall"); strict: a change that flags one fails here
#: until it is taken off this list
UNPROVABLE = {
    "wrong-fetch-error-03": "follower 2's place in the ISR at the leader's report (17) is shown only by the "
                            "leader's own metadata answers (1, 23); 23 was asked 2.8 ms after 17, and a leader's "
                            "metadata image trails its AlterPartition response (a shrink applied at once, "
                            "replayed later): no answer an image lag (1 s) after 17 proves 2 still in sync",
}


@pytest.mark.skipif(not CASES, reason=f"no shared histories at {SHARED}")
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=UNPROVABLE[c]))
                                  if c in UNPROVABLE else c for c in CASES])
def test_shared_history_is_flagged_at_its_records(case, tmp_path):
    expected = json.loads((SHARED / case / "expected.json").read_text())
    profiles = ("kip", RELEASE) if expected["profile"] == "any" else (expected["profile"],)
    shutil.copy(SHARED / case / "history.jsonl", tmp_path / "history.jsonl")
    named = why_indices(expected["why"])
    for profile in profiles:
        verdict = check(tmp_path / "history.jsonl", profile=profile)
        assert verdict["valid"] == expected["valid"], (profile, verdict["anomalies"])
        for name in expected["must_flag"]:
            examples = verdict["anomalies"][name]
            assert examples, f"{case} under {profile}: {name} not flagged"
            assert any(named & set(e["indices"]) for e in examples), \
                f"{case} under {profile}: {name} at {[e['indices'] for e in examples]}, not at {sorted(named)}"
        for name in expected["must_not_flag"]:
            assert not verdict["anomalies"][name], f"{case} under {profile}: {name} flagged {verdict['anomalies'][name]}"


def test_why_indices_reads_parentheses_brackets_and_at():
    assert why_indices("killed (9) and metadata (11, 13) shows [4,2]; answers at 17 with 3") == {9, 11, 13, 4, 2, 17}
