"""What a history proves about one broker's log for one partition at a given moment,
for the bounds of the known deviations (docs/model.md, "bound" column).

* `Lives`: a broker's process lives, cut by state-losing faults (HWM, LEO and log
  start are only compared within one life).
* `HwmSeries`: the HWM answers of one broker (fetch responses, ListOffsets latest for
  read_uncommitted consumers), each with its proven leader epoch and life.
* `SendBound`: an upper bound on any replica's LEO from the sends of the partition.
* `HwmFloor`: the least HWM a broker can have had while it answered, from its earlier answers.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from typing import Iterable, Sequence

from kipcheck import effects
from kipcheck.reference_model.state import NONE

from kipcheck.checks.rules.observe import EpochIndex, Op, answered, as_int, broker_ids, partitions_of, proven_epoch

#: The least time between two attempts of one non-idempotent send: librdkafka waits
#: retry.backoff.ms (default 100 ms, the workload keeps it) before a retry, with a jitter of
#: at most 20% (librdkafka CONFIGURATION.md, retry.backoff.ms), and only after the previous
#: attempt failed or timed out. So a send in flight for d ns made at most 1 + d / this attempts,
#: each appended at most once. An idempotent send is appended at most once per log (KIP-98: the
#: leader drops a batch whose producer id, epoch and sequence it already has).
MIN_RETRY_SPACING_NS = 80_000_000
#: Transaction markers one transaction may leave in a partition: its commit or abort marker,
#: and once more when the coordinator's WriteTxnMarkers is retried at a new leader after the
#: first write was replicated but its answer lost (markers are not deduplicated like batches)
MARKERS_PER_TXN = 2


class Lives:
    """Times of the records of faults that may cost one broker its in-memory state (HWM, sessions:
    `effects.LOSES_STATE`), aimed at it."""

    def __init__(self, records: Iterable[dict]):
        self.resets = sorted(r.get("time", 0) for r in records if effects.has(r, effects.LOSES_STATE))

    def of(self, t: int) -> int:
        return bisect.bisect_right(self.resets, t)

    def start_of(self, life: int) -> int:
        """When life number `life` began (the fault that started it; -1: the run's start)."""
        return self.resets[life - 1] if life > 0 else -1

    def of_op(self, op: Op) -> int | None:
        """The life the whole operation ran in (None: a fault hit it in flight)."""
        life = self.of(op.invoked)
        return life if life == self.of(op.completed) else None


def is_consumer(value: dict) -> bool:
    return as_int(value.get("replica_id"), -1) < 0


def fault_brokers(record: dict) -> set[int]:
    return broker_ids((record.get("value") or {}).get("targets")) if record.get("f") == "fault" else set()


@dataclass(frozen=True)
class HwmObservation:
    op: Op
    topic: str
    partition: int
    epoch: int
    hwm: int
    life: int | None


def hwm_values(op: Op, epochs: EpochIndex):
    """(topic, partition, epoch, value) of one answer: fetch HWMs (error NONE, proven
    epoch), ListOffsets latest for a read_uncommitted consumer (its HWM, answered with the
    epoch), and OffsetsForLeaderEpoch end offsets for the current epoch."""
    v = op.value
    if op.f == "fetch":
        if v.get("top_error", NONE) not in (NONE, None):
            return
        for e in partitions_of(v):
            hwm = as_int(e.get("high_watermark"), -1)
            if not e.get("omitted") and e.get("error", NONE) == NONE and hwm >= 0:
                epoch = proven_epoch(op, e, epochs)
                if epoch is not None:
                    yield e.get("topic"), e.get("partition"), epoch, hwm
    elif op.f == "list_offsets":
        if (as_int(v.get("timestamp")) == -1 and is_consumer(v) and v.get("error", NONE) == NONE
                and v.get("isolation_level", "read_uncommitted") == "read_uncommitted"
                and as_int(v.get("offset"), -1) >= 0):
            epoch = as_int(v.get("leader_epoch"), -1)
            if epoch >= 0:
                yield v.get("topic"), v.get("partition"), epoch, int(v["offset"])
    elif op.f == "offsets_for_leader_epoch" and is_consumer(v) and v.get("error", NONE) == NONE:
        epoch = as_int(v.get("current_leader_epoch"), -1)
        if epoch >= 0 and as_int(v.get("leader_epoch"), -2) == epoch and as_int(v.get("end_offset"), -1) >= 0:
            yield v.get("topic"), v.get("partition"), epoch, int(v["end_offset"])


def hwm_series(ops: Sequence[Op], epochs: EpochIndex, lives: Lives) -> dict[tuple, list[HwmObservation]]:
    """One broker's HWM answers (fetch, ListOffsets) by (topic, partition, epoch, life),
    each list sorted by invoke time; answers a fault hit in flight are left out."""
    out: dict[tuple, list[HwmObservation]] = {}
    for op in ops:
        if op.f not in ("fetch", "list_offsets"):
            continue
        life = lives.of_op(op)
        if life is None:
            continue
        for topic, part, epoch, hwm in hwm_values(op, epochs):
            out.setdefault((topic, part, epoch, life), []).append(HwmObservation(op, topic, part, epoch, hwm, life))
    for items in out.values():
        items.sort(key=lambda o: o.op.invoked)
    return out


def epoch_proofs(ops: Sequence[Op], lives: Lives) -> dict[tuple, list[tuple]]:
    """(broker, topic, partition) -> [(invoked, epoch, life, history indices)] by invoke time: the fetch
    answers that prove the broker's leader epoch, a partition answered NONE to a request
    naming `current_leader_epoch` (Kafka `Partition.checkCurrentLeaderEpoch` answers
    FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH unless it equals the broker's own)."""
    out: dict[tuple, list[tuple]] = {}
    for op in ops:
        v, life = op.value, lives.of_op(op)
        epoch = as_int(v.get("current_leader_epoch"), -1)
        if op.f != "fetch" or life is None or epoch < 0 or v.get("top_error", NONE) not in (NONE, None):
            continue
        for e in partitions_of(v):
            if not (e.get("omitted") or e.get("missing")) and e.get("error", NONE) == NONE:
                key = (as_int(v.get("broker")), e.get("topic"), as_int(e.get("partition")))
                out.setdefault(key, []).append((op.invoked, epoch, life, op.indices))
    for items in out.values():
        items.sort()
    return out


def _as_follower_after_election(may_go_back):
    """`may_go_back` for a broker whose role in the epoch no metadata answer of its own
    names: the worst case, a follower just past an election (`kip392.hwm_may_go_back`)."""
    return lambda _leader, _changed, rose, back: may_go_back(False, True, rose, back)


class HwmFloor:
    """The least HWM one broker (the group's) can have had for a partition while it
    answered a request, from its answers completed before the request was sent in the same
    leader epoch and life: an HWM it reported (`hwm_series`) or past a record it served
    (a read stops below the HWM at read time). Within one epoch and life the HWM goes back
    only as `kip392.hwm_may_go_back` allows; an answer followed by a lower one before the
    request proves nothing, and when a drop may still come, nothing is proven at all.

    The request's epoch is the one the broker's metadata answers bracket it with, else the
    one its first accepted fetch answer after the request proves (`epoch_proofs`): a leader
    epoch on one broker never goes back, so an answer of epoch E completed before the
    request and one of E invoked after it leave the broker in E throughout."""

    def __init__(self, ops: Sequence[Op], epochs: EpochIndex, lives: Lives, series: dict | None = None):
        self.epochs, self.lives = epochs, lives
        self.proofs = epoch_proofs(ops, lives)
        self.proof_times = {k: [p[0] for p in items] for k, items in self.proofs.items()}
        # (topic, partition, epoch, life) -> [(invoked, completed, value, reported, history indices)]
        self.points: dict[tuple, list[tuple]] = {}
        for key, items in (hwm_series(ops, epochs, lives) if series is None else series).items():
            self.points[key] = [(o.op.invoked, o.op.completed, o.hwm, True, o.op.indices) for o in items]
        for op in ops:
            life = self.lives.of_op(op)
            if op.f != "fetch" or life is None or op.value.get("top_error", NONE) not in (NONE, None):
                continue
            for e in partitions_of(op.value):
                top = max((int(r[0]) for r in e.get("records") or [] if as_int(r[0]) is not None), default=None)
                epoch = proven_epoch(op, e, epochs) if top is not None and e.get("error", NONE) == NONE else None
                if epoch is not None:
                    key = (e.get("topic"), e.get("partition"), epoch, life)
                    self.points.setdefault(key, []).append((op.invoked, op.completed, top + 1, False, op.indices))

    @classmethod
    def of(cls, records: Sequence[dict]) -> "HwmFloor":
        """From one broker's records: its fetch and ListOffsets answers, metadata and faults."""
        return cls(answered(records, ["fetch", "list_offsets"]), EpochIndex(answered(records, ["metadata"])),
                   Lives(records))

    def at(self, broker, topic, partition, invoked: int, completed: int, may_go_back) -> int | None:
        """The floor for a request to `broker` made between `invoked` and `completed` (None:
        nothing proven). `may_go_back(is_leader, after_epoch_change, rose, back)` asks the
        model whether the HWM may still go back in the epoch (`kip392.hwm_may_go_back`)."""
        found = self.proof_at(broker, topic, partition, invoked, completed, may_go_back)
        return None if found is None else found[0]

    def proof_at(self, broker, topic, partition, invoked: int, completed: int, may_go_back,
                 named: int = -1) -> tuple | None:
        """`at`'s floor and the history indices that prove it: the answer it comes from and,
        without bracketing metadata, the later answer that proves the epoch. `named` >= 0: the
        epoch the read was checked against and passed (Kafka `Partition.checkCurrentLeaderEpoch`)."""
        life = self.lives.of(invoked)
        if life != self.lives.of(completed):
            return None
        epoch, shown = self.epochs.epoch_during(broker, topic, partition, invoked, completed), ()
        if epoch is None and named >= 0:
            epoch = named
            if self.epochs.leader_of_epoch(broker, topic, partition, epoch) is None:
                may_go_back = _as_follower_after_election(may_go_back)
        if epoch is None:
            epoch, shown = self.epoch_after(broker, topic, partition, completed, life) or (None, ())
            if epoch is not None and self.epochs.leader_of_epoch(broker, topic, partition, epoch) is None:
                may_go_back = _as_follower_after_election(may_go_back)
        if epoch is None:
            return None
        best = self._held_point(broker, topic, partition, epoch, life, invoked, may_go_back)
        return None if best is None else (best[2], best[4] + shown)

    def epoch_after(self, broker, topic, partition, t: int, life: int) -> tuple | None:
        """(epoch, its answer's indices) of `broker`'s first accepted fetch answer invoked
        after `t`, if in `life` (None: none). `held` closes the bracket: it only counts
        answers of that epoch completed before the request, so the epoch held in between."""
        key = (as_int(broker), topic, as_int(partition))
        i = bisect.bisect_right(self.proof_times.get(key, ()), t)
        if i == len(self.proof_times.get(key, ())):
            return None
        _, epoch, proof_life, indices = self.proofs[key][i]
        return (epoch, indices) if proof_life == life else None

    def held(self, broker, topic, partition, epoch: int, life: int, before: int, may_go_back) -> int | None:
        """The least HWM `broker` had in `epoch` and `life` from `before` on (while it stayed
        in them), from its answers completed before `before`."""
        best = self._held_point(broker, topic, partition, epoch, life, before, may_go_back)
        return None if best is None else best[2]

    def _held_point(self, broker, topic, partition, epoch: int, life: int, before: int, may_go_back):
        """The point (`points`) that proves `held`'s value (None: nothing proven)."""
        points = [p for p in self.points.get((topic, partition, epoch, life), ()) if p[1] < before]
        if not points:
            return None
        reports = [p for p in points if p[3]]
        highest_done = Extremes(((a[1], a[2]) for a in points), max)  # by completion
        lowest_report_done = Extremes(((a[1], a[2]) for a in reports), min)
        lowest_report_after = Extremes(((b[0], b[2]) for b in reports), min)  # by invoke
        # a report below (above) an answer completed before it was invoked: gone back (risen)
        back = any((h := highest_done.before(b[0])) is not None and b[2] < h for b in reports)
        rose = any((lo := lowest_report_done.before(b[0])) is not None and b[2] > lo for b in reports)
        leader = self.epochs.leader_of_epoch(broker, topic, partition, epoch)
        after_change = self.epochs.earlier_epoch_seen(broker, topic, partition, epoch,
                                                      self.lives.start_of(life), before)
        if may_go_back(None if leader is None else leader == as_int(broker), after_change, rose, back):
            return None
        held = [a for a in points if (lo := lowest_report_after.after(a[1])) is None or lo >= a[2]]
        return max(held, key=lambda a: a[2], default=None)


class SendBound:
    """An upper bound on the LEO of any replica of one partition while an answer was made.

    At any moment a, every record in a log above P(a), the highest offset the history proved
    by a (acknowledged sends, records read), was appended by an attempt of a send invoked
    before a that had not been acknowledged at an offset <= P(a) by then: an idempotent send
    acknowledged before a sits at its acknowledged offset, once. So LEO(a) <= P(a) + 1 + U(a),
    U(a) the appends of the sends invoked before a, less the idempotent ones acknowledged
    before a. For an answer made somewhere in [i, c] (its invoke and completion), P(a) <= P(c)
    and the sends acknowledged before a include those acknowledged before i, so
    LEO <= P(c) + 1 + appends invoked before c - idempotent sends acknowledged before i.
    The bound follows the partition's writes in flight, not the run's length. A non-idempotent
    send counts the attempts its time in flight allows (`MIN_RETRY_SPACING_NS`) and is never
    taken off: a stale attempt may still be appended after another one was acknowledged.
    Without sends of the partition in the history there is no bound (another writer may exist).
    Transaction markers take offsets too (KIP-98): each transaction that sent to the partition
    may append `MARKERS_PER_TXN`, counted at its first send there and never taken off."""

    def __init__(self, records: Iterable[dict], topic, partition):
        invokes: dict[object, tuple[int, bool]] = {}  # process -> (invoke time, idempotent)
        appends: list[tuple[int, int]] = []  # (invoke time, appends it may cause)
        acknowledged: list[int] = []  # times idempotent sends were acknowledged with an offset
        proven: list[tuple[int, int]] = []  # (time, offset) shown to exist by then
        end = 0
        txns: set = set()  # transactions seen sending to this partition
        for r in records:
            t = r.get("time", 0)
            end = max(end, t)
            v = r.get("value") or {}
            if r.get("f") == "send" and v.get("topic") == topic and as_int(v.get("partition")) == as_int(partition):
                if r.get("type") == "invoke":
                    invokes[r.get("process")] = (t, bool(v.get("idempotent", False)))
                    txn = v.get("txn")
                    if txn is not None and txn not in txns:
                        txns.add(txn)
                        appends.append((t, MARKERS_PER_TXN))
                    continue
                invoked, idempotent = invokes.pop(r.get("process"), (t, bool(v.get("idempotent", False))))
                appends.append((invoked, 1 if idempotent else self._attempts(t - invoked)))
                if r.get("type") == "ok" and as_int(v.get("offset"), -1) >= 0:
                    proven.append((t, int(v["offset"])))
                    if idempotent:
                        acknowledged.append(t)
            elif r.get("f") == "fetch" and r.get("type") == "ok":
                for e in partitions_of(v):
                    if e.get("topic") == topic and as_int(e.get("partition")) == as_int(partition):
                        proven += [(t, int(rec[0])) for rec in e.get("records") or []]
        for invoked, idempotent in invokes.values():  # never completed: in flight to the end
            appends.append((invoked, 1 if idempotent else self._attempts(end - invoked)))
        self.known = bool(appends)
        appends.sort()
        self.invoke_times = [t for t, _ in appends]
        self.cumulative = list(itertools.accumulate(n for _, n in appends))
        self.acknowledged = sorted(acknowledged)
        self.highest = Extremes(proven)

    @staticmethod
    def _attempts(in_flight_ns: int) -> int:
        return 1 + max(0, in_flight_ns) // MIN_RETRY_SPACING_NS

    def leo_max(self, invoked: int, completed: int | None = None) -> int | None:
        """The LEO bound for an answer made between `invoked` and `completed` (ns)."""
        if not self.known:
            return None
        completed = invoked if completed is None else completed
        n = bisect.bisect_right(self.invoke_times, completed)
        highest = self.highest.before(completed + 1)
        taken_off = bisect.bisect_left(self.acknowledged, invoked)
        return (-1 if highest is None else highest) + 1 + (self.cumulative[n - 1] if n else 0) - taken_off


class Extremes:
    """The max (or min) value among points timed strictly before / after a moment, by
    bisection: O(log n) per question instead of a scan per answer judged."""

    def __init__(self, points: Iterable[tuple[int, int]], pick=max):
        pts = sorted(points)
        self.times = [t for t, _ in pts]
        self.prefix, self.suffix = [], [None] * len(pts)
        best = None
        for _, v in pts:
            best = v if best is None else pick(best, v)
            self.prefix.append(best)
        best = None
        for i in range(len(pts) - 1, -1, -1):
            best = pts[i][1] if best is None else pick(best, pts[i][1])
            self.suffix[i] = best

    def before(self, t: int):
        i = bisect.bisect_left(self.times, t)
        return self.prefix[i - 1] if i else None

    def after(self, t: int):
        i = bisect.bisect_right(self.times, t)
        return self.suffix[i] if i < len(self.times) else None
