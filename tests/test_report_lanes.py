"""The report timeline's data (reports/explore.py): one lane per process while there are few,
one per operation kind when pipelined clients make hundreds; every operation is in the
columns the browser aggregates, and every anomaly record is a mark of its own."""
import base64
import random

import numpy as np

from kipcheck.reports.explore import MAX_PROCESS_LANES, flagged_indices, lanes, view_data


def ops(processes: int, kinds=("send",)):
    return [{"f": f, "process": p, "type": "ok", "index": i, "end": 1.0}
            for i, (f, p) in enumerate((f, p) for f in kinds for p in range(processes))]


def test_few_processes_get_a_lane_each():
    lane_of, labels = lanes(ops(3, ("poll", "send")))
    assert labels == ["poll p0", "poll p1", "poll p2", "send p0", "send p1", "send p2"]
    assert len(set(lane_of.values())) == 6


def test_many_processes_share_one_lane_per_kind_and_none_is_dropped():
    many = ops(MAX_PROCESS_LANES, ("send",)) + ops(2, ("poll",))
    lane_of, labels = lanes(many)
    assert labels == ["poll (2 processes)", f"send ({MAX_PROCESS_LANES} processes)"]
    assert all((o["f"], str(o["process"])) in lane_of for o in many)
    assert {lane_of[("send", str(p))] for p in range(MAX_PROCESS_LANES)} == {1}


def timed_ops(n: int, processes: int, seed: int = 1) -> list[dict]:
    """n operations (invoke index 2k, completion 2k+1) of `processes` producers and one consumer."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        start = rng.uniform(0, 600)
        f, process = ("poll", "consumer") if k % 10 == 0 else ("send", rng.randrange(processes))
        out.append({"process": process, "f": f, "type": rng.choice(["ok", "ok", "ok", "info", "fail"]),
                    "start": start, "end": start + rng.uniform(0, 2), "invoke": 2 * k, "index": 2 * k + 1,
                    "value": {"records": [["t", 0, 0, "v"]]} if f == "poll" else {}})
    return out


def column(data: dict, name: str) -> np.ndarray:
    c = data["columns"][name]
    return np.frombuffer(base64.b64decode(c["data"]), dtype=c["dtype"])


def test_every_operation_is_in_the_columns_sorted_for_lookup_by_lane_and_end():
    operations = timed_ops(5000, processes=300)
    data = view_data(operations, [(10.0, 20.0, "kill [3]")], {}, 602.0)
    assert data["labels"] == ["poll (1 processes)", "send (300 processes)"]
    lane, end, index = column(data, "lane"), column(data, "end"), column(data, "index")
    assert data["count"] == len(lane) == 5000
    assert sorted(index.tolist()) == sorted(o["index"] for o in operations)
    assert np.all(np.diff(lane.astype(int)) >= 0)
    for a, b in zip(data["laneStarts"], data["laneStarts"][1:]):
        assert np.all(np.diff(end[a:b]) >= 0)  # the viewer binary-searches a lane by end time
    assert data["faults"] == [{"start": 10.0, "stop": 20.0, "label": "kill [3]"}]


def test_every_anomaly_record_is_a_mark_whether_it_names_the_invoke_or_the_completion():
    operations = timed_ops(20000, processes=3000)
    picked = random.Random(2).sample(operations, 60)
    verdict = {"anomalies": {"lost-write": [{"indices": [o["index"]]} for o in picked[:30]]},
               "known": {"uncommitted-read": [{"indices": [o["invoke"]]} for o in picked[30:]]}}
    data = view_data(operations, [], flagged_indices(verdict), 602.0)
    marks = {m["index"]: m for m in data["marks"]}
    assert set(marks) == {o["index"] for o in picked}
    index = column(data, "index")
    for o in picked[:30]:
        assert marks[o["index"]]["names"] == ["lost-write"] and index[marks[o["index"]]["row"]] == o["index"]
    for o in picked[30:]:
        assert marks[o["index"]]["names"] == ["known uncommitted-read"]
    # an operation named by no proof is not marked
    assert len(data["marks"]) == 60
