"""`kipcheck qualify` without a cluster: its plan, its budget, its regressions, its page.

The runs themselves are `kipcheck run`s (tested live elsewhere; the long form of a whole
qualification is tests/integration/test_qualify_live.py). Here `do_run` is replaced by one that
writes a verdict and advances a fake clock, so the budget's choices are exact."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kipcheck.harness import qualify
from kipcheck.harness.campaign import DONE, run_options
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.run import RunOptions
from tests.test_report_browser import SHOTS, render


@pytest.mark.parametrize("text, seconds", [("45m", 2700), ("90s", 90), ("1h30m", 5400), ("120", 120), ("0.5h", 1800),
                                           ("1h30s", 3630), ("2m30s", 150)])
def test_budget_parses(text, seconds):
    assert qualify.parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "45x", "-5m", "0", "forty", "1h30", "2m30", "1h 30"])
def test_a_bad_budget_is_one_line(text):
    with pytest.raises(HarnessError):
        qualify.parse_budget(text)


def test_the_baseline_is_the_previous_line_with_a_profile():
    assert qualify.default_baseline("4.3.1") == "4.2.2"
    assert qualify.default_baseline("4.0.2") == "3.9.2"
    with pytest.raises(HarnessError, match="give --baseline"):
        qualify.default_baseline("3.3.1")


def test_round_one_runs_every_step_both_releases_can():
    [first, second] = qualify.rounds("4.3.1", "4.2.2", 2)
    assert [s.name for s, _, _ in first] == [s.name for s in qualify.PLAN]
    assert [s.name for s, _, _ in second] == ["chaos"] and second[0][1].seed == 2
    tiered = next(a for s, a, _ in first if s.name == "tiered")
    assert tiered.tiered and tiered.kafka_version == "4.3.1"
    upgrade = next(b for s, _, b in first if s.name == "upgrade")
    assert (upgrade.upgrade_from, upgrade.kafka_version) == ("4.1.2", "4.2.2")
    # KIP-455's fault needs a spare broker: that step alone runs four, and its key and options say so
    move = next(a for s, a, _ in first if s.name == "reassignment")
    assert move.brokers == 4 and "__brokers-4" in move.key
    assert run_options(RunOptions(), move, Path("runs")).brokers == 4
    assert all(a.brokers is None for s, a, _ in first if s.name != "reassignment")
    share = next(a for s, a, _ in first if s.name == "share")
    assert share.workload == "share" and "latency" in share.faults
    # 3.3 has no share groups, no tiered storage, no ELR and no earlier KRaft line to upgrade from
    [old] = qualify.rounds("3.3.1", "3.3.2", 1)
    assert [s.name for s, _, _ in old] == ["chaos", "followers", "transactions", "reassignment"]
    assert len(qualify.skipped_steps("3.3.1", "3.3.2")) == 5
    # 4.1 has the rest but not share groups: against 4.2 the step is not run, and says why
    assert "share: not run (needs share-groups: 4.1.2)" in qualify.skipped_steps("4.2.2", "4.1.2")


def _fake_runs(monkeypatch, tmp_path, clock, seconds_per_run, anomalies_of):
    """`do_run` writes a run directory with a verdict (anomalies_of(planned) -> {name: count}) and
    spends `seconds_per_run` on the fake clock."""
    def do_run(directory, state, p, base, ui):
        run_dir = tmp_path / "runs" / p.key
        run_dir.mkdir(parents=True)
        (run_dir / "history.jsonl").write_text("")
        found = anomalies_of(p)
        (run_dir / "verdict.json").write_text(json.dumps({
            "valid": not found, "anomalies": {n: [{"message": f"{n} here", "indices": [1, 2]}] for n in found},
            "counts": {"anomalies": found}}))
        state.mark(p, status=DONE, run_dir=str(run_dir))
        clock[0] += seconds_per_run

    monkeypatch.setattr(qualify, "do_run", do_run)


class _Quiet:
    def note(self, *_):
        pass


def test_the_budget_drops_what_does_not_fit_and_says_so(monkeypatch, tmp_path):
    clock = [0.0]
    _fake_runs(monkeypatch, tmp_path, clock, 100.0, lambda p: {})
    budget = qualify.Budget(1000.0, 60.0, clock=lambda: clock[0])  # 900 s for runs: 9 runs of 100 s
    done, dropped = qualify.run_plan(tmp_path, "4.3.1", "4.2.2", RunOptions(), {"engine": "local"}, budget, _Quiet())
    assert len(done) == 8  # four pairs fit; the fifth would end at 1000 s > 900 s
    assert [p.key for p in done][:2] == ["kafka-4.3.1__faults-all__seed-1", "kafka-4.2.2__faults-all__seed-1"]
    assert [line.split(" (")[0] for line in dropped] == ["tiered", "elr-on", "elr-off", "reassignment",
                                                          "upgrade", "chaos: seeds 2-20 not run"]
    # one run more of budget: the fifth pair fits, the sixth does not
    clock[0] = 0.0
    monkeypatch.setattr(qualify, "do_run", lambda *a: clock.__setitem__(0, clock[0] + 100.0))
    budget = qualify.Budget(1000.0 + 200 / 0.9, 60.0, clock=lambda: clock[0])
    done, dropped = qualify.run_plan(tmp_path / "b", "4.3.1", "4.2.2", RunOptions(), {"engine": "local"}, budget,
                                     _Quiet())
    assert len(done) == 10 and [line.split(" (")[0] for line in dropped][0] == "elr-on"


def test_a_family_on_the_release_only_is_a_regression(monkeypatch, tmp_path):
    rows = [{"kafka_version": "3.3.1", "run_dir": "a", "reproduce": "kipcheck run --seed 1 --kafka-version 3.3.1",
             "verdict": {"anomalies": {"preferred-replica-violation": [{"message": "m", "indices": [3]}],
                                       "duplicate": [{"message": "d"}]},
                         "counts": {"anomalies": {"preferred-replica-violation": 4, "duplicate": 1}}}},
            {"kafka_version": "3.3.2", "run_dir": "b", "reproduce": "r",
             "verdict": {"anomalies": {"duplicate": [{"message": "d"}], "preferred-replica-violation": []},
                         "counts": {"anomalies": {"duplicate": 2}}}}]
    regressed, shared = qualify.regressions(rows, "3.3.1", "3.3.2")
    assert [(g["anomaly"], g["count"], g["reproduce"]) for g in regressed] == [
        ("preferred-replica-violation", 4, "kipcheck run --seed 1 --kafka-version 3.3.1")]
    assert shared == ["duplicate"]
    assert qualify.family_counts(rows, ("3.3.1", "3.3.2")) == {
        "duplicate": {"3.3.1": 1, "3.3.2": 2}, "preferred-replica-violation": {"3.3.1": 4, "3.3.2": 0}}
    # the same family on the baseline too: no regression
    rows[1]["verdict"]["anomalies"]["preferred-replica-violation"] = [{"message": "m"}]
    assert qualify.regressions(rows, "3.3.1", "3.3.2")[0] == []


def test_the_page_shows_the_regression_first_in_a_browser(tmp_path):
    from kipcheck.reports.qualify_view import write_qualify_html
    result = {"version": "3.3.1", "baseline": "3.3.2", "budget": 600, "seconds": 540, "runs": 4, "errors": 0,
              "regressions": [{"anomaly": "preferred-replica-violation", "count": 4, "runs": 1, "run_dir": "runs/x",
                               "reproduce": "kipcheck run --seed 1 --kafka-version 3.3.1",
                               "example": {"message": "broker 2 named out of the ISR", "indices": [3, 9],
                                           "broker_logs": {"partitions": ["kipcheck-0"], "window_s": [1, 2],
                                                           "lines": [{"node": 1, "time": "t", "history_s": 1.5,
                                                                      "level": "WARN", "text": "Shrinking ISR"}]}}}],
              "shared": ["duplicate"], "families": {"duplicate": {"3.3.1": 1, "3.3.2": 2},
                                                    "preferred-replica-violation": {"3.3.1": 4, "3.3.2": 0}},
              "skipped": ["tiered: not run"], "dropped": [], "plan": [{"step": "chaos", "faults": "all", "reaches": "x"}]}
    page = write_qualify_html(tmp_path, result)
    dom = render(page, SHOTS / "qualify.png", height=1000)
    assert dom.index("preferred-replica-violation: 4 in 1 run(s)") < dom.index("Anomalies per family")
    assert "Shrinking ISR" in dom and "kipcheck run --seed 1 --kafka-version 3.3.1" in dom
    assert dom.count("class=\"bar\"") == 4


@pytest.mark.parametrize("argv, message", [
    (["--kafka-version", "4.3.1", "--budget", "soon"], "--budget: 'soon' is not a duration"),
    (["--kafka-version", "3.3.1"], "give --baseline"),
    (["--kafka-version", "4.3.1", "--baseline", "4.3.1"], "nothing to compare"),
    (["--kafka-version", "4.3.1", "--master", "spark://h:7077"], "--master is for --engine spark"),
    (["--kafka-version", "4.3.1", "--baseline", "2.8.2"], "not a KRaft release"),
])
def test_bad_options_are_one_line_before_anything_starts(argv, message, tmp_path):
    out = subprocess.run([sys.executable, "-m", "kipcheck", "qualify", *argv, "--dir", str(tmp_path / "q")],
                         capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parent.parent)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "q").exists()
