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
than the heal's bound, or that had not recovered when the window still ran that bound past
the heal, is a `slow-recovery` anomaly naming the fault; one that had not recovered in a
window shorter than the bound is "undecided" (not enough time to judge), never an anomaly.

Each heal's bound (unless the bound was given: then it is that, for every heal) is the
run's bound (the cluster's timeouts and its measured start, checks/recovery.py) plus what
this heal's node had to do, both read from the history (`heal_bound`):

* `restart`: the heal's own duration, from its invoke to its completion (a killed node's
  heal returns once the restarted JVM recovered its logs and listens; faults/process.py);
* `catch-up`: the sends acknowledged from the fault's start to the heal's completion (what
  a node out of the ISR missed), at the fastest the history showed the brokers moving
  records before the heal: the most sends acknowledged (`acks=all`: replicated) or records
  read by consumers (served by the same Fetch path a follower uses) in one second; nothing
  when no metadata answer from the fault's start to the window's end showed a shrunk ISR or
  a broker not answering (nobody fell behind).

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
                 crash_loop: int = 5, per_heal: bool = True):
        self.bound = float(bound)
        self.bound_parts = dict(bound_parts or {})
        self.source = source
        self.crash_loop = int(crash_loop)
        self.per_heal = bool(per_heal)  # False: `bound` is the whole bound of every heal (given)

    def group_keys(self, record: dict) -> Iterable[str]:
        return (GROUP,) if self.split(record) else ()

    def reads(self, f: str, type_: str) -> bool:
        """Invokes of faults and upgrades; every ok completion but the prober's; every failed or
        unknown one (a fatal one of any operation is a crash)."""
        if type_ == "invoke":
            return f == "fault" or f == "upgrade"
        return type_ != "ok" or f not in _PROBES

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
                    recs = v.get("records") or ()
                    tps = {(r[0], r[1]) for r in recs if len(r) >= 2}
                    return [(GROUP, {**record, "value": {"tps": [[t, p] for t, p in tps], "n": len(recs)}})]
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

    def __init__(self, record: dict, acked_at_start: int, peak: int, shrunk: bool):
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
        self.acked_at_start = acked_at_start  # acknowledged sends before the fault started
        self.missed: int | None = None  # acknowledged sends from the fault's start to the heal's completion
        self.peak = peak  # the most records acknowledged or read in one second before the heal
        self.shrunk = shrunk  # an answer during the fault showed a shrunk ISR (or a broker not answering)


def heal_bound(base: float, heal: float, healed: float | None, end: float, missed: int, peak: int,
               shrunk: bool) -> tuple[float, dict]:
    """(seconds, parts): the bound of one heal (module docstring). `heal`, `healed` and `end`
    in seconds since the run started; `healed` None: the heal had not completed when its
    window ended (its restart is the whole window)."""
    restart = max(0.0, (end if healed is None else healed) - heal)
    catch_up = missed / peak if shrunk and peak > 0 else 0.0
    parts = {"run": base, "restart": round(restart, 1), "catch-up": round(catch_up, 1),
             "missed sends": missed if shrunk else 0, "peak records/s": peak}
    return round(base + restart + catch_up, 1), parts


class _Judge:
    def __init__(self, rule: LivenessRule):
        self.rule = rule
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
        self.acked = 0  # ok sends so far
        self.rates = {"send": [-1, 0], "poll": [-1, 0]}  # f -> [the second of its latest ok, records in it]
        self.peak = 0  # the most records acknowledged, or read, in one second so far
        self.fault_started: tuple | None = None  # (acked, ISR seen shrunk since) of the latest fault start

    # -- records --------------------------------------------------------------------
    def add(self, r: dict) -> None:
        if r["time"] > self.last_time:
            self.last_time = r["time"]
        f, v = r["f"], r["value"]
        if v.get("fatal") is True:
            self._crash(r)
        elif f == "send":
            self._first("sends", (v["topic"], v["partition"]), r)
            self.acked += 1
            self._rate("send", r["time"], 1)
            if self.streaks:
                self._end_streak(f)
        elif f == "fault":
            self._fault(r)
        elif f == "upgrade":
            self._upgrade_step(r)
        elif f == "poll":
            for t, p in v["tps"]:
                self._first("reads", (t, p), r)
            if v.get("n"):
                self._rate("poll", r["time"], v["n"])
            if self.streaks:
                self._end_streak(f)
        elif f == "metadata":
            self._metadata(r)
        elif self.streaks:  # any other ok
            self._end_streak(f)

    def _rate(self, f: str, time: int, n: int) -> None:
        rate = self.rates[f]
        second = time // 1_000_000_000
        if second != rate[0]:
            rate[0], rate[1] = second, 0
        rate[1] += n
        if rate[1] > self.peak:
            self.peak = rate[1]

    def _first(self, measure: str, tp: str, r: dict) -> None:
        self.seen[measure].add(tp)
        w = self.window
        if w is not None and tp not in w.first[measure]:
            w.first[measure][tp] = (r["time"], r["index"])

    def _metadata(self, r: dict) -> None:
        v = r["value"]
        w = self.window
        if v.get("unanswered"):
            self._shrunk()
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
        if not full:
            self._shrunk()
        if w is None or w.isr_at is not None:
            return
        if not full:
            w.isr_not_full = r["time"]
        (w.isr_good.add if full else w.isr_good.discard)((tp, broker))
        if len(w.isr_good) == len(self.seen["isr"]) * len(self.brokers):
            w.isr_at = (r["time"], r["index"])

    def _shrunk(self) -> None:
        if self.fault_started is not None:
            self.fault_started = (self.fault_started[0], True)

    def _fault(self, r: dict) -> None:
        v = r["value"]
        w = self.window
        if r["type"] == "invoke":
            if w is not None:
                self._close(r["time"], f"next fault ({v.get('fault')})" if v.get("fault") != "heal-all"
                            else "end of workload (heal-all)")
            if v.get("fault") == "heal-all":
                self.fault_started = None
            elif v.get("phase") == "stop":
                acked, shrunk = self.fault_started or (self.acked, False)
                self.window = _Window(r, acked, self.peak, shrunk)
                self.fault_started = None
            else:
                self.fault_started = (self.acked, False)
        elif w is not None and v.get("phase") == "stop" and w.healed is None:
            w.healed = r["time"]
            w.missed = self.acked - w.acked_at_start
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
        entry = {"fault": w.fault, "targets": w.targets, "params": w.params, "indices": w.indices,
                 "heal": _seconds(w.heal), "healed": None if w.healed is None else _seconds(w.healed),
                 "window": _seconds(end - w.heal), "ended_by": ended_by}
        if w.heal_failed:
            self.done.append({**entry, **{m: None for m in MEASURES}, "status": "heal failed"})
            return
        seconds = self.rule.bound
        if self.rule.per_heal:
            missed = w.missed if w.missed is not None else self.acked - w.acked_at_start
            seconds, parts = heal_bound(self.rule.bound, w.heal / 1e9, None if w.healed is None else w.healed / 1e9,
                                        end / 1e9, missed, w.peak, w.shrunk or w.isr_not_full is not None)
            entry["bound_parts"] = parts
        entry["bound"] = seconds
        bound = int(seconds * 1e9)
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
                slow.append((m, f"{m} had not recovered {seconds:g} s after the heal", None))
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
                f"after the heal of {w.fault} {w.targets} at {entry['heal']} s: {what} (bound {seconds:g} s)",
                details={"fault": w.fault, "targets": w.targets, "heal": entry["heal"],
                         "measures": [m for m, _, _ in slow], "bound": seconds,
                         **({"bound_parts": entry["bound_parts"]} if "bound_parts" in entry else {})}))

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
