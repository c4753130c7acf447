"""The seeded-bug table, the matrix statuses and the broker JVM-argument option (no cluster)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from kipcheck.checks.verdict import ANOMALY_NAMES
from kipcheck.harness.backends import seeded
from kipcheck.checks.rules.share_rules import SHARE_ANOMALIES
from kipcheck.checks.rules.share_session_rules import NAME as SHARE_SESSION_ANOMALY
from kipcheck.harness.selftest import (CONTROL, SELFTEST_GROUP_CONFIG, SHARE, format_markdown, kip_evidence,
                                       matrix_passes, restatus, status, window_rejoin, window_rejoin_gap, window_seconds,
                                       window_workload)

AGENT = seeded.SOURCES / "src" / "main" / "java" / "kipcheck" / "seeded" / "Agent.java"
PROFILES = ["kip", "kafka-4.3"]


def java_targets() -> dict[str, str]:
    """Agent.TARGETS as {bug: "Class.method[ + Class.method]"}, read from the Java source."""
    found = re.findall(r'new Target\("([^"]+)",\s*"([^"]+)",\s*"([^"]+)"', AGENT.read_text())
    targets: dict[str, list[str]] = {}
    for bug, cls, method in found:
        targets.setdefault(bug, []).append(f"{cls}.{method}")
    return {bug: " + ".join(methods) for bug, methods in targets.items()}


def test_python_table_matches_the_agent():
    assert java_targets() == {b.name: b.kafka_method for b in seeded.BUGS}


def test_every_bug_expects_a_documented_anomaly():
    for b in seeded.BUGS:
        assert b.anomaly in ANOMALY_NAMES, b.name
        assert b.rule and b.slip


def row(**kw):
    base = {"bug": "poll-skip", "anomaly": "poll-skip", "installed": True, "missing": None, "fires": 5,
            "flagged": {"kip": ["poll-skip"], "kafka-4.3": ["poll-skip", "lost-write"]},
            "valid": {"kip": False, "kafka-4.3": False}}
    return {**base, **kw}


def test_caught_needs_the_expected_name_under_both_profiles():
    assert status(row(), PROFILES) == "caught"
    assert status(row(flagged={"kip": ["poll-skip"], "kafka-4.3": []}), PROFILES) == "caught under kip only"
    assert status(row(flagged={"kip": ["lost-write"], "kafka-4.3": ["lost-write"]}), PROFILES) == "MISSED"


def test_a_bug_that_never_fired_is_not_exercised_even_when_flagged():
    assert status(row(fires=0), PROFILES) == "not exercised"


def test_a_missing_method_is_not_installable():
    assert status(row(installed=False, missing="kafka.cluster.Partition.readRecords"), PROFILES) == "not installable"
    assert status(row(installed=False), PROFILES).startswith("not installed")


def test_control_window_must_be_valid_under_both():
    ok = {"bug": CONTROL, "valid": {"kip": True, "kafka-4.3": True}, "flagged": {}, "fires": 0}
    assert status(ok, PROFILES) == "valid"
    assert status({**ok, "valid": {"kip": True, "kafka-4.3": "unknown"}}, PROFILES) == "INVALID"
    # under kip a healthy Kafka shows its profile's known deviations, and nothing else
    baseline = {**ok, "valid": {"kip": False, "kafka-4.3": True}, "flagged": {"kip": ["wrong-fetch-error"]},
                "known": {"kafka-4.3": ["wrong-fetch-error"]}}
    assert status(baseline, PROFILES) == "valid"
    assert status({**baseline, "flagged": {"kip": ["wrong-fetch-error", "poll-skip"]}}, PROFILES) == "INVALID"
    control = {**ok, "status": "valid", "seconds_to_detection": {}}
    bug = {**row(), "status": "caught", "kafka_method": "m", "rule": "r", "seconds_to_detection": {"kip": 1.5}}
    matrix = {"kafka_version": "4.3.1", "profiles": PROFILES, "window": 5, "rows": [control, bug]}
    assert matrix_passes(matrix)
    assert not matrix_passes({**matrix, "rows": [control, {**bug, "status": "not exercised"}]})
    md = format_markdown(matrix)
    assert "| poll-skip | m | r | poll-skip | poll-skip | poll-skip, lost-write | 5 | 1.5/- | caught |" in md


def test_a_name_the_control_shows_under_kip_is_kip_evidence_only_above_the_controls_count():
    """Issue 21 §4: under `kip` a healthy Kafka already shows `wrong-fetch-error`; the bug's
    `kip` column is evidence only when its count exceeds the control's (scaled to the window)."""
    control = {"bug": CONTROL, "window": 15, "flagged": {"kip": ["uncommitted-read", "wrong-fetch-error"],
                                                        "kafka-4.3": []},
               "counts": {"kip": {"uncommitted-read": 3, "wrong-fetch-error": 40}, "kafka-4.3": {}},
               "valid": {"kip": False, "kafka-4.3": True}, "known": {"kafka-4.3": ["uncommitted-read", "wrong-fetch-error"]},
               "fires": 0}
    bug = row(bug="wrong-fetch-error-case1", anomaly="wrong-fetch-error", window=15,
              flagged={"kip": ["wrong-fetch-error"], "kafka-4.3": ["wrong-fetch-error"]},
              counts={"kip": {"wrong-fetch-error": 41}, "kafka-4.3": {"wrong-fetch-error": 9}})
    assert kip_evidence(bug, PROFILES, control) is True and status(bug, PROFILES, control) == "caught"
    weak = {**bug, "counts": {"kip": {"wrong-fetch-error": 40}, "kafka-4.3": {"wrong-fetch-error": 9}}}
    assert kip_evidence(weak, PROFILES, control) is False
    assert status(weak, PROFILES, control) == "caught"  # the version's profile decides alone
    assert status({**weak, "flagged": {"kip": ["wrong-fetch-error"], "kafka-4.3": []}}, PROFILES, control) == \
        "caught under kip only"
    longer = {**bug, "window": 30}  # 41 in 30 s against 40 in 15 s: no more than a healthy Kafka shows
    assert kip_evidence(longer, PROFILES, control) is False
    assert kip_evidence(row(), PROFILES, control) is None  # poll-skip: the control never shows it
    # the control waited past its 15 s for KIP-1166's sample (60 s driven), the bug's window did not (15 s):
    # 11 in 15 s is above the control's 40 in 60 s, 10 is not; nominal windows alone would say 11 <= 40
    waited = {**control, "driven": 60.0}
    assert kip_evidence({**bug, "driven": 15.0, "counts": {"kip": {"wrong-fetch-error": 11}}}, PROFILES, waited) is True
    assert kip_evidence({**bug, "driven": 15.0, "counts": {"kip": {"wrong-fetch-error": 10}}}, PROFILES, waited) is False
    matrix = {"kafka_version": "4.3.1", "profiles": PROFILES, "window": 15,
              "rows": [{**control, "status": "valid", "seconds_to_detection": {}},
                       {**weak, "status": "caught", "kafka_method": "m", "rule": "r", "seconds_to_detection": {}}]}
    assert "wrong-fetch-error (40 <= control's 40: not evidence)" in format_markdown(matrix)
    assert restatus(matrix)["rows"][1]["status"] == "caught"


def test_a_second_slip_of_a_family_expects_the_familys_anomaly():
    assert seeded.bug("wrong-fetch-error-case1").anomaly == "wrong-fetch-error"
    assert seeded.bug("hwm-propagation-delay-hwm-check").anomaly == "hwm-propagation-delay"
    assert seeded.bug("wrong-fetch-error").anomaly == "wrong-fetch-error"


def test_the_group_slips_expect_their_own_anomalies_and_short_stays():
    """Each KIP-848 slip (commits, reconciliation, liveness) is flagged by its own name; it shows at an
    assignment or a leave, so its window's subscribers rejoin within seconds, and the control's do too
    when one is in the matrix."""
    assert {b.name: b.anomaly for b in seeded.BUGS if b.rejoin_after_s} == {
        "committed-offset-regression": "committed-offset-regression", "resume-skip": "resume-skip",
        "group-ownership-violation": "group-ownership-violation", "slow-rebalance": "slow-rebalance"}
    short = seeded.bug("resume-skip").rejoin_after_s
    assert max(short) < 6.0 / 2  # two stays fit in the suite's short window
    assert window_rejoin("resume-skip", ["poll-skip", "resume-skip"]) == short
    assert window_rejoin("poll-skip", ["poll-skip", "resume-skip"]) is None
    assert window_rejoin(CONTROL, ["poll-skip", "resume-skip"]) == short
    assert window_rejoin(CONTROL, ["poll-skip"]) is None


def test_the_ownership_slips_subscribers_pause_between_memberships_and_the_control_with_them_only_alone():
    """group-ownership-violation fires only when a newcomer's target takes a partition another member holds:
    its subscribers stay out long enough for the members still there to take the freed partitions (the
    selftest's 2 s heartbeat plus Kafka 4.3's 1 s assignment interval). The control pauses so only when its
    stays are that slip's (alone in the matrix); the commit slips' windows and stays keep rejoining at once."""
    own = "group-ownership-violation"
    assert seeded.bug(own).rejoin_gap_s > 2.0 + 1.0
    assert [b.name for b in seeded.BUGS if b.rejoin_gap_s] == [own]
    assert window_rejoin_gap(own, [own]) == seeded.bug(own).rejoin_gap_s
    assert window_rejoin_gap(CONTROL, [own]) == seeded.bug(own).rejoin_gap_s
    assert window_rejoin_gap(CONTROL, [own, "resume-skip"]) == 0.0  # the control takes resume-skip's stays
    assert window_rejoin_gap(CONTROL, ["poll-skip"]) == 0.0
    assert window_rejoin_gap("resume-skip", [own, "resume-skip"]) == 0.0


def test_the_slow_rebalance_window_outlasts_the_selftest_clusters_bound(tmp_path):
    """slow-rebalance is judged only once a member stayed past a freeing's deadline: the bound the
    selftest brokers' group timeouts give (as recorded and read back by the checker) must leave most
    of its window to freeings, and Kafka's own 50 s would not fit it."""
    from kipcheck.checks.recovery import group_liveness_rule
    from kipcheck.harness.backends.node import consumer_group_settings
    from kipcheck.rundir import config as run_config
    settings = consumer_group_settings(dict(SELFTEST_GROUP_CONFIG))
    run_config.write(tmp_path, run_config.RunConfig(consumer_groups=settings))
    bound_s = group_liveness_rule(tmp_path).bound_ns / 1e9
    window = seeded.bug("slow-rebalance").min_window
    assert bound_s == 22.0 and window >= bound_s + 15  # the first leaves come within seconds of the window's start
    assert group_liveness_rule(None).bound_ns / 1e9 == 50.0 > window - 15
    from kipcheck.harness.clients.commits import COMMITTED_TIMEOUT_S  # a subscriber's longest stall in a callback
    assert settings["session_timeout_ms"] / 1e3 > COMMITTED_TIMEOUT_S + settings["heartbeat_interval_ms"] / 1e3
    config = dict(SELFTEST_GROUP_CONFIG)  # Kafka refuses a session timeout or heartbeat below its minimum
    assert int(config["group.consumer.session.timeout.ms"]) >= int(config["group.consumer.min.session.timeout.ms"])
    assert int(config["group.consumer.heartbeat.interval.ms"]) >= int(config["group.consumer.min.heartbeat.interval.ms"])
    assert int(config["group.consumer.heartbeat.interval.ms"]) < int(config["group.consumer.session.timeout.ms"])


def test_each_share_rule_has_one_slip_on_the_share_workload():
    """Issue 31 §4: one seeded slip per KIP-932 anomaly, flagged by its own name; its window runs share consumers."""
    share = [b for b in seeded.BUGS if b.workload == SHARE]
    assert sorted(b.anomaly for b in share) == sorted([*SHARE_ANOMALIES, SHARE_SESSION_ANOMALY])
    assert all(b.name == b.anomaly and b.clients for b in share)


def test_the_control_runs_the_share_workload_and_length_of_a_share_slip_in_the_matrix():
    """With a share slip in the matrix the control runs the share consumers too (beside the default
    workload's clients), for at least as long, so that a healthy Kafka is judged by the share rules as well."""
    slip = next(b for b in seeded.BUGS if b.workload == SHARE)
    assert window_workload(CONTROL, ["poll-skip", slip.name]) == SHARE
    assert window_workload(CONTROL, ["poll-skip", "aborted-read"]) == "default"  # the txn slips' control stays default
    assert window_workload(slip.name, [slip.name]) == SHARE and window_workload("poll-skip", [slip.name]) == "default"
    assert window_seconds(CONTROL, ["poll-skip", slip.name], 6.0) == max(6.0, slip.min_window)
    assert window_seconds(CONTROL, ["poll-skip", "aborted-read"], 6.0) == 6.0  # the control runs no txn workload
    assert window_seconds("aborted-read", ["aborted-read"], 6.0) == seeded.bug("aborted-read").min_window
    assert window_seconds(CONTROL, [slip.name], 90.0) == 90.0


def test_switch_writes_the_bug_name_and_refuses_unknown_ones(tmp_path):
    control = tmp_path / "control"
    seeded.switch(control, "duplicate")
    assert control.read_text() == "duplicate"
    seeded.switch(control, None)
    assert control.read_text() == ""
    try:
        seeded.switch(control, "meteor")
    except Exception as e:
        assert "meteor" in str(e) and "duplicate" in str(e)
    else:
        raise AssertionError("an unknown bug must be refused")


def test_reports_are_merged_across_brokers(tmp_path):
    for i, fired in enumerate(({"poll-skip": 2}, {"poll-skip": 3, "duplicate": 1})):
        d = tmp_path / f"node-{i}"
        d.mkdir()
        (d / seeded.REPORT_NAME).write_text(
            '{"active": "poll-skip", "installed": {"poll-skip": "x.read"}, "missing": {}, "fired": %s}'
            % str(fired).replace("'", '"'))
    merged = seeded.read_reports([tmp_path / "node-0", tmp_path / "node-1", tmp_path / "absent"])
    assert merged["fired"] == {"poll-skip": 5, "duplicate": 1}
    assert merged["nodes"] == 2 and merged["installed"] == {"poll-skip": "x.read"}


def test_broker_jvm_args_reach_the_command_line_with_the_node_dir(tmp_path):
    from kipcheck.harness.backends.kafka_dist import KafkaDistribution
    from kipcheck.harness.backends.network import Host
    from kipcheck.harness.backends.node import KafkaNode, NodeSpec
    spec = NodeSpec(1, ("broker", "controller"), "rack-1", Host("n1", "127.0.0.1", None), 1, 2, 3)
    node = KafkaNode(spec, tmp_path, KafkaDistribution("4.3.1", (), "java"), None, "u", "1@127.0.0.1:2",
                     jvm_args=("-javaagent:a.jar=report={node_dir}/r.json", "-Dx=1"))
    opts = node._jvm_opts()
    assert opts[-2:] == (f"-javaagent:a.jar=report={tmp_path / 'node-1'}/r.json", "-Dx=1")


def test_cli_takes_repeated_broker_jvm_args():
    from kipcheck.harness.cli import build_parser
    args = build_parser().parse_args(["run", "--broker-jvm-arg=-Da=1", "--broker-jvm-arg=-Db=2"])
    assert args.broker_jvm_args == ["-Da=1", "-Db=2"]
    args = build_parser().parse_args(["cluster", "up", "--broker-jvm-arg=-Da=1"])
    assert args.broker_jvm_args == ["-Da=1"]


def test_selftest_with_an_unknown_bug_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "selftest", "--bugs", "meteor", "--runs-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "meteor" in proc.stderr
    assert not any(tmp_path.iterdir())
