"""Property tests: generated valid histories pass; each mutation is flagged by name."""
import copy

from hypothesis import HealthCheck, assume, given, settings, strategies as st

from kipcheck.checks.engine_local import check_records
from tests.synthetic import generate

histories = st.builds(lambda seed, n, parts: list(generate(n, seed=seed, partitions=parts)),
                      st.integers(0, 2**32 - 1), st.integers(50, 600), st.integers(1, 4))
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def flagged(records) -> set:
    v = check_records(records)
    return {name for name, ex in v["anomalies"].items() if ex}


def acked(records) -> dict:
    """(partition, offset) -> value of acknowledged sends."""
    return {(r["value"]["partition"], r["value"]["offset"]): r["value"]["value"]
            for r in records if r["f"] == "send" and r["type"] == "ok"}


def read_entries(records, final_reader: bool):
    """(record position, entry position) of poll entries, of the final reader or the others."""
    last = records[-1]["process"]
    return [(i, j) for i, r in enumerate(records) if r["f"] == "poll" and r["type"] == "ok"
            and (r["process"] == last) == final_reader for j in range(len(r["value"]["records"]))]


@SETTINGS
@given(histories)
def test_generated_histories_are_valid(records):
    v = check_records(records)
    assert v["valid"] is True, {k: e[:1] for k, e in v["anomalies"].items() if e}


@SETTINGS
@given(histories, st.data())
def test_changed_value_is_inconsistent_offset(records, data):
    ack = acked(records)
    spots = [(i, j) for i, j in read_entries(records, True)
             if tuple(records[i]["value"]["records"][j][1:3]) in ack]
    assume(spots)
    i, j = data.draw(st.sampled_from(spots))
    records = copy.deepcopy(records)
    records[i]["value"]["records"][j][3] = "forged"
    assert "inconsistent-offset" in flagged(records)


@SETTINGS
@given(histories, st.data())
def test_dropped_final_read_is_lost_write(records, data):
    ack = acked(records)
    final = read_entries(records, True)
    tops = {}
    for i, j in final:
        _, p, o, _ = records[i]["value"]["records"][j]
        tops[p] = max(tops.get(p, -1), o)
    spots = [(i, j) for i, j in final if tuple(records[i]["value"]["records"][j][1:3]) in ack
             and records[i]["value"]["records"][j][2] < tops[records[i]["value"]["records"][j][1]]]
    assume(spots)
    i, j = data.draw(st.sampled_from(spots))
    records = copy.deepcopy(records)
    _, p, o, value = records[i]["value"]["records"].pop(j)
    for r in records:  # the value is read nowhere else either
        if r["f"] == "poll" and r["type"] == "ok":
            r["value"]["records"] = [e for e in r["value"]["records"] if e[3] != value]
    assert "lost-write" in flagged(records)


@SETTINGS
@given(histories, st.data())
def test_repeated_value_is_duplicate(records, data):
    final = read_entries(records, True)
    pairs = [(x, y) for x in final for y in final if x < y  # duplicates are per partition
             and records[x[0]]["value"]["records"][x[1]][1] == records[y[0]]["value"]["records"][y[1]][1]]
    assume(pairs)
    (i, j), (k, m) = data.draw(st.sampled_from(pairs))
    records = copy.deepcopy(records)
    a, b = records[i]["value"]["records"][j], records[k]["value"]["records"][m]
    b[3] = a[3]
    assert "duplicate" in flagged(records)


@SETTINGS
@given(histories, st.data())
def test_repeated_read_is_nonmonotonic(records, data):
    polls = [i for i, r in enumerate(records) if r["f"] == "poll" and r["type"] == "ok"
             and r["value"]["records"]]
    assume(polls)
    i = data.draw(st.sampled_from(polls))
    records = copy.deepcopy(records)
    recs = records[i]["value"]["records"]
    recs.append(list(recs[-1]))  # the same offset again, in the same poll
    assert "nonmonotonic-poll" in flagged(records)


@SETTINGS
@given(histories, st.data())
def test_dropped_middle_read_is_poll_skip(records, data):
    ack, spots = acked(records), []
    for i, j in read_entries(records, True) + read_entries(records, False):
        recs = records[i]["value"]["records"]
        if 0 < j < len(recs) - 1 and recs[j - 1][1] == recs[j][1] == recs[j + 1][1] \
                and tuple(recs[j][1:3]) in ack:  # proven to exist by its acknowledgement
            spots.append((i, j))
    assume(spots)
    i, j = data.draw(st.sampled_from(spots))
    records = copy.deepcopy(records)
    records[i]["value"]["records"].pop(j)
    assert "poll-skip" in flagged(records)
