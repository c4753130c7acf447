"""poll-skip of a raw fetch: Kafka reads from the batch holding the fetch offset, so an answer
whose first data record lies above an offset proven to exist skipped it (history_rules.point_skips).
Flagged one offset past the bound, accepted at it; judged alike whole and split into groups."""
from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.history_rules import PartitionHistoryRule

RULE = PartitionHistoryRule()


def _sends(*offsets):
    out = []
    for o in offsets:
        for t in ("invoke", "ok"):
            out.append({"process": 1, "type": t, "f": "send",
                        "value": {"topic": "t", "partition": 0, "value": f"v{o}", **({"offset": o} if t == "ok" else {})}})
    return out


def _fetch(offset, first, log_start=0, error="NONE", last=None):
    recs = [[o, f"v{o}"] for o in range(first, (last if last is not None else first + 2) + 1)] if first is not None else []
    value = {"broker": 2, "replica_id": -1, "topic": "t", "partition": 0, "fetch_offset": offset}
    return [{"process": 0, "type": "invoke", "f": "fetch", "value": value},
            {"process": 0, "type": "ok", "f": "fetch",
             "value": {**value, "error": error, "high_watermark": 10, "log_start_offset": log_start, "records": recs}}]


def _history(*parts):
    out = [r for part in parts for r in part]
    for i, r in enumerate(out):
        r["index"], r["time"] = i, i * 10
    return out


def skips(records) -> list[dict]:
    return check_records(records, rules=[RULE])["anomalies"]["poll-skip"]


def skips_split(records) -> list[dict]:
    """The same judged as the Spark engine feeds it: each record split into its groups' parts."""
    judges = {}
    for r in records:
        for key, part in RULE.split(r):
            judges.setdefault(key, RULE.start(key, "kip")).add(part)
    return [a for j in judges.values() for a in j.finish() if a.name == "poll-skip"]


def test_a_fetch_starting_one_past_a_proven_offset_is_a_skip():
    h = _history(_sends(0, 1, 2, 3, 4), _fetch(2, 3))
    found = skips(h)
    assert [(a["skipped"], a["fetch_offset"], a["to"]) for a in found] == [(2, 2, 3)]
    assert found[0]["indices"] == [5, 11]  # the ok send that proves offset 2, the fetch's answer
    assert [(a.details["skipped"], a.indices) for a in skips_split(h)] == [(2, (5, 11))]


def test_a_fetch_returning_its_own_offset_first_is_no_skip():
    assert skips(_history(_sends(0, 1, 2, 3, 4), _fetch(2, 2))) == []
    # a batch that began below the fetch offset is returned whole: still no skip
    assert skips(_history(_sends(0, 1, 2, 3, 4), _fetch(2, 1))) == []


def test_an_offset_nothing_proves_may_be_a_marker():
    # offset 2 was never acknowledged nor read: a transaction marker may sit there
    h = _history(_sends(0, 1, 3, 4), _fetch(2, 3))
    assert skips(h) == [] and skips_split(h) == []
    # proven by a read instead of a send: flagged again
    assert len(skips(_history(_sends(0, 1, 3, 4), _fetch(0, 0, last=2), _fetch(2, 3)))) == 1


def test_only_an_answer_that_says_the_read_began_at_its_offset():
    proven = _sends(0, 1, 2, 3, 4)
    assert skips(_history(proven, _fetch(2, 3, log_start=3))) == []  # the log starts above it
    assert len(skips(_history(proven, _fetch(2, 3, log_start=2)))) == 1  # at it: flagged
    assert skips(_history(proven, _fetch(2, 3, error="OFFSET_OUT_OF_RANGE"))) == []
