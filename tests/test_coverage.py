"""Rule coverage: which observations count for which KIP rule, the verdict's table, and
--require-coverage turning a thinly exercised valid run into "unknown"."""
import json

import pytest

from kipcheck.checks import coverage
from kipcheck.checks.api import check
from kipcheck.checks.cli_check import main as check_main
from kipcheck.checks.engine_local import check_records
from kipcheck.rundir.history import write_jsonl
from tests.support.histories import consumer_fetch, valid_history


def test_every_counted_rule_is_a_model_rule_with_its_kip_section():
    rules = coverage.model_rules()
    assert set(coverage.OBSERVED) <= set(rules)
    # every rule the checker's rules ask is counted (a rule asking an uncounted one would
    # show "never exercised" while it judges): the model functions named in checks/rules/
    import re
    from pathlib import Path
    asked = {m for f in Path(coverage.__file__).parent.joinpath("rules").glob("*.py")
             for m in re.findall(r"\b(kip(?:392|227|1023|1166|966)\.[a-z_]+)\(", f.read_text())}
    assert len(asked) >= 10, asked
    assert {a for a in asked if a in rules} <= set(coverage.OBSERVED) | NOT_COUNTED
    assert all(meta["kip"].startswith("KIP-") and meta["section"] for meta in rules.values())


#: model rules the checker's rules ask that are parts of a counted one (same observations)
NOT_COUNTED = {"kip227.must_include", "kip227.update_session_partitions", "kip227.after_response",
               "kip227.hwm_changed_since_sent",
               # the size limits and read order `kip227.may_omit` is judged under
               "kip227.size_limits_may_empty_read", "kip227.read_has_room", "kip227.rotate",
               "kip1166.kip_bound_ns", "kip1166.parked_once_bound_ns",
               # the bounds on the replica state `kip392.consumer_fetch_outcomes` is asked about
               "kip392.partition_log_bounds", "kip392.leo_reached_leader_hwm",
               # what else explains an OFFSET_OUT_OF_RANGE -1/-1 it rejects (tiered-read-out-of-range)
               "kip392.tiered_read_out_of_range",
               # a poll's record read before its send: reported as kip392.records_committed
               "kip392.sent_before_read"}


def test_each_observation_counts_for_the_rules_it_could_break():
    plain = coverage.opportunities(consumer_fetch(0, 5, [5], hwm=9)[1])
    assert {"kip392.records_committed", "kip392.consumer_fetch_outcomes", "kip392.hwm_may_go_back",
            "kip227.request_kind", "kip227.observer_outcomes"} <= set(plain)
    assert "kip227.next_epoch" not in plain and "kip392.preferred_read_replica_outcomes" not in plain
    redirected = coverage.opportunities(consumer_fetch(0, 5, [], hwm=9, rack="r2", preferred=3)[1])
    assert "kip392.preferred_read_replica_outcomes" in redirected
    assert "kip392.consumer_fetch_outcomes" not in redirected  # a redirect skips the read
    incremental = coverage.opportunities(consumer_fetch(0, 5, [], hwm=9, session=(77, 3))[1])
    assert {"kip227.next_epoch", "kip227.may_omit"} <= set(incremental)
    assert coverage.opportunities(consumer_fetch(0, 5, [5], hwm=9)[0]) == ()  # an invoke proves nothing


def test_verdict_counts_observations_and_lists_unexercised_rules():
    verdict = check_records(valid_history())
    cov = verdict["coverage"]
    assert verdict["valid"] is True
    assert cov["kip392.records_committed"]["observations"] == 1
    assert cov["kip227.may_be_evicted"]["observations"] == 0  # no session was ever evicted
    assert cov["kip392.reset_offset"]["observations"] is None  # not observable from outside
    assert set(cov) == set(coverage.model_rules())


def test_require_coverage_makes_a_thin_valid_run_unknown(tmp_path):
    write_jsonl(valid_history(), tmp_path / "history.jsonl")
    met = check(tmp_path, require_coverage="kip392.records_committed=1")
    assert met["valid"] is True and met["coverage_required"]["short"] == []
    thin = check(tmp_path, require_coverage="kip392.records_committed=2,kip227.may_be_evicted=1")
    assert thin["valid"] == "unknown"
    assert sorted(thin["coverage_required"]["short"]) == ["kip227.may_be_evicted", "kip392.records_committed"]
    assert any("kip227.may_be_evicted 0" in u["message"] for u in thin["unknown"])
    everything = check(tmp_path, require_coverage="1")
    assert everything["valid"] == "unknown" and "kip227.may_be_evicted" in everything["coverage_required"]["short"]


def test_require_coverage_never_hides_an_anomaly(tmp_path):
    h = valid_history()
    poll = next(r for r in h if r["f"] == "poll" and r["type"] == "ok")
    poll["value"]["records"][1][3] = "forged"  # offset 1 read as another value: inconsistent-offset
    write_jsonl(h, tmp_path / "history.jsonl")
    verdict = check(tmp_path, require_coverage="5")
    assert verdict["valid"] is False and verdict["anomalies"]["inconsistent-offset"]


@pytest.mark.parametrize("spec, words", [("kip392.nope=1", "unknown rule"), ("kip392.reset_offset=1", "not judged"),
                                         ("many", "whole number"), (",", "empty")])
def test_bad_requirement_is_one_line_exit_2(tmp_path, capsys, spec, words):
    write_jsonl(valid_history(), tmp_path / "history.jsonl")
    assert check_main([str(tmp_path), "--require-coverage", spec]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_cli_exit_3_when_coverage_is_short_and_summary_names_unexercised_rules(tmp_path, capsys):
    write_jsonl(valid_history(), tmp_path / "history.jsonl")
    assert check_main([str(tmp_path), "--require-coverage", "kip227.may_be_evicted=1"]) == 3
    out = capsys.readouterr().out
    assert "never:" in out and "kip227.may_be_evicted" in out
    assert check_main([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["coverage"]["kip392.records_committed"]["observations"] == 1


# --- kipcheck run's gate: a reachable rule that decided nothing ----------------------------
MAIN_JOB = {"options": {"probes": True}, "skipped": []}
#: the KIP-848 rules a subscriber reaches (its assignments, the OffsetFetch each makes, its revocations)
GROUP_RULES = ("kip848.handoff_allowed", "kip848.committed_offset_kept", "kip848.resume_within_commits",
               "kip848.reowned_in_time")
#: the KIP-932 rules a share consumer reaches (only `--workload share` has them)
SHARE_RULES = ("kip932.exclusive_acquisition", "kip932.accepted_not_redelivered", "kip932.delivery_count_allowed",
               "kip932.available_record_delivered", "kip932.share_session_answer")
#: the coordinator's view: only consumer-protocol subscribers' groups are described
DESCRIBE_RULE = "kip848.assigned_to_one_member"
KIP848_MEMBERS = {"consumers": 2, "consumer_modes": ["subscribe"], "group_protocol": "consumer"}


def test_every_judged_rule_says_what_makes_it_reachable():
    assert set(coverage.REACHED_BY) == set(coverage.OBSERVED)


@pytest.mark.parametrize("config, absent, present", [
    (MAIN_JOB, {*SHARE_RULES, DESCRIBE_RULE}, set(coverage.OBSERVED) - {*SHARE_RULES, DESCRIBE_RULE}),
    ({**MAIN_JOB, "workload": {"workload": "share", "share_consumers": 3}}, {DESCRIBE_RULE},
     set(coverage.OBSERVED) - {DESCRIBE_RULE}),
    ({**MAIN_JOB, "workload": KIP848_MEMBERS}, set(SHARE_RULES), {DESCRIBE_RULE, *GROUP_RULES}),
    ({**MAIN_JOB, "workload": {**KIP848_MEMBERS, "group_protocol": "classic"}}, {DESCRIBE_RULE}, set(GROUP_RULES)),
    ({**MAIN_JOB, "workload": {**KIP848_MEMBERS, "consumer_modes": ["assign"]}}, {DESCRIBE_RULE, *GROUP_RULES},
     {"kip32.append_time_allowed"}),
    ({**MAIN_JOB, "workload": KIP848_MEMBERS, "skipped": [{"key": "observer.group_describe"}]}, {DESCRIBE_RULE},
     set(GROUP_RULES)),
    ({"options": {"probes": False}, "workload": KIP848_MEMBERS}, {DESCRIBE_RULE}, set(GROUP_RULES)),
    ({**MAIN_JOB, "workload": {"workload": "share", "share_consumers": 0}}, set(SHARE_RULES), {"kip227.may_omit"}),
    ({**MAIN_JOB, "skipped": [{"key": "prober.list_offsets@-4"}]}, {"kip1023.offset_order"}, {"kip227.may_omit"}),
    # the metadata log is read after every run, probes or not; the consumers' polls carry the stamps
    ({"options": {"probes": False}}, set(coverage.OBSERVED) - {"kip966.may_lead", "kip32.append_time_allowed",
                                                                "kip455.completion_allowed", *GROUP_RULES},
     {"kip966.may_lead", "kip32.append_time_allowed", "kip455.completion_allowed", *GROUP_RULES}),
    ({**MAIN_JOB, "skipped": [{"key": "workload.log_append_time"}]}, {"kip32.append_time_allowed"},
     {"kip392.records_committed"}),
    ({**MAIN_JOB, "workload": {"consumers": 0}}, {"kip32.append_time_allowed", *GROUP_RULES},
     {"kip966.may_lead"}),
    # one consumer cycles to "assign" alone: no group member to hand a partition to, nor commits
    ({**MAIN_JOB, "workload": {"consumers": 1}}, set(GROUP_RULES), {"kip32.append_time_allowed"}),
    ({**MAIN_JOB, "skipped": [{"key": "harness.metadata_log"}]}, {"kip966.may_lead", "kip455.completion_allowed"},
     {"kip392.records_committed"}),
    ({**MAIN_JOB, "skipped": [{"key": "observer.metadata_propagation"}, {"key": "consumer.follower_fetching"}]},
     {"kip1166.propagation_statistic", "kip392.preferred_read_replica_outcomes"}, {"kip392.records_committed"}),
])
def test_the_run_set_up_decides_which_rules_are_reachable(config, absent, present):
    reachable = set(coverage.reachable(config))
    assert not reachable & absent and present <= reachable


def test_a_valid_run_whose_reachable_rule_decided_nothing_is_unknown():
    verdict = check_records(valid_history())
    assert verdict["valid"] is True and verdict["coverage"]["kip227.may_be_evicted"]["observations"] == 0
    gated = coverage.require_reachable(verdict, MAIN_JOB)
    assert gated["valid"] == "unknown" and "kip227.may_be_evicted" in gated["uncovered"]
    assert any("kip1166.propagation_statistic (no observation)" in u["message"] for u in gated["unknown"])
    # with nothing reachable (no probes) the same history stays valid
    nothing = {"options": {"probes": False}, "workload": {"consumer_modes": ["assign"]},
               "skipped": [{"key": "harness.metadata_log"}, {"key": "workload.log_append_time"}]}
    assert coverage.require_reachable(check_records(valid_history()), nothing)["valid"] is True


def test_the_gate_never_hides_an_anomaly():
    h = valid_history()
    poll = next(r for r in h if r["f"] == "poll" and r["type"] == "ok")
    poll["value"]["records"][1][3] = "forged"
    gated = coverage.require_reachable(check_records(h), MAIN_JOB)
    assert gated["valid"] is False and gated["anomalies"]["inconsistent-offset"]


def test_a_reachable_rule_not_demanded_leaves_a_valid_run_valid_but_not_asked():
    """KIP-848's handoffs are reachable with subscribers, but a run whose subscribers were never
    given a partition stays valid; every other reachable rule is still demanded."""
    assert set(coverage.NOT_DEMANDED) <= set(coverage.OBSERVED)
    verdict = check_records(valid_history())
    assert verdict["coverage"]["kip848.handoff_allowed"]["observations"] == 0
    assert "kip848.handoff_allowed" in coverage.reachable(MAIN_JOB)
    gated = coverage.require_reachable(verdict, MAIN_JOB)
    assert "kip848.handoff_allowed" not in gated["uncovered"] and "kip227.may_be_evicted" in gated["uncovered"]
