"""Rolling upgrades without a cluster: which versions can roll, how a mixed history is
judged (profile and note), where its mixed-version windows are, and how the liveness rule
treats a roll step that follows a heal."""
from __future__ import annotations

import json

import pytest

from kipcheck.checks.mixed import mixed_windows
from kipcheck.checks.profiles import choose_profile_noted, mixed_profile
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.upgrade import direction, format_release, older
from tests.support.liveness import Hist, judge, kill_and_heal

S = 1_000_000_000


def test_direction_and_format_release():
    assert direction("3.9.2", "4.3.1") == "upgrade" and format_release("3.9.2", "4.3.1") is None
    assert direction("4.3.1", "3.9.2") == "downgrade" and format_release("4.3.1", "3.9.2") == "3.9"
    assert direction("4.3.0", "4.3.1") == "upgrade"  # a patch roll, same metadata.version line
    assert older("4.10.0", "4.9.1") == "4.9.1"  # by number, not by text
    for a, b, words in (("4.3.1", "4.3.1", "nothing to roll"), ("2.8.2", "4.3.1", "predates production KRaft"),
                        ("4.3.1", "latest", "take Kafka versions")):
        with pytest.raises(HarnessError, match=words):
            direction(a, b)


def test_a_mixed_history_is_judged_under_the_older_release_and_says_so(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(
        {"kafka_version": "3.9.2", "upgrade": {"from": "3.9.2", "to": "4.3.1", "judged_as": "3.9.2"}}))
    name, note = choose_profile_noted(tmp_path)
    assert name == "kafka-3.9" and "older release's profile kafka-3.9" in note and "--profile kafka-4.3" in note
    # a downgrade's older release is its target
    downgrade = {"from": "4.3.1", "to": "3.9.2", "judged_as": "3.9.2"}
    assert mixed_profile(downgrade)[0] == "kafka-3.9" and "rolling downgrade 4.3.1 -> 3.9.2" in mixed_profile(downgrade)[1]
    # an asked profile wins, without a note
    assert choose_profile_noted(tmp_path, "kafka-4.3") == ("kafka-4.3", None)
    # without the upgrade block the same run would be judged by its version alone
    (tmp_path / "config.json").write_text(json.dumps({"kafka_version": "4.3.1"}))
    assert choose_profile_noted(tmp_path) == ("kafka-4.3", None)


def _roll(t, node, versions, type_="ok"):
    inv = {"time": t * S, "f": "upgrade", "type": "invoke", "value": {"step": "roll", "node": node}}
    done = {"time": (t + 5) * S, "f": "upgrade", "type": type_,
            "value": {"step": "roll", "node": node, "versions": versions}}
    return [inv, done]


def test_mixed_windows_run_from_the_first_roll_to_the_one_that_made_the_cluster_uniform():
    a, b = "3.9.2", "4.3.1"
    records = (_roll(10, 1, {"1": b, "2": a, "3": a}) + _roll(20, 2, {"1": b, "2": b, "3": a})
               + _roll(30, 3, {"1": b, "2": b, "3": b})
               + [{"time": 40 * S, "f": "upgrade", "type": "invoke", "value": {"step": "finalize"}}])
    assert mixed_windows(records) == [(10 * S, 35 * S)]
    # a history that ends mid-roll (the last step failed) ends mixed
    failed = records[:4] + _roll(30, 3, {"1": b, "2": b, "3": a}, type_="info")
    assert mixed_windows(failed) == [(10 * S, None)]
    assert mixed_windows([{"time": 0, "f": "fault", "type": "ok", "value": {}}]) == []


def _slow_isr_after_heal(h: Hist, roll_at: float | None) -> None:
    """Kill healed at 10 s; broker 3 shows a shrunk ISR at 15.05 s and a full one at 15.1 s
    (bound 5 s); a roll step starts at `roll_at` (None: no upgrade)."""
    def roll():
        h.at(roll_at)
        h.op("upgrade", "upgrade", {"step": "roll", "node": 2, "from": "3.9.2", "to": "4.3.1"},
             versions={"1": "3.9.2", "2": "4.3.1", "3": "3.9.2"})
    kill_and_heal(h, 10)
    for p in (0, 1):
        h.at(11).send(p)
    h.poll((0, 1))
    for b in (1, 2):
        for p in (0, 1):
            h.metadata(b, p, full=True)
    if roll_at is not None and roll_at < 15.05:
        roll()
    h.at(15.05).metadata(3, 0, full=False)
    if roll_at is not None and roll_at >= 15.05:
        roll()
    for p in (0, 1):
        h.at(15.1).metadata(3, p, full=True)
    h.at(30).fault("heal-all", "stop", targets=())


def test_a_roll_step_inside_a_heal_window_cuts_it_short_and_just_after_the_bound_does_not():
    h = Hist()
    _slow_isr_after_heal(h, roll_at=None)
    assert [e["measures"] for e in judge(h.records, bound=5.0)["anomalies"]["slow-recovery"]] == [["isr"]]
    # the roll took a node down on purpose 3 s after the heal: undecided, not an anomaly
    h = Hist()
    _slow_isr_after_heal(h, roll_at=13)
    v = judge(h.records, bound=5.0)
    assert v["anomalies"]["slow-recovery"] == []
    (entry,) = v["liveness"]["faults"]
    assert entry["ended_by"] == "upgrade roll of node 2" and entry["status"] == "undecided"
    # a roll that starts after the bound ran out proves the recovery was slow all the same
    h = Hist()
    _slow_isr_after_heal(h, roll_at=15.07)
    assert [e["measures"] for e in judge(h.records, bound=5.0)["anomalies"]["slow-recovery"]] == [["isr"]]


def test_the_older_profile_accepts_no_deviation_the_newer_one_rejects():
    """docs/checker.md's argument for judging 3.9 -> 4.3 under kafka-3.9: it is the narrower."""
    from kipcheck.reference_model.profiles import PROFILES
    assert PROFILES["kafka-3.9"].deviations < PROFILES["kafka-4.3"].deviations


def test_the_reproduce_line_repeats_the_upgrade():
    from kipcheck.harness.reproduce import reproduce_command
    from kipcheck.harness.run import RunOptions
    line = reproduce_command(RunOptions(seed=7, faults=["kill", "partition"], upgrade_from="3.9.2", upgrade_to="4.3.1"))
    assert "--upgrade-from 3.9.2 --upgrade-to 4.3.1" in line and "--faults kill,partition" in line
