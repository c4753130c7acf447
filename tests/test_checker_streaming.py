"""The streaming pieces of the checker give the answers of the plain ones: the spilling
local engine, the rules' record projections (`split`), the fast JSON decoder and the fast
validation path."""
import copy
import json
from pathlib import Path

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.rundir.history import HistoryError, loads, validate
from kipcheck.checks.rules.base import BaseRule
from kipcheck.checks.rules.history_rules import PartitionHistoryRule
from tests.synthetic import generate
from kipcheck.checks.verdict import Dispatch, comparable, default_rules, group_keys, run_rule


def broken(records):
    """A few anomalies of different kinds (as in test_engines_agree)."""
    records = copy.deepcopy(records)
    polls = [r for r in records if r["f"] == "poll" and r["type"] == "ok" and len(r["value"]["records"]) > 2]
    polls[0]["value"]["records"][1][3] = "forged"  # inconsistent-offset
    polls[-1]["value"]["records"].append(list(polls[-1]["value"]["records"][0]))  # nonmonotonic-poll
    del polls[len(polls) // 2]["value"]["records"][1]  # maybe a poll-skip
    return records


class WholeGroups(BaseRule):
    """The history rule without `start` (BaseRule's `streams = False`): the local engine holds
    its groups (in pickled chunks, spilled past the byte bound) and judges each whole."""

    anomalies = PartitionHistoryRule.anomalies

    def __init__(self, one_pass):
        self.rule = PartitionHistoryRule()
        self.one_pass = one_pass

    def group_keys(self, record):
        return self.rule.group_keys(record)

    def split(self, record):
        return self.rule.split(record)

    def check_group(self, key, records, profile):
        assert self.one_pass or isinstance(records, list)
        return self.rule.check_group(key, records, profile)


@pytest.mark.parametrize("seed, mutate", [(11, False), (12, True), (13, True)])
def test_spilling_engine_gives_the_in_memory_verdict(tmp_path, seed, mutate):
    records = list(generate(4000, seed=seed, partitions=5))
    if mutate:
        records = broken(records)
    in_memory = check_records(records)
    assert in_memory["valid"] is (not mutate)
    for one_pass in (False, True):
        rules = [WholeGroups(one_pass), *default_rules()[1:]]
        for limit in (1, 97, 5000, 10**9):  # spill after every record, now and then, rarely, never
            spilled = check_records(records, rules, max_bytes=limit, spill_dir=str(tmp_path))
            assert comparable(spilled) == comparable(in_memory), limit
    assert not list(tmp_path.iterdir())  # spill files are removed


def test_streaming_judge_is_check_group():
    """`start`/`add`/`finish` (the local engine's way) give `check_group`'s anomalies."""
    rule = PartitionHistoryRule()
    records = broken(list(generate(3000, seed=8, partitions=3)))
    groups = {}
    for r in records:
        for k, part in rule.split(r):
            groups.setdefault(k, []).append(part)
    for k, parts in groups.items():
        judge = rule.start(k, "kip")
        for p in parts:
            judge.add(p)
        assert judge.finish() == rule.check_group(k, parts, "kip")


def test_split_gives_the_group_keys_and_the_same_judgement():
    """`split` names exactly the keys of `group_keys`, and judging the projected records
    gives the anomalies of judging the whole records."""
    rule = PartitionHistoryRule()
    records = broken(list(generate(3000, seed=5, partitions=4)))
    records.append({"index": 10**6, "time": 10**9, "process": 99, "type": "ok", "f": "poll",
                    "value": {"records": [[7, 0, 0, "odd topic"], ["t", 0, 3, {"x": 1}]]}})
    records.append({"index": 10**6 + 1, "time": 10**9, "process": 99, "type": "ok", "f": "seek",
                    "value": {"topic": "t", "partition": 1, "offset": 0}})
    whole, parts = {}, {}
    for r in records:
        split = rule.split(r)
        assert [k for k, _ in split] == group_keys(rule, r)
        for k in group_keys(rule, r):
            whole.setdefault(k, []).append(r)
        for k, part in split:
            parts.setdefault(k, []).append(part)
    assert whole.keys() == parts.keys()
    for k in whole:
        assert run_rule(rule, k, whole[k], "kip") == run_rule(rule, k, parts[k], "kip")
        assert run_rule(rule, k, whole[k], "kip") == run_rule(rule, k, iter(parts[k]), "kip")  # one_pass


def test_keyed_covers_every_rule():
    rules = default_rules()
    keyed = Dispatch(rules).keyed
    for r in generate(500, seed=3):
        got = sorted((i, k) for i, k, _ in keyed(r))
        assert got == sorted((i, k) for i, rule in enumerate(rules) for k in group_keys(rule, r))


@pytest.mark.parametrize("text", [
    '{"a":1,"a":2}', "1e400", "[NaN]", "123456789012345678901234567890", "-9223372036854775809",
    "18446744073709551616", '{"v":"\\ud800"}', "-0.0", '{"x":1.0,"y":[true,null,"é"]}',
    '"9999999999999999999"'])
def test_loads_is_json_loads(text):
    a, b = loads(text), json.loads(text)
    assert json.dumps(a) == json.dumps(b) and type(a) is type(b)
    assert loads(text.encode()) is not None or b is None


@pytest.mark.parametrize("text", ['{"a":', "{'a': 1}", "[1,]", "", b'{"a":"\xff"}'])
def test_loads_fails_like_json_loads(text):
    with pytest.raises(Exception) as ours:
        loads(text)
    with pytest.raises(Exception) as theirs:
        json.loads(text)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("record", [
    {"index": True, "time": 1, "process": 0, "type": "ok", "f": "log", "value": {}},
    {"index": 1, "time": 1.5, "process": 0, "type": "ok", "f": "log", "value": {}},
    {"index": 1, "time": 1, "process": "", "type": "ok", "f": "log", "value": {}},
    {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "send", "value": {"topic": "t", "partition": True}},
    {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "poll", "value": {"records": [["t", 0, 1]]}},
    {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "poll", "value": {"records": [["t", False, 1, "v"]]}},
    {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "assign", "value": {}},
    {"index": 1, "time": 1, "process": 0, "type": "done", "f": "log", "value": {}},
])
def test_fast_validation_path_rejects_what_the_full_checks_reject(record):
    with pytest.raises(HistoryError):
        validate(record, "here")
    with pytest.raises(HistoryError):
        validate(dict(record, index=5), "here", previous_index=5)


def test_shown_forms_are_the_first_send_s():
    """Equal values or offsets of other types (`true` / `1` / `1.0`) are shown as the
    first ok send showed them, even when a read showed them first (the one-pass digest
    keeps the rule's sends-first convention)."""
    def rec(i, process, type_, f, value):
        return {"index": i, "time": i * 10, "process": process, "type": type_, "f": f, "value": value}

    records = [
        rec(0, 9, "ok", "assign", {"partitions": [["t", 0]]}),
        rec(1, 9, "ok", "poll", {"records": [["t", 0, 0, True], ["t", 0, 1, "b"]]}),
        rec(2, 1, "invoke", "send", {"topic": "t", "partition": 0, "value": 1}),
        rec(3, 1, "ok", "send", {"topic": "t", "partition": 0, "value": 1, "offset": 0}),
        rec(4, 2, "invoke", "send", {"topic": "t", "partition": 0, "value": "b"}),
        rec(5, 2, "ok", "send", {"topic": "t", "partition": 0, "value": "b", "offset": True}),
        rec(6, 8, "ok", "poll", {"records": [["t", 0, 0, "x"], ["t", 0, 2, 1.0]]}),
    ]
    got = sorted((a.name, a.indices, a.message) for a in
                 PartitionHistoryRule().check_group("t/0", iter(records), "kip"))
    assert got == [
        ("duplicate", (3, 6), "value 1 appears at 2 offsets of t/0: 0 (index 3), 2 (index 6)"),
        ("inconsistent-offset", (3, 6), "t/0 offset 0 holds 2 values: 1 (index 3), 'x' (index 6)"),
        ("poll-skip", (5, 6), "process 8 read t/0 offset 0 (index 6) then offset 2 (index 6), "
                              "skipping offset True which exists (index 5)"),
        ("uncommitted-read", (1, 4), "a poll of t/0 returned offset True ('b') at index 1, before its send was "
                                     "called (index 4): no replica had it, let alone committed it"),
    ]


def test_every_rule_extends_the_declared_contract():
    """The engines call the parts `checks.rules.base.Rule` declares (BaseRule's defaults
    fill the rest) instead of probing a rule with getattr/hasattr; a rule streams (all its
    groups, or the ones its own `streams_group` names) exactly when it gives its own `start`."""
    for rule in default_rules():
        assert isinstance(rule, BaseRule), rule
        streams_some = rule.streams or type(rule).streams_group is not BaseRule.streams_group
        assert streams_some == (type(rule).start is not BaseRule.start), rule
    root = Path(__file__).resolve().parent.parent / "checks"
    for name in ("verdict.py", "engine_local.py", "engine_spark.py"):
        source = (root / name).read_text()
        assert "getattr(rule" not in source and "hasattr(rule" not in source, name
