"""Each history anomaly: a hand-made history that must be flagged, and a near-identical
valid one that must pass. Plus the verdict's shape and the linearisation search."""
from kipcheck.checks import linearize
from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.history_rules import PartitionHistoryRule
from kipcheck.checks.verdict import ANOMALY_NAMES


class H:
    """A tiny history builder: indices and times in call order."""

    def __init__(self):
        self.records = []

    def _add(self, process, type_, f, value):
        i = len(self.records)
        self.records.append({"index": i, "time": i * 10, "process": process, "type": type_,
                             "f": f, "value": value})
        return self

    def invoke_send(self, proc, value, p=0):
        return self._add(proc, "invoke", "send", {"topic": "t", "partition": p, "value": value})

    def end_send(self, proc, value, offset=None, p=0, type_="ok"):
        v = {"topic": "t", "partition": p, "value": value}
        if offset is not None:
            v["offset"] = offset
        return self._add(proc, type_, "send", v)

    def send(self, proc, value, offset, p=0):
        return self.invoke_send(proc, value, p).end_send(proc, value, offset, p)

    def poll(self, proc, *recs):
        self._add(proc, "invoke", "poll", {"topic": "t"})
        return self._add(proc, "ok", "poll", {"records": [["t", p, o, v] for p, o, v in recs]})

    def assign(self, proc, *parts):
        v = {"partitions": [["t", p] for p in parts], "seek_to_beginning": True}
        return self._add(proc, "invoke", "assign", v)._add(proc, "ok", "assign", v)


def flagged(h: H) -> dict:
    v = check_records(h.records)
    return {name: ex for name, ex in v["anomalies"].items() if ex}


def base() -> H:
    return H().send(0, "a", 0).send(0, "b", 1).send(0, "c", 2)


def test_valid_base_passes_with_every_name_present():
    v = check_records(base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c")).records)
    assert v["valid"] is True
    assert set(ANOMALY_NAMES) <= set(v["anomalies"]) and set(ANOMALY_NAMES) <= set(v["known"])
    assert v["counts"]["records"] == 8 and v["counts"]["by_f"] == {"send": 6, "poll": 2}


def test_no_reads_is_unknown():
    v = check_records(base().records)
    assert v["valid"] == "unknown" and "no reads" in v["unknown"][0]["message"]


def test_lost_write():
    lost = base().poll(9, (0, 0, "a"), (0, 2, "c"))
    found = flagged(lost)
    assert set(found) >= {"lost-write"}
    assert found["lost-write"][0]["indices"] == [2, 3, 7] and found["lost-write"][0]["offset"] == 1
    # the same reads stopping before offset 1 prove nothing
    assert flagged(base().poll(9, (0, 0, "a"))) == {}


def test_info_send_never_read_is_not_lost():
    h = base().invoke_send(1, "x").end_send(1, "x", type_="info")
    assert flagged(h.poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"))) == {}


def test_duplicate():
    h = base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "a"))
    assert set(flagged(h)) == {"duplicate"}
    assert flagged(base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "d"))) == {}


def test_inconsistent_offset():
    h = base().poll(9, (0, 0, "a"), (0, 1, "B"), (0, 2, "c"))
    found = flagged(h)
    assert "inconsistent-offset" in found and found["inconsistent-offset"][0]["offset"] == 1
    assert flagged(base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"))) == {}


def test_nonmonotonic_poll():
    h = base().poll(9, (0, 0, "a"), (0, 1, "b")).poll(9, (0, 1, "b"), (0, 2, "c"))
    assert set(flagged(h)) == {"nonmonotonic-poll"}
    # the same re-read after an assign is fine: continuity restarts
    ok = base().poll(9, (0, 0, "a"), (0, 1, "b")).assign(9, 0).poll(9, (0, 1, "b"), (0, 2, "c"))
    assert flagged(ok) == {}


def test_poll_skip():
    h = base().poll(9, (0, 0, "a")).poll(9, (0, 2, "c"))
    assert set(flagged(h)) == {"poll-skip", "lost-write"} or "poll-skip" in flagged(h)
    # offset 1 is proven by another reader: a pure poll-skip
    h2 = base().poll(8, (0, 1, "b")).poll(9, (0, 0, "a")).poll(9, (0, 2, "c"))
    assert set(flagged(h2)) == {"poll-skip"}
    assert flagged(base().poll(9, (0, 0, "a")).poll(9, (0, 1, "b"), (0, 2, "c"))) == {}


def test_gap_not_proven_to_exist_is_no_skip():
    # offsets 1 and 2 were never acknowledged nor read elsewhere: nothing proves them
    h = H().send(0, "a", 0).send(0, "d", 3).poll(9, (0, 0, "a")).poll(9, (0, 3, "d"))
    assert flagged(h) == {}


def test_first_read_may_start_anywhere_and_partitions_are_separate():
    h = base().send(0, "x", 0, p=1).poll(9, (0, 2, "c"), (1, 0, "x")).poll(9, (0, 0, "a"), (0, 1, "b"))
    # process 9 went back on partition 0 only
    found = flagged(h)
    assert set(found) == {"nonmonotonic-poll"} and found["nonmonotonic-poll"][0]["partition"] == 0


def test_send_order_inversion_is_flagged():
    # "b" is called after "a" was acknowledged at offset 1, yet lands at offset 0
    h = H().send(0, "a", 1).send(1, "b", 0).poll(9, (0, 0, "b"), (0, 1, "a"))
    found = flagged(h)
    assert set(found) == {"inconsistent-offset"} and "rewritten" in found["inconsistent-offset"][0]["message"]


def test_concurrent_sends_may_land_in_either_order():
    h = (H().invoke_send(0, "a").invoke_send(1, "b").end_send(0, "a", 1).end_send(1, "b", 0)
         .poll(9, (0, 0, "b"), (0, 1, "a")))
    assert flagged(h) == {}


def test_info_send_seen_by_a_read_happened_at_that_offset():
    # "x" timed out, then "a" was called and acknowledged at 1; x read at 2 is fine
    h = (H().invoke_send(1, "x").end_send(1, "x", type_="info").send(0, "a", 0).send(0, "b", 1)
         .poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "x")))
    assert flagged(h) == {}
    # but a read showing x below an acknowledged offset that x was called after is not
    h = (H().send(0, "a", 0).send(0, "b", 1).invoke_send(1, "x").end_send(1, "x", type_="info")
         .poll(9, (0, 0, "x"), (0, 1, "b")))
    assert "inconsistent-offset" in flagged(h)


def test_budget_exhaustion_makes_the_verdict_unknown():
    h = (H().invoke_send(0, "a").invoke_send(1, "b").end_send(0, "a", 1).end_send(1, "b", 0)
         .poll(9, (0, 0, "b"), (0, 1, "a")))
    v = check_records(h.records, rules=[PartitionHistoryRule(budget=1)])
    assert v["valid"] == "unknown" and "budget" in v["unknown"][0]["message"]


# --- the WGL search on its own, with a register -------------------------------------------

def register():
    def step(state, op):
        kind, x = op.input
        if kind == "w":
            return (x,)
        return (state,) if state == x else ()
    return linearize.Model(0, step)


def test_wgl_register():
    ok = [linearize.Op(0, 0, 10, ("w", 1)), linearize.Op(1, 5, 15, ("r", 1)), linearize.Op(2, 20, 30, ("r", 1))]
    assert linearize.check(ok, register()).ok is True
    stale = [linearize.Op(0, 0, 10, ("w", 1)), linearize.Op(1, 11, 15, ("r", 0))]
    assert linearize.check(stale, register()).ok is False
    # an info write (ret = inf) may take effect late: a read of 0 after its call is fine
    maybe = [linearize.Op(0, 0, linearize.INF, ("w", 1)), linearize.Op(1, 11, 15, ("r", 0))]
    assert linearize.check(maybe, register()).ok is True


def test_wgl_budget_gives_none():
    ops = [linearize.Op(i, 0, 100, ("w", i)) for i in range(8)] + [linearize.Op(8, 200, 300, ("r", 99))]
    res = linearize.check(ops, register(), budget=50)
    assert res.ok is None and "budget" in res.reason
    assert linearize.check(ops, register()).ok is False


def test_windows_cut_at_quiescence():
    ops = [linearize.Op(0, 0, 10), linearize.Op(1, 5, 20), linearize.Op(2, 30, 40)]
    assert [[o.id for o in w] for w in linearize.windows(ops)] == [[0, 1], [2]]


def test_profile_from_config_and_api(tmp_path):
    import json as _json
    from kipcheck.checks.api import check
    from kipcheck.rundir.history import write_jsonl
    from kipcheck.checks.profiles import choose_profile

    write_jsonl(base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c")).records, tmp_path / "history.jsonl")
    assert choose_profile(tmp_path) == "kip"  # no config.json
    (tmp_path / "config.json").write_text(_json.dumps({"kafka_version": "4.3.1"}))
    expected = "kafka-4.3" if "kafka-4.3" in __import__("kipcheck.checks.profiles").checks.profiles.known_profiles() else "kip"
    assert choose_profile(tmp_path) == expected
    assert choose_profile(tmp_path, "kip") == "kip"
    v = check(tmp_path)
    assert v["valid"] is True and v["profile"] == expected


def _written_twice_around_timeouts(timed_out_by: str) -> H:
    """"x" (producer-1) acknowledged after two sends of `timed_out_by` timed out, and read twice."""
    h = base()
    for proc, value, producer in ((3, "x", "producer-1"), (4, "t1", timed_out_by), (5, "t2", timed_out_by)):
        h._add(proc, "invoke", "send", {"topic": "t", "partition": 0, "value": value, "producer": producer})
    for proc, value in ((4, "t1"), (5, "t2")):
        h._add(proc, "info", "send", {"topic": "t", "partition": 0, "value": value, "producer": timed_out_by})
    h._add(3, "ok", "send", {"topic": "t", "partition": 0, "value": "x", "offset": 4, "producer": "producer-1"})
    return h.poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "x"), (0, 4, "x"))


def test_a_duplicate_names_its_producer_and_the_timeouts_that_point_at_an_epoch_bump():
    """The 3.3.2 finding (docs/releases.md): a value written twice after the same producer's
    other sends to the partition timed out is attributed to that producer, with the count."""
    (dup,) = flagged(_written_twice_around_timeouts("producer-1"))["duplicate"]
    assert dup["sender"] == {"producer": "producer-1", "send_index": 6, "in_flight_s": 0.0,
                             "timed_out_meanwhile": 2}
    assert "sent by producer-1" in dup["message"] and "2 of its sends" in dup["message"]
    # another producer's timeouts point at nothing; a history without `producer` names nobody
    (other,) = flagged(_written_twice_around_timeouts("producer-0"))["duplicate"]
    assert other["sender"]["timed_out_meanwhile"] == 0 and "timed out" not in other["message"]
    unnamed = flagged(base().poll(9, (0, 0, "a"), (0, 1, "b"), (0, 2, "c"), (0, 3, "a")))["duplicate"][0]
    assert "sender" not in unnamed and "sent by" not in unnamed["message"]


def test_read_before_its_send_was_called_is_uncommitted():
    """`kip392.sent_before_read` at its edge: the poll ends one record before the send's
    invoke (flagged, naming both), or the send is invoked one record before the poll ends
    (accepted: the record may have been written and committed meanwhile)."""
    early = H().send(0, "a", 0)
    early._add(9, "invoke", "poll", {"topic": "t"})._add(9, "ok", "poll", {"records": [["t", 0, 0, "a"], ["t", 0, 1, "b"]]})
    early.send(1, "b", 1).poll(8, (0, 0, "a"), (0, 1, "b"))
    found = flagged(early)
    assert set(found) == {"uncommitted-read"}
    assert found["uncommitted-read"][0]["indices"] == [3, 4]
    assert found["uncommitted-read"][0]["rule"] == "kip392.records_committed"

    just_in_time = H().send(0, "a", 0)
    just_in_time._add(9, "invoke", "poll", {"topic": "t"}).invoke_send(1, "b")
    just_in_time._add(9, "ok", "poll", {"records": [["t", 0, 0, "a"], ["t", 0, 1, "b"]]}).end_send(1, "b", 1)
    just_in_time.poll(8, (0, 0, "a"), (0, 1, "b"))
    assert flagged(just_in_time) == {}
