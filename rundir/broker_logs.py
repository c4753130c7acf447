"""The brokers' own words beside each anomaly: the server.log lines around its proof.

An enrichment step over a finished verdict and its run directory (the checker's rules never
read logs, and nothing here talks to a cluster): for each anomaly example (then each known
deviation example, while the budget lasts) it picks, from every node's log
(`cluster/node-N/server.log`, and `controller.log` where a node has one), the entries that name
the example's topic-partitions (Kafka writes `kipcheck-2`, `[Partition kipcheck-2 broker=1]`,
`[UnifiedLog partition=kipcheck-2, ...]`) or its transactional ids, whose time falls within
`WINDOW_S` of the proof records, and adds them to the example as `broker_logs`
(docs/checker.md, docs/report.md):

    {"partitions": ["kipcheck-2"], "window_s": [lo, hi],   # history seconds
     "mapping": {"wall_minus_history_ms": ..., "source": "poll at index N" | "config.json started ..."},
     "matched": n,                                            # entries in the window, all of them
     "lines": [{"node": 2, "time": "2026-11-28 04:01:21,819", "history_s": 12.345,
                "level": "WARN", "text": "..."[, "clock_skew_s": -300]}, ...]}   # in time order

An example with no topic-partition (nor transactional id) gets the WARN and ERROR entries of
the window, of the brokers its proof records name (all nodes when they name none).

Time: log4j writes the node's local wall time (`[%d]`, harness/backends/node.py LOG4J2, ms
resolution), read in the UTC offset config.json's `started` carries (the harness's machine,
which the native and container brokers share). It becomes history time through the
`wall_minus_history_ms` of the poll nearest in history time to the proof (docs/history.md);
without one, history time 0 is taken as config.json's `started` (1 s resolution). A node
under a `clock-skew`/`clock-strobe` fault writes its faked time: an entry of that node
outside the window is also tried moved back by the fault's `skew_s` (while the fault was on,
plus 2 s for libfaketime's reread), and one taken that way says `clock_skew_s`.

Bounds: at most `MAX_LINES` lines per example (WARN/ERROR first, then the entries nearest a
proof record), `MAX_CHARS` characters a line (a stack trace keeps its first `CONTINUATION` lines),
`MAX_TOTAL_LINES` per verdict, spent on the anomalies first, one example of every name per
round, then on the known deviations the same way. The verdict's top-level `broker_logs`
block says what was read and how much was left out.
"""
from __future__ import annotations

import bisect
import calendar
import json
import re
from datetime import datetime
from pathlib import Path

from kipcheck import effects
from kipcheck.rundir import config as run_config
from kipcheck.rundir.history import iter_history, loads, resolve
from kipcheck.rundir.records import JSONL_NAME

FIELD = "broker_logs"
#: seconds before the first and after the last proof record
WINDOW_S = 2.0
#: lines kept per example
MAX_LINES = 40
#: lines kept per verdict, over all examples
MAX_TOTAL_LINES = 1000
#: characters kept of a log entry (its first line and continuation lines)
MAX_CHARS = 500
#: continuation lines (a stack trace, a multi-line message) kept with an entry
CONTINUATION = 3
#: the log files of a node directory
LOG_NAMES = ("server.log", "controller.log")
#: levels that go first
LOUD = ("WARN", "ERROR", "FATAL")
#: seconds libfaketime may take to read a changed clock file (docs/faults.md)
CLOCK_LAG_S = 2.0

_ENTRY = re.compile(r"\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d),(\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_HEAD = re.compile(r'\{"index":\s*(\d+),\s*"time":\s*(\d+)')
_WALL = re.compile(r'"wall_minus_history_ms":\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
_TP_TEXT = re.compile(r"([A-Za-z0-9._-]+)/(\d+)")


def node_logs(run: str | Path) -> list[tuple[int, Path]]:
    """(node id, log file) of a run directory (or of the run a history file belongs to)."""
    p = Path(run)
    cluster = (p if p.is_dir() else p.parent) / "cluster"
    out = []
    for d in sorted(cluster.glob("node-*")) if cluster.is_dir() else ():
        try:
            node = int(d.name.split("-", 1)[1])
        except ValueError:
            continue
        out += [(node, d / name) for name in LOG_NAMES if (d / name).is_file()]
    return sorted(out)


def utc_offset_s(started: str | None) -> int:
    """Seconds east of UTC of the run's local time (config.json `started`, `%z`), else this machine's."""
    try:
        return int(datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").utcoffset().total_seconds())
    except (TypeError, ValueError):
        return int(datetime.now().astimezone().utcoffset().total_seconds())


def started_unix_ms(started: str | None) -> float | None:
    try:
        return datetime.strptime(started, "%Y-%m-%dT%H:%M:%S%z").timestamp() * 1000
    except (TypeError, ValueError):
        return None


def stamp_unix_ms(m: re.Match, offset_s: int) -> int:
    """A log entry's `[%d]` (local time at `offset_s` east of UTC) as Unix ms."""
    y, mo, d, h, mi, s, ms = (int(g) for g in m.groups()[:7])
    return (calendar.timegm((y, mo, d, h, mi, s)) - offset_s) * 1000 + ms


def entries(path: Path):
    """(match of its header, text) of each log entry: the header line and up to CONTINUATION
    lines that follow it without a header of their own, cut to MAX_CHARS."""
    head, text, more = None, "", 0
    with open(path, errors="replace") as f:
        for line in f:
            m = _ENTRY.match(line)
            if m:
                if head is not None:
                    yield head, text
                head, text, more = m, line[m.end():].rstrip("\n")[:MAX_CHARS], 0
            elif head is not None and more < CONTINUATION and len(text) < MAX_CHARS and line.strip():
                text = (text + "\n" + line.rstrip("\n"))[:MAX_CHARS]
                more += 1
    if head is not None:
        yield head, text


def _tp_name(topic, partition) -> str | None:
    if isinstance(topic, str) and topic and isinstance(partition, int) and not isinstance(partition, bool):
        return f"{topic}-{partition}"
    return None


def _from_entry(entry) -> str | None:
    """A topic-partition as `[t, p]`, `{"topic", "partition"}` or `"t/p"`."""
    if isinstance(entry, (list, tuple)) and len(entry) >= 2:
        return _tp_name(entry[0], entry[1])
    if isinstance(entry, dict):
        return _tp_name(entry.get("topic"), entry.get("partition"))
    if isinstance(entry, str):
        m = _TP_TEXT.fullmatch(entry)
        return _tp_name(m.group(1), int(m.group(2))) if m else None
    return None


def partitions_of(example: dict, records: list[dict], topics: set[str]) -> list[str]:
    """The topic-partitions (`topic-N`, Kafka's spelling) an example is about: those its details
    name; else those its message names (`topic/N` of a known topic); else every one its proof
    records name (a send's, a fetch's, a poll's records')."""
    named = {_tp_name(example.get("topic"), example.get("partition"))}
    named |= {_from_entry(example.get(k)) for k in ("topic_partition", "tp")}
    for key in ("partitions", "topic_partitions"):
        if isinstance(example.get(key), list):
            named |= {_from_entry(e) for e in example[key]}
    named.discard(None)
    if named:
        return sorted(named)
    seen = set(topics)
    found: set[str] = set()
    for r in records:
        v = r.get("value") if isinstance(r.get("value"), dict) else {}
        found.add(_tp_name(v.get("topic"), v.get("partition")))
        for e in v.get("partitions") or ():
            found.add(_from_entry(e))
        if r.get("f") == "poll":
            for rec in v.get("records") or ():
                found.add(_from_entry(rec))
        if isinstance(v.get("topic"), str):
            seen.add(v["topic"])
    found.discard(None)
    seen |= {tp.rsplit("-", 1)[0] for tp in found}
    in_message = {f"{t}-{p}" for t, p in _TP_TEXT.findall(str(example.get("message", ""))) if t in seen}
    return sorted(in_message or found)


def transactional_ids(example: dict, records: list[dict]) -> list[str]:
    ids = {r["value"].get("transactional_id") for r in records if isinstance(r.get("value"), dict)}
    ids.add(example.get("transactional_id"))
    return sorted(i for i in ids if isinstance(i, str) and i)


def needle_pattern(needles) -> re.Pattern | None:
    """One regex finding any of the names as a whole word (`kipcheck-2`, not `kipcheck-20`
    nor `kipcheck-2-0`), longest first."""
    if not needles:
        return None
    alternation = "|".join(re.escape(n) for n in sorted(set(needles), key=lambda n: (-len(n), n)))
    return re.compile(rf"(?<![\w.-])({alternation})(?![\w]|[.-]\w)")


class _History:
    """What enrichment needs of a history: the proof records, the poll mappings, clock faults."""

    def __init__(self, path: Path, wanted: set[int]):
        self.records: dict[int, dict] = {}
        self.walls: list[tuple[int, float, int]] = []  # (history ns, wall_minus_history_ms, index)
        clock: list[dict] = []
        self.end = 0
        if path.name == JSONL_NAME or path.suffix == ".jsonl":
            with open(path, "rb") as f:
                for raw in f:
                    line = raw.decode("utf-8", "replace")
                    m = _HEAD.match(line)
                    if m is None:
                        if not line.strip():
                            continue
                        r = loads(line)
                        self._one(r, wanted, clock)
                        continue
                    index, t = int(m.group(1)), int(m.group(2))
                    self.end = max(self.end, t)
                    if index in wanted or ("clock-" in line and '"fault"' in line):
                        self._one(loads(line), wanted, clock)
                    elif "wall_minus_history_ms" in line:
                        w = _WALL.search(line)
                        if w:
                            self.walls.append((t, float(w.group(1)), index))
        else:
            for r in iter_history(path):
                self._one(r, wanted, clock)
        self.walls.sort()
        self.clock = self._clock_windows(clock)

    def _one(self, r: dict, wanted: set[int], clock: list) -> None:
        self.end = max(self.end, r["time"])
        v = r.get("value") if isinstance(r.get("value"), dict) else {}
        if r["index"] in wanted:
            self.records[r["index"]] = r
        if effects.has(r, effects.MOVES_CLOCK):
            clock.append(r)
        elif "wall_minus_history_ms" in v and isinstance(v["wall_minus_history_ms"], (int, float)):
            self.walls.append((r["time"], float(v["wall_minus_history_ms"]), r["index"]))

    def _clock_windows(self, faults: list[dict]) -> dict[int, list[tuple[int, int, float]]]:
        """node -> [(from ns, to ns, skew s)]: from the start's invoke to the stop's completion
        plus CLOCK_LAG_S (to the history's end when it never stopped)."""
        lag = int(CLOCK_LAG_S * 1e9)
        on: dict[tuple, dict] = {}
        spans = []
        for r in sorted(faults, key=lambda r: r["index"]):
            v = r["value"]
            key = (v.get("fault"), v.get("index"))
            if v.get("phase") == "start" and r["type"] == "invoke":
                on[key] = {"from": r["time"]}
            elif v.get("phase") == "start" and r["type"] == "ok":
                on.setdefault(key, {"from": r["time"]}).update(targets=v.get("targets") or [], skew=v.get("skew_s"))
            elif v.get("phase") == "stop" and r["type"] != "invoke" and key in on:
                spans.append({**on.pop(key), "to": r["time"]})
        spans += [{**s, "to": self.end} for s in on.values()]
        out: dict[int, list] = {}
        for s in spans:
            if isinstance(s.get("skew"), (int, float)) and s["skew"]:
                for node in s.get("targets", []):
                    out.setdefault(node, []).append((s["from"], s["to"] + lag, float(s["skew"])))
        return out

    def mapping(self, t_ns: float, started_ms: float | None) -> dict | None:
        """The wall clock less history time (ms) nearest in history time to `t_ns`."""
        if self.walls:
            k = bisect.bisect_left(self.walls, (t_ns,))
            near = min(self.walls[max(k - 1, 0):k + 1], key=lambda w: abs(w[0] - t_ns))
            return {"wall_minus_history_ms": _plain(near[1]), "source": f"poll at index {near[2]}"}
        if started_ms is not None:
            return {"wall_minus_history_ms": _plain(started_ms),
                    "source": "config.json started (history time 0 taken as the run's start, to 1 s)"}
        return None


def _plain(ms: float) -> int | float:
    return int(ms) if float(ms).is_integer() else ms


def _examples(verdict: dict) -> list[tuple[str, str, dict]]:
    """(section, name, example): the anomalies first, then the known deviations, each
    section one example of every name per round."""
    out = []
    for section in ("anomalies", "known"):
        names = [(n, xs) for n, xs in (verdict.get(section) or {}).items() if isinstance(xs, list)]
        for k in range(max((len(xs) for _, xs in names), default=0)):
            out += [(section, n, xs[k]) for n, xs in names if k < len(xs) and isinstance(xs[k], dict)]
    return out


def _when(record: dict, mapping: dict) -> float:
    """A proof record's history time (ns). A record of the controllers' metadata log is appended
    after the workload; when the controller decided it is its `log_time_ms` (its wall clock)."""
    value = record.get("value") if isinstance(record.get("value"), dict) else {}
    ms = value.get("log_time_ms")
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        return (ms - mapping["wall_minus_history_ms"]) * 1e6
    return record["time"]


class _Job:
    """One example's search: its window (history ns), names, brokers and mapping."""

    def __init__(self, example: dict, records: list[dict], topics: set[str], mapping: dict):
        self.times = sorted(_when(r, mapping) for r in records)
        self.example = example
        self.lo, self.hi = self.times[0] - int(WINDOW_S * 1e9), self.times[-1] + int(WINDOW_S * 1e9)
        self.partitions = partitions_of(example, records, topics)
        self.needles = set(self.partitions) | set(transactional_ids(example, records))
        brokers = {r["value"].get("broker") for r in records if isinstance(r.get("value"), dict)}
        brokers.add(example.get("broker"))
        self.brokers = {b for b in brokers if isinstance(b, int) and not isinstance(b, bool)}
        self.mapping = mapping
        self.shift_ms = mapping["wall_minus_history_ms"]  # history ns = (wall ms - this) * 1e6
        self.found: list[tuple] = []  # (loud?, distance ns, history ns, node, entry dict)

    def offer(self, node: int, wall_ms: int, stamp: str, level: str, text: str, clock) -> None:
        t = (wall_ms - self.shift_ms) * 1e6
        skew = None
        if not self.lo <= t <= self.hi:
            for a, b, s in clock.get(node, ()):  # a faked clock: the entry moved back by its skew
                moved = t - s * 1e9
                if a <= moved <= b and self.lo <= moved <= self.hi:
                    t, skew = moved, s
                    break
            else:
                return
        line = {"node": node, "time": stamp, "history_s": round(t / 1e9, 3), "level": level, "text": text}
        if skew is not None:
            line["clock_skew_s"] = skew
        k = bisect.bisect_left(self.times, t)
        distance = min(abs(t - p) for p in self.times[max(k - 1, 0):k + 1])  # to the nearest proof record
        self.found.append((level not in LOUD, distance, t, node, line))

    def block(self, budget: int) -> dict:
        kept = sorted(self.found, key=lambda f: f[:4])[:max(0, min(MAX_LINES, budget))]
        return {"partitions": self.partitions, "window_s": [round(self.lo / 1e9, 3), round(self.hi / 1e9, 3)],
                "mapping": self.mapping, "matched": len(self.found),
                "lines": [f[4] for f in sorted(kept, key=lambda f: (f[2], f[3]))]}


def enrich(verdict: dict, run: str | Path) -> dict:
    """Add `broker_logs` to the verdict's examples (in place; returned) from the run's node
    logs; a run without node logs, or a verdict without examples, is left as it is."""
    logs = node_logs(run)
    chosen = _examples(verdict)
    if not logs or not chosen:
        return verdict
    config = run_config.load(run)
    offset_s = utc_offset_s(config.get("started"))
    wanted = {int(i) for _, _, ex in chosen for i in ex.get("indices", []) if isinstance(i, int)}
    history = _History(resolve(run, prefer_parquet=False), wanted)
    workload = config.get("workload") or {}
    topics = {t for t in [workload.get("topic"), *(workload.get("topics") or [])] if isinstance(t, str)}
    started_ms = started_unix_ms(config.get("started"))
    jobs, without = [], 0
    for section, name, ex in chosen:
        records = [history.records[i] for i in ex.get("indices", []) if i in history.records]
        mapping = history.mapping(sum(r["time"] for r in records) / len(records), started_ms) if records else None
        if mapping is None:
            without += 1
            continue
        jobs.append(_Job(ex, records, topics, mapping))
    by_needle: dict[str, list[_Job]] = {}
    for job in jobs:
        for n in job.needles:
            by_needle.setdefault(n, []).append(job)
    loud_only = [j for j in jobs if not j.needles]
    pattern = needle_pattern(by_needle)
    for node, path in logs:
        for m, text in entries(path):
            level = m.group(8)
            hits = {h for h in pattern.findall(text)} if pattern is not None else set()
            targets = {id(j): j for h in hits for j in by_needle[h]}
            if level in LOUD:
                targets.update({id(j): j for j in loud_only if not j.brokers or node in j.brokers})
            if not targets:
                continue
            wall_ms = stamp_unix_ms(m, offset_s)
            stamp = m.group(0)[1:24]
            for job in targets.values():
                job.offer(node, wall_ms, stamp, level, text, history.clock)
    budget, shown, left_out = MAX_TOTAL_LINES, 0, 0
    for job in jobs:
        block = job.block(budget)
        job.example[FIELD] = block
        budget -= len(block["lines"])
        shown += len(block["lines"])
        left_out += block["matched"] - len(block["lines"])
    verdict[FIELD] = {"logs": [f"cluster/{p.parent.name}/{p.name}" for _, p in logs],
                      "window_s": WINDOW_S, "max_lines": MAX_LINES, "max_total_lines": MAX_TOTAL_LINES,
                      "utc_offset_s": offset_s, "examples": len(jobs), "examples_without_proof_records": without,
                      "lines": shown, "left_out": left_out}
    return verdict
