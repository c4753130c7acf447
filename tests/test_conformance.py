"""The per-KIP conformance table (checks/conformance.py) on hand-made histories: each status
shown by a history that must produce it and a near one that must not, the full-fetch
partition gap (Tansu's answer) under its honest name, and the release summary."""
import json
import re
from pathlib import Path

from kipcheck.checks import conformance
from kipcheck.checks.api import check
from kipcheck.checks.cli_check import main as check_main
from kipcheck.checks.conformance import FAILS, HOLDS, KNOWN, NOT_ASKED, NOT_IN_RELEASE
from kipcheck.checks.coverage import OBSERVED
from kipcheck.checks.engine_local import check_records
from tests.support.histories import fetch, full_fetch_leaving_out, history, run_dir, sends


def rows(verdict):
    return {rule: row for kip in verdict["conformance"].values() for rule, row in kip.items()}


def statuses(verdict):
    return {rule: row["status"] for rule, row in rows(verdict).items()}


def test_every_judged_rule_has_one_row_grouped_by_kip():
    v = check_records(history(*sends(3), fetch(1, hwm=3, records=[1, 2])))
    assert list(v["conformance"]) == ["KIP-392", "KIP-227", "KIP-1023", "KIP-1166", "KIP-966", "KIP-455", "KIP-32", "KIP-734", "KIP-848", "KIP-932", "KIP-98"]
    assert set(rows(v)) == set(OBSERVED)
    assert all(row["status"] in conformance.STATUSES for row in rows(v).values())


def test_holds_only_with_observations_and_not_asked_without():
    v = check_records(history(*sends(3), fetch(1, hwm=3, records=[1, 2])))
    s = statuses(v)
    assert v["valid"] is True
    assert s["kip392.records_committed"] == HOLDS and rows(v)["kip392.records_committed"]["observations"] == 1
    assert s["kip1166.propagation_statistic"] == NOT_ASKED  # no propagation probe in this history
    assert rows(v)["kip1166.propagation_statistic"]["why"] == "no observation in the history"
    for rule, row in rows(v).items():
        assert (row["status"] == HOLDS) == (row["observations"] > 0), rule


def test_an_anomaly_fails_its_own_rule_only():
    v = check_records(history(*sends(3), fetch(1, hwm=3, records=[1, 2]), fetch(2, hwm=2, records=[2, 3])))
    s = statuses(v)
    assert s["kip392.records_committed"] == FAILS
    assert rows(v)["kip392.records_committed"]["why"] == "uncommitted-read x1"
    assert s["kip392.consumer_fetch_outcomes"] == HOLDS  # the same answers, another rule: it held
    assert v["counts"]["by_rule"]["kip392.records_committed"]["anomalies"] == {"uncommitted-read": 1}


def test_a_known_deviation_is_known_under_the_release_profile_and_fails_under_kip():
    h = history(fetch(12, hwm=10))  # NONE above the HWM: KIP-392 case 1, Kafka answers it
    assert statuses(check_records(h, profile="kafka-4.3"))["kip392.consumer_fetch_outcomes"] == KNOWN
    assert rows(check_records(h, profile="kafka-4.3"))["kip392.consumer_fetch_outcomes"]["why"] == (
        "wrong-fetch-error x1, accepted as fetch-above-hwm-empty")
    assert statuses(check_records(h, profile="kip"))["kip392.consumer_fetch_outcomes"] == FAILS
    assert statuses(check_records(history(fetch(10, hwm=10)), profile="kafka-4.3"))[
        "kip392.consumer_fetch_outcomes"] == HOLDS


def test_skips_and_missing_features_come_from_config_json(tmp_path):
    d = run_dir(tmp_path, history(*sends(3), fetch(1, hwm=3, records=[1, 2])), kafka_version="4.2.2",
                skipped=[{"key": "prober.offsets_for_leader_epoch", "feature": "KIP-392 OffsetsForLeaderEpoch",
                          "reason": "b:1 does not answer OffsetForLeaderEpoch (API key 23)"},
                         {"key": "prober.list_offsets@-6", "feature": "ListOffsets with timestamp -6",
                          "reason": "b:1 answers ListOffsets v0-v9"}],
                features={"kip-1023": "not in this release", "kip-1166": "present"})
    v = check(d)
    s, r = statuses(v), rows(v)
    assert s["kip392.epoch_end_offset_possible"] == NOT_ASKED
    assert "does not answer OffsetForLeaderEpoch" in r["kip392.epoch_end_offset_possible"]["why"]
    assert s["kip1023.offset_order"] == NOT_IN_RELEASE and "4.2.2" in r["kip1023.offset_order"]["why"]
    assert s["kip1166.propagation_statistic"] == NOT_ASKED  # present, but nothing measured
    assert s["kip392.records_committed"] == HOLDS
    out = json.loads((d / "config.json").read_text())
    assert out["kafka_version"] == "4.2.2"  # read, not written


def test_an_anomaly_of_a_rule_not_in_the_release_still_fails(tmp_path):
    """Under `--profile kip` the absence of a KIP's behaviour is a finding: the row fails."""
    h = history(fetch(12, hwm=10))
    d = run_dir(tmp_path, h, kafka_version="3.9.2", features={"kip-1166": "not in this release"})
    table = conformance.conformance_table(
        {"coverage": {"kip1166.propagation_statistic": {"observations": 4}},
         "counts": {"by_rule": {"kip1166.propagation_statistic": {"anomalies": {"hwm-propagation-delay": 1},
                                                                   "known": {}}}}},
        conformance.run_context(d))
    assert table["KIP-1166"]["kip1166.propagation_statistic"]["status"] == FAILS
    quiet = conformance.conformance_table({"coverage": {"kip1166.propagation_statistic": {"observations": 4}}},
                                          conformance.run_context(d))
    assert quiet["KIP-1166"]["kip1166.propagation_statistic"]["status"] == NOT_IN_RELEASE


def single_fetch_left_out():
    """Tansu's answer to a sessionless one-partition fetch with max_wait_ms 0: no partition."""
    inv = {"broker": 1, "replica_id": -1, "rack": None, "session_id": 0, "session_epoch": -1, "version": 17,
           "topic": "t", "partition": 1, "fetch_offset": 0, "current_leader_epoch": 0}
    return (1, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "error": "NONE", "missing": True,
                              "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                              "preferred_read_replica": -1, "records": []})


def test_a_full_fetch_answer_that_leaves_a_partition_out_is_a_fetch_session_violation_not_kip392():
    for op, gap in ((full_fetch_leaving_out(1), [["t", 1]]), (full_fetch_leaving_out(0, 1, 2, session=(0, 0)), None),
                    (single_fetch_left_out(), [["t", 1]])):
        v = check_records(history(op))
        assert not v["anomalies"]["wrong-fetch-error"], v["anomalies"]["wrong-fetch-error"]
        [example] = v["anomalies"]["fetch-session-violation"]
        assert example["rule"] == "kip227.full_response_partitions"
        assert "left out requested partitions" in example["message"] and "HWM -1" not in example["message"]
        if gap:
            assert example["left_out"] == gap
        s = statuses(v)
        assert s["kip227.full_response_partitions"] == FAILS
        assert s["kip392.consumer_fetch_outcomes"] != HOLDS or rows(v)["kip392.consumer_fetch_outcomes"][
            "observations"] == 2  # only the two answered partitions count
    v = check_records(history(single_fetch_left_out()))
    assert statuses(v)["kip392.consumer_fetch_outcomes"] == NOT_ASKED  # the broker never answered one
    whole = check_records(history(full_fetch_leaving_out()))
    assert not whole["anomalies"]["fetch-session-violation"]  # every partition answered: nothing to flag


def test_every_model_rule_anomaly_names_a_judged_rule():
    """The rule that raises an anomaly names its model rule (checks.rules.base.RULE): the one
    owner of the anomaly -> rule map. Each raise site in the model-backed rules passes one."""
    rules_dir = Path(conformance.__file__).parent / "rules"
    named = set()
    for name in ("fetch_rules.py", "session_rules.py", "replica_rules.py", "kip1023_rules.py", "kip1166_rules.py",
                 "election_rules.py"):
        text = (rules_dir / name).read_text()
        sites = re.findall(r"(?:_anomaly|self\.flag)\((?!kind: )[^,]+, [^,]+,", text) if name in (
            "fetch_rules.py", "session_rules.py") else re.findall(r"RULE: \"([a-z0-9_.]+)\"", text)
        assert sites, name
        named |= set(re.findall(r"\"(kip\d+\.[a-z_]+)\"", text))
    assert named <= set(OBSERVED), named - set(OBSERVED)
    v = check_records(history(*sends(3), fetch(2, hwm=2, records=[2, 3]), fetch(12, hwm=10),
                              full_fetch_leaving_out(1)))
    for section in ("anomalies", "known"):
        for name, examples in v[section].items():
            assert all(e.get("rule") in OBSERVED for e in examples), (name, examples)


def test_release_summary_side_by_side_and_merged_per_release(tmp_path):
    ok = check_records(history(*sends(3), fetch(1, hwm=3, records=[1, 2])))
    bad = check_records(history(*sends(3), fetch(2, hwm=2, records=[2, 3])))
    lacking = check_records(history(*sends(3), fetch(1, hwm=3, records=[1, 2])),
                            context={"kafka_version": "3.9.2", "skipped": [],
                                     "features": {"kip-1023": "not in this release", "kip-1166": "not in this release"}})
    summary = conformance.release_summary({"4.3.1": [ok, bad], "4.2.2": [ok], "3.9.2": [lacking]})
    cells = summary["rules"]["KIP-392"]["kip392.records_committed"]
    assert cells["4.3.1"]["status"] == FAILS and cells["4.2.2"]["status"] == HOLDS
    assert cells["4.3.1"]["observations"] == 2  # both runs' observations
    assert summary["rules"]["KIP-1023"]["kip1023.offset_order"]["3.9.2"]["status"] == NOT_IN_RELEASE
    assert summary["rules"]["KIP-1023"]["kip1023.offset_order"]["4.2.2"]["status"] == NOT_ASKED
    assert summary["runs"] == {"4.3.1": 2, "4.2.2": 1, "3.9.2": 1}
    md = conformance.summary_markdown(summary)
    assert "| KIP-392 | records_committed | fails: uncommitted-read x1 | holds (1) | holds (1) |" in md
    assert "| KIP-1023 | offset_order | not asked | not asked | not in this release |" in md
    from kipcheck.reports.summary import write_release_summary
    written = write_release_summary(tmp_path, {"4.3.1": [ok, bad], "3.9.2": [lacking]})
    assert (tmp_path / "summary.md").read_text().count("\n| KIP-") == len(OBSERVED)
    assert written["releases"] == ["4.3.1", "3.9.2"]


def test_cli_prints_the_table(tmp_path, capsys):
    d = run_dir(tmp_path, history(*sends(3), fetch(2, hwm=2, records=[2, 3])), kafka_version="4.3.1",
                features={"kip-1023": "present", "kip-1166": "present"})
    assert check_main([str(d), "--profile", "kip"]) == 1
    out = capsys.readouterr().out
    assert "conformance (per KIP rule):" in out
    assert re.search(r"KIP-392\s+records_committed\s+fails\s+uncommitted-read x1", out)
    assert re.search(r"KIP-1166\s+propagation_statistic\s+not asked", out)
    assert check_main([str(d), "--json", "--profile", "kip"]) == 1
    assert json.loads(capsys.readouterr().out)["conformance"]["KIP-392"]["kip392.records_committed"]["status"] == FAILS
