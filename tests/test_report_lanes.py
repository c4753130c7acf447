"""The report timeline: one lane per process while there are few, one per operation kind when
pipelined clients make hundreds (the picture stays readable; every operation keeps a lane)."""
from reports.html import MAX_PROCESS_LANES, _lanes


def ops(processes: int, kinds=("send",)):
    return [{"f": f, "process": p, "type": "ok", "index": i, "end": 1.0}
            for i, (f, p) in enumerate((f, p) for f in kinds for p in range(processes))]


def test_few_processes_get_a_lane_each():
    lane_of, labels = _lanes(ops(3, ("poll", "send")))
    assert labels == ["poll p0", "poll p1", "poll p2", "send p0", "send p1", "send p2"]
    assert len(set(lane_of.values())) == 6


def test_many_processes_share_one_lane_per_kind_and_none_is_dropped():
    many = ops(MAX_PROCESS_LANES, ("send",)) + ops(2, ("poll",))
    lane_of, labels = _lanes(many)
    assert labels == ["poll (2 processes)", f"send ({MAX_PROCESS_LANES} processes)"]
    assert all((o["f"], str(o["process"])) in lane_of for o in many)
    assert {lane_of[("send", str(p))] for p in range(MAX_PROCESS_LANES)} == {1}
