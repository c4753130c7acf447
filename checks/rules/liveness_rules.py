"""Liveness: how long the cluster takes to come back after each heal, and client crash loops.

Safety rules say nothing when a cluster never comes back. This rule reads the history only
(the checker never talks to the cluster) and measures, after every heal (a `fault` record
with phase "stop"; docs/history.md), three recovery times from the moment the heal began:

* `sends`: until every partition acknowledged a send again (the latest of the partitions'
  first `ok` send after the heal);
* `isr`: until every broker's own metadata answer showed every partition with its full
  ISR (`isr == replicas`, error NONE): each (partition, broker) pair must have answered
  after the heal, the latest answer full;
* `reads`: until consumers read every partition again (first `ok` poll with records of it).

A heal's observation window ends at the next `fault` record (the next fault's start, or
the end-of-workload `heal-all`) or at the end of the history. A measure that took longer
than the bound, or that had not recovered when the window still ran `bound` seconds past
the heal, is a `slow-recovery` anomaly naming the fault; one that had not recovered in a
window shorter than the bound is "undecided" (not enough time to judge), never an anomaly.

Client crashes: a completion whose value says `"fatal": true` ended a client (docs/history.md);
completions naming a `client` already counted are the same crash (the in-flight slots of one
pipelined client end together). More than `crash_loop` crashes of clients doing one `f` with
no `ok` of that `f` in between is a `client-crash-loop` anomaly.

The rule has one group for the whole run and judges it as its records stream by (`start`):
it holds only the open window's first recoveries per partition and the latest ISR answer
per (partition, broker), never the records. Its measurements leave as one `Anomaly` named
`LIVENESS` whose details are the verdict's `"liveness"` block (`checks.verdict`).
"""
from __future__ import annotations

from typing import Iterable

from kipcheck.checks.rules.base import Anomaly, BaseRule

SLOW_RECOVERY = "slow-recovery"
CRASH_LOOP = "client-crash-loop"
LIVENESS_ANOMALIES = (SLOW_RECOVERY, CRASH_LOOP)
#: the name of the row that carries the measurements (not an anomaly)
LIVENESS = "liveness"
GROUP = "run"
MEASURES = ("sends", "isr", "reads")
NEVER = "never"
#: crashes kept in the liveness block for the report (the count is always whole)
MAX_CRASHES_LISTED = 100
#: kipcheck's own probes (docs/history.md): not clients whose crash streaks their oks could end
_PROBES = frozenset(("fetch", "list_offsets", "offsets_for_leader_epoch", "metadata_propagation"))
#: fields of a fatal completion the crash list keeps
_CRASH_FIELDS = ("error", "broker", "client")


def _seconds(ns: int) -> float:
    return round(max(0, ns) / 1e9, 3)


def _names(tps) -> list[str]:
    """Partitions as "topic/partition", sorted."""
    return sorted(f"{t}/{p}" for t, p in tps)


class LivenessRule(BaseRule):
    """See the module docstring. `bound` in seconds; `bound_parts` only describes it."""

    anomalies = LIVENESS_ANOMALIES
    summary = LIVENESS  # the verdict key its summary row fills (checks.verdict)
    key = GROUP
    streams = True  # one group for the run, judged as it streams by

    def __init__(self, bound: float = 60.0, bound_parts: dict | None = None, source: str = "given",
                 crash_loop: int = 5):
        self.bound = float(bound)
        self.bound_parts = dict(bound_parts or {})
        self.source = source
        self.crash_loop = int(crash_loop)

    def group_keys(self, record: dict) -> Iterable[str]:
        return (GROUP,) if self.split(record) else ()

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """The record as the judge needs it: faults, ok sends and ok metadata as they are
        (small); ok polls reduced to the partitions they read; other clients' ok completions
        bare (they end a crash streak; the prober's are left out); fatal completions reduced
        to their crash fields; metadata requests a broker did not answer. This runs for
        every record: cheap paths first."""
        type_ = record["type"]
        f = record["f"]
        if type_ == "ok":
            if f == "send" or f == "metadata" or f == "fault" or f == "upgrade":
                v = record["value"]
                if v.get("fatal") is not True:
                    return [(GROUP, record)]
            elif f == "poll":
                v = record["value"]
                if v.get("fatal") is not True:
                    tps = {(r[0], r[1]) for r in v.get("records") or () if len(r) >= 2}
                    return [(GROUP, {**record, "value": {"tps": [[t, p] for t, p in tps]}})]
            elif f in _PROBES:
                return []
            else:
                v = record["value"]
                if type(v) is not dict or v.get("fatal") is not True:
                    return [(GROUP, {**record, "value": {}})]
        elif type_ == "invoke":
            return [(GROUP, record)] if f == "fault" or f == "upgrade" else []
        v = record["value"]
        if type(v) is dict and v.get("fatal") is True:
            kept = {k: v[k] for k in _CRASH_FIELDS if k in v}
            return [(GROUP, {**record, "value": {"fatal": True, **kept}})]
        if f == "fault" or f == "upgrade":
            return [(GROUP, record)]
        if f == "metadata":  # a broker that did not answer: the cluster is not whole
            return [(GROUP, {**record, "value": {"broker": v.get("broker"), "unanswered": True}})]
        return []

    def check_group(self, key: str, records: Iterable[dict], profile: str) -> list[Anomaly]:
        """Whole records (as `check` is given them): each reduced as the engines reduce it
        (`split`) before BaseRule's start/add/finish."""
        return super().check_group(key, (part for r in records for _, part in self.split(r)), profile)

    def start(self, key: str, profile: str) -> "_Judge":
        return _Judge(self)


class _Window:
    """What is measured after one heal until its window ends."""

    def __init__(self, record: dict):
        v = record["value"]
        self.fault = v.get("fault")
        self.targets = list(v.get("targets") or [])
        self.params = {k: x for k, x in v.items() if k not in ("fault", "phase", "targets")}
        self.indices = [record["index"]]
        self.heal = record["time"]
        self.healed: int | None = None
        self.heal_failed = False
        self.first: dict[str, dict] = {m: {} for m in MEASURES}  # measure -> tp -> (time, index)
        self.isr_good: set = set()  # (tp, broker) whose latest answer since the heal was full
        self.isr_at: tuple | None = None
        self.isr_not_full: int | None = None  # the last answer (or failure to answer) showing it was not


class _Judge:
    def __init__(self, rule: LivenessRule):
        self.rule = rule
        self.bound_ns = int(rule.bound * 1e9)
        self.window: _Window | None = None
        self.done: list[dict] = []
        self.anomalies: list[Anomaly] = []
        self.seen: dict[str, set] = {m: set() for m in MEASURES}  # measure -> (topic, partition) seen
        self.brokers: set = set()  # brokers whose metadata answered
        self.last_time = 0
        self.crashes = 0
        self.crash_list: list[dict] = []
        self.crashed_clients: set = set()
        self.streaks: dict[str, list] = {}  # f -> [length, indices of its first crashes]

    # -- records --------------------------------------------------------------------
    def add(self, r: dict) -> None:
        if r["time"] > self.last_time:
            self.last_time = r["time"]
        f, v = r["f"], r["value"]
        if v.get("fatal") is True:
            self._crash(r)
        elif f == "send":
            self._first("sends", (v["topic"], v["partition"]), r)
            if self.streaks:
                self._end_streak(f)
        elif f == "fault":
            self._fault(r)
        elif f == "upgrade":
            self._upgrade_step(r)
        elif f == "poll":
            for t, p in v["tps"]:
                self._first("reads", (t, p), r)
            if self.streaks:
                self._end_streak(f)
        elif f == "metadata":
            self._metadata(r)
        elif self.streaks:  # any other ok
            self._end_streak(f)

    def _first(self, measure: str, tp: str, r: dict) -> None:
        self.seen[measure].add(tp)
        w = self.window
        if w is not None and tp not in w.first[measure]:
            w.first[measure][tp] = (r["time"], r["index"])

    def _metadata(self, r: dict) -> None:
        v = r["value"]
        w = self.window
        if v.get("unanswered"):
            if w is not None and w.isr_at is None:
                w.isr_not_full = r["time"]
            return
        if "partition" not in v:
            return
        tp, broker = (v.get("topic"), v["partition"]), v.get("broker")
        full = (v.get("error", "NONE") == "NONE" and bool(v.get("replicas"))
                and sorted(v.get("isr") or ()) == sorted(v.get("replicas") or ()))
        self.seen["isr"].add(tp)
        self.brokers.add(broker)
        if w is None or w.isr_at is not None:
            return
        if not full:
            w.isr_not_full = r["time"]
        (w.isr_good.add if full else w.isr_good.discard)((tp, broker))
        if len(w.isr_good) == len(self.seen["isr"]) * len(self.brokers):
            w.isr_at = (r["time"], r["index"])

    def _fault(self, r: dict) -> None:
        v = r["value"]
        w = self.window
        if r["type"] == "invoke":
            if w is not None:
                self._close(r["time"], f"next fault ({v.get('fault')})" if v.get("fault") != "heal-all"
                            else "end of workload (heal-all)")
            if v.get("phase") == "stop" and v.get("fault") != "heal-all":
                self.window = _Window(r)
        elif w is not None and v.get("phase") == "stop" and w.healed is None:
            w.healed = r["time"]
            w.indices.append(r["index"])
            w.heal_failed = r["type"] != "ok"

    def _upgrade_step(self, r: dict) -> None:
        """A rolling upgrade's step (harness.upgrade) takes a node down on purpose: its start
        and its end close the open window like the next fault, so a heal is judged only
        until the roll disturbs the cluster again (a window cut shorter than the bound
        before recovery is undecided, never an anomaly). Steps open no window: they are
        not faults, and each waits for a full ISR before it completes."""
        if self.window is not None:
            step = r["value"].get("step", "step")
            node = r["value"].get("node")
            self._close(r["time"], f"upgrade {step}" + (f" of node {node}" if node is not None else ""))

    def _crash(self, r: dict) -> None:
        v = r["value"]
        client = v.get("client")
        if client is not None:
            if client in self.crashed_clients:
                return
            self.crashed_clients.add(client)
        self.crashes += 1
        if len(self.crash_list) < MAX_CRASHES_LISTED:
            self.crash_list.append({"index": r["index"], "time": _seconds(r["time"]), "f": r["f"],
                                    "process": r["process"], **{k: v[k] for k in _CRASH_FIELDS if k in v}})
        streak = self.streaks.setdefault(r["f"], [0, []])
        streak[0] += 1
        if len(streak[1]) <= self.rule.crash_loop:
            streak[1].append(r["index"])

    def _end_streak(self, f: str) -> None:
        streak = self.streaks.pop(f, None)
        if streak is not None and streak[0] > self.rule.crash_loop:
            n, indices = streak
            self.anomalies.append(Anomaly(
                CRASH_LOOP, tuple(indices),
                f"{n} clients doing {f} crashed in a row (no ok {f} in between; limit {self.rule.crash_loop})",
                details={"f": f, "crashes": n, "limit": self.rule.crash_loop}))

    # -- windows ----------------------------------------------------------------------
    def _close(self, end: int, ended_by: str) -> None:
        w, self.window = self.window, None
        bound = self.bound_ns
        entry = {"fault": w.fault, "targets": w.targets, "params": w.params, "indices": w.indices,
                 "heal": _seconds(w.heal), "healed": None if w.healed is None else _seconds(w.healed),
                 "window": _seconds(end - w.heal), "ended_by": ended_by}
        if w.heal_failed:
            self.done.append({**entry, **{m: None for m in MEASURES}, "status": "heal failed"})
            return
        slow, undecided = [], []
        for m in MEASURES:
            needed = self.seen[m]
            if m == "isr":
                missing = [] if w.isr_at is not None else _names(
                    tp for tp in needed if any((tp, b) not in w.isr_good for b in self.brokers))
                at = w.isr_at
            else:
                got = w.first[m]
                missing = _names(needed - set(got))
                at = max((got[tp] for tp in needed), default=None) if not missing else None
            if not needed:
                entry[m] = None  # nothing to measure (no such records in the run)
                continue
            # the observer samples and may stall: an ISR is late only when an answer (or a
            # broker's failure to answer) at or after the bound showed it not yet full
            unseen = m == "isr" and (w.isr_not_full is None or w.isr_not_full - w.heal < bound)
            if at is not None:
                took = at[0] - w.heal
                entry[m] = _seconds(took)
                if took > bound:
                    if unseen:
                        undecided.append(m)
                    else:
                        slow.append((m, f"{m} took {_seconds(took)} s", at[1]))
                continue
            entry[m] = NEVER
            entry.setdefault("missing", {})[m] = missing[:20]
            if end - w.heal >= bound and not unseen:
                slow.append((m, f"{m} had not recovered {self.rule.bound:g} s after the heal", None))
            else:
                undecided.append(m)
        if w.isr_not_full is not None:
            entry["isr_not_full_at"] = _seconds(w.isr_not_full - w.heal)
        entry["status"] = "slow" if slow else ("undecided" if undecided else "recovered")
        if undecided:
            entry["undecided"] = undecided
        self.done.append(entry)
        if slow:
            indices = sorted({*w.indices, *(i for _, _, i in slow if i is not None)})
            what = "; ".join(s for _, s, _ in slow)
            self.anomalies.append(Anomaly(
                SLOW_RECOVERY, tuple(indices),
                f"after the heal of {w.fault} {w.targets} at {entry['heal']} s: {what} (bound {self.rule.bound:g} s)",
                details={"fault": w.fault, "targets": w.targets, "heal": entry["heal"],
                         "measures": [m for m, _, _ in slow], "bound": self.rule.bound}))

    def finish(self) -> list[Anomaly]:
        if self.window is not None:
            self._close(self.last_time, "end of history")
        for f in sorted(self.streaks):
            self._end_streak(f)
        rule = self.rule
        summary = {"bound": rule.bound, "bound_source": rule.source, "bound_parts": rule.bound_parts,
                   "crash_loop_limit": rule.crash_loop, "faults": self.done,
                   "client_crashes": self.crashes, "crashes": self.crash_list}
        return [*self.anomalies, Anomaly(LIVENESS, (), "liveness measurements", details=summary)]
