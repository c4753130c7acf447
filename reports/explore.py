"""The data behind the report's interactive timeline and latency views (reports/viewer.js).

Every operation goes into the page as columns of numbers (base64 typed arrays), not as
objects: a 10^6-record history is about 5·10^5 operations, 15 bytes each. The browser
aggregates them per pixel at the current zoom (reports/viewer.js), so the page stays fast
and nothing is dropped: anomaly records are drawn on top at every zoom level.

Operations are sorted by (lane, end) so the viewer finds the one under the mouse by
binary search in its lane. Lanes group processes by operation kind (the role: producers
send, consumers poll, the prober fetches ...) when there are too many to show one each.
"""
from __future__ import annotations

import base64
from collections import defaultdict

import numpy as np

from kipcheck.reports.proof import FAULT_MARGIN_S
from kipcheck.rundir.records import COMPLETIONS


#: more (operation, process) lanes than this and the timeline shows one lane per operation
#: kind instead (pipelined producers alone make hundreds of processes); anomalies stay marked
MAX_PROCESS_LANES = 40


def fault_windows(records: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, label) per fault, from the nemesis' start/stop records."""
    open_, windows = {}, []
    for r in records:
        if r["f"] != "fault" or r["type"] != "ok":
            continue
        v = r["value"]
        key = (v.get("fault"), tuple(v.get("targets", [])))
        if v.get("phase") == "start":
            open_[key] = r["time"] / 1e9
        elif v.get("phase") == "stop":
            for k in [k for k in open_ if k[0] == v.get("fault")]:
                windows.append((open_.pop(k), r["time"] / 1e9, f"{k[0]} {list(k[1])}"))
    windows += [(t, end, f"{k[0]} {list(k[1])}") for k, t in open_.items()]
    return sorted(windows)


def operations(records: list[dict]) -> list[dict]:
    """Pair each completion with its invoke (per process and f: a rebalance's assign may nest
    in a poll). `invoke` is the invoke's history index, `index` the completion's."""
    pending, ops = {}, []
    for r in records:
        key = (r["process"], r["f"])
        if r["type"] == "invoke":
            pending[key] = r
        elif key in pending:
            inv = pending.pop(key)
            ops.append({"process": r["process"], "f": r["f"], "type": r["type"], "start": inv["time"] / 1e9,
                        "end": r["time"] / 1e9, "index": r["index"], "invoke": inv["index"], "value": r["value"]})
    return ops


def lanes(ops: list[dict]) -> tuple[dict, list[str]]:
    """{(f, process): lane} and the lane labels: one lane per process when there are few,
    else one per operation kind, labelled with how many processes it holds."""
    keys = sorted({(o["f"], str(o["process"])) for o in ops if o["process"] != "nemesis"},
                  key=lambda x: (x[0], int(x[1]) if x[1].isdigit() else 0))
    if len(keys) <= MAX_PROCESS_LANES:
        return {k: i for i, k in enumerate(keys)}, [f"{f} {'p' * p.isdigit()}{p}" for f, p in keys]
    kinds = sorted({f for f, _ in keys})
    count = {f: sum(1 for g, _ in keys if g == f) for f in kinds}
    lane = {f: i for i, f in enumerate(kinds)}
    return {k: lane[k[0]] for k in keys}, [f"{f} ({count[f]} processes)" for f in kinds]


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")


def _per_second(ops: list[dict], end: float) -> dict:
    """Acknowledged sends and records read per whole second of the run."""
    seconds = int(end) + 1
    sent, read = [0] * seconds, [0] * seconds
    for o in ops:
        if o["type"] != "ok":
            continue
        if o["f"] == "send":
            sent[min(int(o["end"]), seconds - 1)] += 1
        elif o["f"] == "poll":
            read[min(int(o["end"]), seconds - 1)] += len(o["value"].get("records", []))
    return {"sent": sent, "read": read}


def view_data(ops: list[dict], windows, flagged: dict[int, list[str]], end: float,
              liveness: dict | None = None) -> dict:
    """The JSON the viewer draws. `flagged`: history index -> the anomaly names (and
    'known …') whose proofs hold it; an operation is flagged when its invoke or its
    completion is."""
    shown = [o for o in ops if o["process"] != "nemesis"]
    lane_of, labels = lanes(shown)
    kinds = sorted({o["f"] for o in shown})
    kind_of = {f: i for i, f in enumerate(kinds)}
    process_names = sorted({str(o["process"]) for o in shown})
    process_of = {p: i for i, p in enumerate(process_names)}
    n = len(shown)
    start = np.fromiter((o["start"] for o in shown), np.float64, n)
    stop = np.fromiter((o["end"] for o in shown), np.float64, n)
    lane = np.fromiter((lane_of[(o["f"], str(o["process"]))] for o in shown), np.uint16, n)
    order = np.lexsort((stop, lane))
    type_code = {t: i for i, t in enumerate(COMPLETIONS)}
    columns = {
        "start": start[order].astype(np.float32),
        "end": stop[order].astype(np.float32),
        "lane": lane[order],
        "type": np.fromiter((type_code.get(o["type"], 2) for o in shown), np.uint8, n)[order],
        "kind": np.fromiter((kind_of[o["f"]] for o in shown), np.uint8, n)[order],
        "process": np.fromiter((process_of[str(o["process"])] for o in shown), np.uint32, n)[order],
        "index": np.fromiter((o["index"] for o in shown), np.uint32, n)[order],
    }
    position = np.empty(n, np.int64)
    position[order] = np.arange(n)
    marks = []  # flagged operations: never aggregated away
    for i, o in enumerate(shown):
        names = flagged.get(o["index"], []) + flagged.get(o["invoke"], [])
        if names:
            marks.append({"row": int(position[i]), "invoke": o["invoke"], "index": o["index"],
                          "names": sorted(set(names))})
    lane_starts = np.searchsorted(columns["lane"], np.arange(len(labels) + 1)).tolist() if n else [0] * (len(labels) + 1)
    live = liveness or {}
    return {
        "end": end, "count": n, "faultMargin": FAULT_MARGIN_S, "labels": labels, "laneStarts": lane_starts, "kinds": kinds,
        "types": list(COMPLETIONS), "processes": process_names,
        "columns": {k: {"dtype": str(v.dtype), "data": _b64(v)} for k, v in columns.items()},
        "marks": marks,
        "faults": [{"start": a, "stop": b, "label": label} for a, b, label in windows],
        "recoveries": live.get("faults", []), "bound": live.get("bound"),
        "crashes": [{"time": c["time"], "lane": lane_of.get((c.get("f"), str(c.get("process")))),
                     "label": f"{c.get('error', 'fatal')} (process {c.get('process')}, index {c.get('index')})"}
                    for c in live.get("crashes", [])],
        "perSecond": _per_second(shown, end),
    }


def flagged_indices(verdict: dict | None) -> dict[int, list[str]]:
    """History index -> names of the anomalies (and known deviations) whose examples hold it."""
    flagged: dict[int, list[str]] = defaultdict(list)
    for section, prefix in (("anomalies", ""), ("known", "known ")):
        for name, examples in (verdict or {}).get(section, {}).items():
            for ex in examples:
                for i in ex.get("indices", []):
                    flagged[i].append(prefix + name)
    return flagged
