"""KIP-932 share groups, judged from the share consumers' own records: `share-double-acquire`,
`share-accepted-redelivered`, `share-delivery-limit-exceeded`, and with the producers'
acknowledged sends, `share-record-lost`.

Each share consumer records its polls (`share_poll`: the records it acquired, each with its
delivery count and LogAppendTime stamp, and the group's lock duration and delivery-count limit
on the invoke) and its acknowledgements (`share_ack`: `acks` [[topic, partition, offset, type]],
`ok` when answered, with `partition_errors` for the partitions the answer refused; `info` when no
answer came) (docs/history.md, "Share groups"). One group for the run: every delivery of a record
is judged against every other delivery of it, once the history is whole (a record's later
delivery says something about an earlier acknowledgement).

A record acknowledged to a producer of a subscribed topic that no share consumer was ever given is
lost when a later offset of its partition was acquired long after it was available (the group
starts from the earliest offset: `share_subscribe`'s `offset_reset`; kip932.available_record_delivered).

The lock rule and the count of deliveries are not judged across a fault or a leader change of
the record's partition (the observer's `metadata` records): a new share-partition leader starts
from the persisted state, without the old leader's locks (reference_model.kip932).

The rule also fills the verdict's `"share_groups"` block: polls, records acquired, acks by type
and outcome, redeliveries (deliveries with a count above 1), and pairs of deliveries to two
consumers judged by the lock rule and not judged for a fault or leader change.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable

from kipcheck.reference_model import kip932

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.kip1166_rules import fault_windows, touched

POLL, ACK, SUBSCRIBE = "share_poll", "share_ack", "share_subscribe"
DOUBLE, REDELIVERED, LIMIT = "share-double-acquire", "share-accepted-redelivered", "share-delivery-limit-exceeded"
LOST = "share-record-lost"
SHARE_ANOMALIES = (DOUBLE, REDELIVERED, LIMIT, LOST)
#: the verdict block the rule's summary row fills
SHARE_GROUPS = "share_groups"
GROUP = "share"
#: a leader change seen this close to a pair's span counts as inside it (the observer asks every second);
#: a change the observer saw only across a gap reaching into that widened span counts too
LEADER_SLACK_NS = 2_000_000_000
_FS = (POLL, ACK, SUBSCRIBE)
#: the group's start the lost-record rule needs (share.auto.offset.reset)
EARLIEST = "earliest"


def is_share_delivery(record: dict) -> bool:
    """An answered `share_poll` that returned records: what the KIP-932 rules judge."""
    return record.get("f") == POLL and record.get("type") == "ok" and bool((record.get("value") or {}).get("records"))


@dataclass
class _Delivery:
    process: object
    poll_invoke: int  # indices
    poll_index: int
    asked: int
    answered: int
    acquired_after: int
    count: int | None
    ack_invoke: int | None = None  # index
    ack_invoked: int | None = None  # time
    ack_type: str | None = None
    ack_index: int | None = None
    ack_answered: int | None = None  # time, when answered without error for this partition
    process_end: int | None = None

    def model(self, freed_by_release_only: bool = False) -> kip932.Delivery:
        """`freed_by_release_only`: the lock's end as the start of the next acquisition (an accept or a
        reject ends the lock too, but never makes the record available again)."""
        ack = self.ack_invoked if not freed_by_release_only or self.ack_type == kip932.RELEASE else None
        ends = [t for t in (ack, self.process_end) if t is not None]
        return kip932.Delivery(self.process, self.asked, self.answered, self.acquired_after, self.count,
                               min(ends) if ends else None)


@dataclass
class _Judge:
    open: dict = field(default_factory=dict)  # (process, f) -> invoke record (polls, subscribes)
    # (process) -> its open share_ack invokes: a consumer's async acks stay open while it polls and acks again
    open_acks: dict = field(default_factory=dict)
    started: dict = field(default_factory=dict)  # process -> first record time
    last: dict = field(default_factory=dict)  # process -> last record time
    deliveries: dict = field(default_factory=dict)  # (topic, partition, offset) -> [_Delivery]
    unacked: dict = field(default_factory=dict)  # (process, topic, partition, offset) -> _Delivery
    faults: list = field(default_factory=list)
    epochs: dict = field(default_factory=dict)  # (topic, partition) -> [(time, leader epoch)]
    # (topic, partition) -> (offsets, times, indices) of the producers' acknowledged sends, in arrival order
    acked: dict = field(default_factory=dict)
    topics: set = field(default_factory=set)  # what the share consumers subscribed to
    from_earliest: bool | None = None  # every share_subscribe said the group starts at the earliest offset
    lock_ms: int | None = None
    limit: int | None = None
    figures: dict = field(default_factory=lambda: {"polls": 0, "records_acquired": 0, "acks": Counter(),
                                                   "ack_outcomes": Counter(), "redeliveries": 0,
                                                   "not_judged_fault": 0, "judged": 0, "lost_judged": 0,
                                                   "lost_not_judged": 0, "redelivery_judged": 0,
                                                   "redelivery_not_judged": 0})

    def add(self, r: dict) -> None:
        f, t, v, p = r.get("f"), r.get("type"), r.get("value") or {}, r.get("process")
        now = r.get("time", 0)
        if f == "fault":
            self.faults.append(r)
            return
        if f == "send":
            arrays = self.acked.get((v.get("topic"), v.get("partition")))
            if arrays is None:
                arrays = self.acked[(v.get("topic"), v.get("partition"))] = (array("q"), array("q"), array("q"))
            for a, x in zip(arrays, (v["offset"], now, r.get("index", -1))):
                a.append(x)
            return
        if f == "metadata":
            if t == "ok" and isinstance(v.get("leader_epoch"), int):
                self.epochs.setdefault((v.get("topic"), v.get("partition")), []).append((now, v["leader_epoch"]))
            return
        consumer = v.get("consumer", p)  # an async acknowledgement's process names its consumer's
        if consumer == p:
            self.started.setdefault(p, now)
            self.last[p] = now
        if t == "invoke":
            if f == ACK:
                self.open_acks.setdefault(p, []).append(r)
            else:
                self.open[(p, f)] = r
            if f == POLL:
                self.lock_ms = v.get("lock_duration_ms", self.lock_ms)
                self.limit = v.get("delivery_count_limit", self.limit)
            elif f == ACK:
                self._ack_invoked(consumer, r, v)
            elif f == SUBSCRIBE:
                self.topics.update(v.get("topics") or ())
                self.from_earliest = self.from_earliest is not False and v.get("offset_reset") == EARLIEST
            return
        inv = (self._ack_invoke(p, v) if f == ACK else self.open.pop((p, f), None)) or r
        if f == POLL and t == "ok":
            self._poll(p, inv, r, v)
        elif f == ACK:
            self._ack_answered(consumer, inv, r, v, t)

    def _poll(self, p, inv: dict, r: dict, v: dict) -> None:
        self.figures["polls"] += 1
        counts, stamps = v.get("delivery_counts") or [], v.get("append_ms") or []
        start = self.started.get(p, inv.get("time", 0))
        for i, rec in enumerate(v.get("records") or ()):
            topic, partition, offset = rec[0], rec[1], rec[2]
            count = counts[i] if i < len(counts) and isinstance(counts[i], int) else None
            stamp = stamps[i] if i < len(stamps) and isinstance(stamps[i], (int, float)) else None
            after = start if stamp is None else max(start, int((stamp - kip932.STAMP_SLACK_MS) * 1_000_000))
            d = _Delivery(p, inv["index"], r["index"], inv.get("time", 0), r.get("time", 0), after, count)
            self.deliveries.setdefault((topic, partition, offset), []).append(d)
            self.unacked[(p, topic, partition, offset)] = d
            self.figures["records_acquired"] += 1
            if count is not None and count > 1:
                self.figures["redeliveries"] += 1

    def _ack_invoked(self, p, r: dict, v: dict) -> None:
        for topic, partition, offset, kind in v.get("acks") or ():
            d = self.unacked.pop((p, topic, partition, offset), None)
            self.figures["acks"][kind] += 1
            if d is not None:
                d.ack_invoke, d.ack_invoked, d.ack_type = r["index"], r.get("time", 0), kind

    def _ack_invoke(self, p, v: dict) -> dict | None:
        """The open share_ack of process `p` a completion answers: the one with its acks (a completion
        carries its invoke's value). The process's latest one would be wrong: an async ack's answer comes
        through the callback inside a later sync ack's commit, while that sync ack is open."""
        opened = self.open_acks.get(p) or []
        for i, inv in enumerate(opened):
            if (inv.get("value") or {}).get("acks") == v.get("acks"):
                return opened.pop(i)
        return None

    def _ack_answered(self, p, inv: dict, r: dict, v: dict, t: str) -> None:
        refused = v.get("partition_errors") or {}
        for topic, partition, offset, kind in (inv.get("value") or {}).get("acks") or ():
            good = t == "ok" and f"{topic}/{partition}" not in refused
            self.figures["ack_outcomes"][f"{kind}:{'ok' if good else 'error' if t == 'ok' else 'unknown'}"] += 1
            if not good:
                continue
            for d in reversed(self.deliveries.get((topic, partition, offset), ())):
                if d.process == p and d.ack_invoke == inv["index"]:
                    d.ack_index, d.ack_answered = r["index"], r.get("time", 0)
                    break

    # --- judging --------------------------------------------------------------------------

    def _changed(self, topic, partition, begin: int, end: int, windows) -> bool:
        """A fault in force within [begin, end], or a leader change the observer may have seen within it
        widened by `LEADER_SLACK_NS`: two of its answers in a row (by time) that name different epochs,
        the first one before the widened span's end and the second at or after its start. An observer
        that did not ask for a while leaves its change anywhere between those two answers, so its gap
        is not taken for a span without a change (the answers bracketing the span are read too)."""
        if touched(windows, begin, end, None):
            return True
        seen = self.epochs.get((topic, partition), ())
        times = [tm for tm, _ in seen]
        first = max(bisect_left(times, begin - LEADER_SLACK_NS) - 1, 0)  # the last answer before the start
        last = bisect_left(times, end + LEADER_SLACK_NS)  # the first answer at or after the end
        return len({e for _, e in seen[first:last + 1]}) > 1

    def finish(self) -> list[Anomaly]:
        out: list[Anomaly] = []
        if not self.deliveries:
            return [Anomaly(SHARE_GROUPS, (), "share groups", details=self._summary())]
        for d in (d for ds in self.deliveries.values() for d in ds):
            d.process_end = self.last.get(d.process)
        windows = fault_windows(self.faults)
        lock, limit = self.lock_ms, self.limit
        for (topic, partition, offset), ds in sorted(self.deliveries.items(), key=lambda kv: str(kv[0])):
            where = f"{topic}/{partition} offset {offset}"
            span = (min(d.acquired_after for d in ds), max(d.answered for d in ds))
            quiet = not self._changed(topic, partition, *span, windows)
            if limit is not None:
                out += self._limit(ds, limit, quiet, where, topic, partition, offset)
            for i, a in enumerate(ds):
                for b in ds[i + 1:]:
                    if a.process == b.process or lock is None:
                        continue
                    pair = (min(a.acquired_after, b.acquired_after), max(a.answered, b.answered))
                    if self._changed(topic, partition, *pair, windows):
                        self.figures["not_judged_fault"] += 1
                    else:
                        self.figures["judged"] += 1
                        if not kip932.exclusive_acquisition(a.model(), b.model(), lock):
                            out.append(self._double(a, b, lock, where, topic, partition, offset))
            if lock is not None:
                out += self._redelivered(ds, lock, windows, where, topic, partition, offset)
        if lock is not None and self.from_earliest:
            out += self._lost(windows, lock)
        out.append(Anomaly(SHARE_GROUPS, (), "share groups", details=self._summary()))
        return out

    def _lost(self, windows, lock: int) -> list[Anomaly]:
        """`share-record-lost`, one anomaly per share-partition (its lowest lost offset, and how many)."""
        out = []
        ends = sorted([*self.last.values(), *(e for _, e, _ in windows if e != float("inf"))])
        by_partition: dict = {}  # (topic, partition) -> [(offset, delivery)], one pass over the deliveries
        for (t, pt, o), ds in self.deliveries.items():
            by_partition.setdefault((t, pt), []).extend((o, d) for d in ds)
        for (topic, partition), (offsets, times, indices) in sorted(self.acked.items(), key=str):
            if topic not in self.topics:
                continue
            later = sorted(by_partition.get((topic, partition), ()), key=lambda od: od[0])
            if not later:
                continue
            keys = [o for o, _ in later]
            clear = [(o, d) for o, d in later if not touched(windows, d.acquired_after, d.acquired_after, None)]
            latest = _latest_by_segment(clear, keys, ends)
            lost = []
            for offset, acked_at, index in zip(offsets, times, indices):
                i = bisect_right(keys, offset)
                if i == len(keys):
                    continue  # nothing later was delivered: the tail of the run
                if (topic, partition, offset) in self.deliveries:
                    self.figures["lost_judged"] += 1
                    continue
                # each later delivery is judged with the ends before it; per stretch between two ends the
                # latest-acquired one says most, and any one that proves the loss is enough
                candidates = [(d, max(acked_at, ends[seg - 1] if seg else acked_at))
                              for seg, suffix in latest.items() if (d := suffix[i]) is not None]
                if not candidates:
                    self.figures["lost_not_judged"] += 1
                    continue
                self.figures["lost_judged"] += 1
                proofs = [(d, by) for d, by in candidates
                          if not kip932.available_record_delivered(False, by, d.acquired_after, lock)]
                if proofs:
                    d, available_by = max(proofs, key=lambda p: p[0].acquired_after - p[1])
                    lost.append((offset, index, d, available_by))
            if lost:
                offset, index, d, available_by = lost[0]
                out.append(Anomaly(LOST, tuple(sorted({index, d.poll_invoke, d.poll_index})),
                                   f"{topic}/{partition} offset {offset} (acknowledged to its producer at record {index}) "
                                   f"was never delivered to a share consumer, though it was available by "
                                   f"{available_by / 1e9:.3f} s and a later offset was acquired after "
                                   f"{d.acquired_after / 1e9:.3f} s (record {d.poll_index}, {lock} ms lock); "
                                   f"{len(lost)} such records in this share-partition",
                                   details={"topic": topic, "partition": partition, "offset": offset,
                                            "lost": len(lost), "offsets": [o for o, *_ in lost[:20]],
                                            RULE: "kip932.available_record_delivered"}))
        return out

    def _redelivered(self, ds: list, lock: int, windows, where, topic, partition, offset) -> list[Anomaly]:
        """`share-accepted-redelivered`: each accepted delivery against the record's deliveries asked after
        the accept was answered. Not judged when another share consumer ended between the accepted acquisition
        and the accept's answer, or a fault was in force or the leader changed between that acquisition
        and the later delivery: each can end a lock early (kip932.accepted_count_bound)."""
        out = []
        models = self._chained(ds, lock)
        for acc in ds:
            if acc.ack_type != kip932.ACCEPT or acc.ack_answered is None:
                continue
            others = tuple(models[id(d)] for d in ds if d is not acc)
            for later in ds:
                if later is acc or later.asked <= acc.ack_answered:
                    continue
                if self._changed(topic, partition, acc.acquired_after, later.answered, windows) or \
                        any(acc.acquired_after <= end <= acc.ack_answered for p, end in self.last.items() if p != acc.process):
                    self.figures["redelivery_not_judged"] += 1
                    continue
                self.figures["redelivery_judged"] += 1
                if not kip932.accepted_not_redelivered(models[id(acc)], acc.ack_answered, models[id(later)], lock, others):
                    out.append(Anomaly(REDELIVERED, tuple(sorted({acc.poll_index, acc.ack_invoke, acc.ack_index,
                                                                  later.poll_invoke, later.poll_index})),
                                       f"{where}: accepted by process {acc.process} (delivery count {acc.count}, "
                                       f"acknowledgement answered without error at record {acc.ack_index}) and "
                                       f"delivered again to process {later.process} with delivery count "
                                       f"{later.count} (record {later.poll_index}); the accepted acquisition can "
                                       f"have had count {kip932.accepted_count_bound(models[id(acc)], acc.ack_answered, others, lock)} "
                                       f"at most, and a later one only after it ({lock} ms lock)",
                                       details={"topic": topic, "partition": partition, "offset": offset,
                                                RULE: "kip932.accepted_not_redelivered"}))
        return out

    @staticmethod
    def _chained(ds: list, lock: int) -> dict:
        """The record's deliveries as the model sees them (by id), each acquisition bounded from below by
        the end of the one before it too: an acquisition adds one to the delivery count, and the record is
        acquired again only once the lock of the previous count ended (kip932.lock_held_until). The append
        stamp alone bounds a redelivery poorly when the consumers lag."""
        models, ended = {}, {}  # count -> the earliest the lock of an acquisition with that count can have ended
        for d in sorted(ds, key=lambda d: -1 if d.count is None else d.count):
            m = d.model(freed_by_release_only=True)
            if d.count is not None and d.count - 1 in ended:
                m = replace(m, acquired_after=max(m.acquired_after, int(ended[d.count - 1])))
            models[id(d)] = m
            if d.count is not None:
                ended[d.count] = min(ended.get(d.count, float("inf")), kip932.lock_held_until(m, lock))
        return models

    def _limit(self, ds, limit, quiet, where, topic, partition, offset) -> list[Anomaly]:
        over = [d for d in ds if not kip932.delivery_count_allowed(d.count, limit)]
        details = {"topic": topic, "partition": partition, "offset": offset, "limit": limit}
        if over:
            d = over[0]
            return [Anomaly(LIMIT, (d.poll_invoke, d.poll_index),
                            f"{where} was delivered to process {d.process} with delivery count {d.count}, above the "
                            f"limit {limit}", details={**details, "count": d.count,
                                                       RULE: "kip932.delivery_count_allowed"})]
        if quiet and not kip932.delivery_count_allowed(len(ds), limit):
            return [Anomaly(LIMIT, tuple(sorted(i for d in ds for i in (d.poll_invoke, d.poll_index))),
                            f"{where} was delivered {len(ds)} times (limit {limit}) with no fault or leader change "
                            f"between its deliveries", details={**details, "deliveries": len(ds),
                                                                RULE: "kip932.delivery_count_allowed"})]
        return []

    @staticmethod
    def _double(a: _Delivery, b: _Delivery, lock: int, where, topic, partition, offset) -> Anomaly:
        first, second = (a, b) if (a.count or 0) <= (b.count or 0) else (b, a)
        until = kip932.lock_held_until(first.model(), lock)
        return Anomaly(DOUBLE, tuple(sorted(i for i in (first.poll_invoke, first.poll_index, second.poll_invoke,
                                                        second.poll_index, first.ack_invoke) if i is not None)),
                       f"{where} acquired by process {first.process} (record {first.poll_index}, delivery count "
                       f"{first.count}) was given to process {second.process} (record {second.poll_index}, count "
                       f"{second.count}) while the first lock held ({lock} ms lock, held until at least "
                       f"{until / 1e9:.3f} s; the second poll answered at {second.answered / 1e9:.3f} s)",
                       details={"topic": topic, "partition": partition, "offset": offset, "lock_ms": lock,
                                RULE: "kip932.exclusive_acquisition"})

    def _summary(self) -> dict:
        f = self.figures
        return {"polls": f["polls"], "records_acquired": f["records_acquired"], "acks": dict(f["acks"]),
                "ack_outcomes": dict(f["ack_outcomes"]), "redeliveries": f["redeliveries"],
                "records": len(self.deliveries), "pairs_judged": f["judged"], "pairs_not_judged_fault": f["not_judged_fault"],
                "lock_duration_ms": self.lock_ms, "delivery_count_limit": self.limit,
                "records_judged_lost_rule": f["lost_judged"], "records_not_judged_lost_rule_fault": f["lost_not_judged"],
                "redeliveries_judged_accept_rule": f["redelivery_judged"],
                "redeliveries_not_judged_accept_rule": f["redelivery_not_judged"]}


class ShareGroupRule(BaseRule):
    """One group: every share consumer record, with the faults and the observer's leader epochs."""

    anomalies = SHARE_ANOMALIES
    summary = SHARE_GROUPS
    key = GROUP
    streams = True
    fs = frozenset((*_FS, "fault", "metadata", "send"))

    def reads(self, f: str, type_: str) -> bool:
        return f in self.fs and (type_ == "ok" if f in ("metadata", "send") else True)

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in _FS or record.get("f") == "fault":
            yield GROUP
        elif record.get("f") == "metadata" and record.get("type") == "ok":
            yield GROUP
        elif _acknowledged_send(record):
            yield GROUP

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """Metadata records reach the group as their leader epoch alone, acknowledged sends as their
        place alone (many, small)."""
        if record.get("f") == "send":
            if not _acknowledged_send(record):
                return []
            v = record["value"]
            return [(GROUP, {"index": record.get("index"), "time": record.get("time", 0), "type": "ok", "f": "send",
                             "process": record.get("process"),
                             "value": {"topic": v.get("topic"), "partition": v.get("partition"), "offset": v["offset"]}})]
        if record.get("f") == "metadata":
            if record.get("type") != "ok":
                return []
            v = record.get("value") or {}
            return [(GROUP, {"index": record.get("index"), "time": record.get("time", 0), "type": "ok",
                             "f": "metadata", "process": record.get("process"),
                             "value": {"topic": v.get("topic"), "partition": v.get("partition"),
                                       "leader_epoch": v.get("leader_epoch")}})]
        return super().split(record)

    def start(self, key: str, profile: str) -> _Judge:
        return _Judge()


def _acknowledged_send(record: dict) -> bool:
    """A send acknowledged with its offset, outside a transaction (an aborted one is never delivered)."""
    v = record.get("value") or {}
    return (record.get("f") == "send" and record.get("type") == "ok" and type(v.get("offset")) is int
            and v["offset"] >= 0 and not v.get("txn"))


def _latest_by_segment(deliveries: list, keys: list, ends: list) -> dict:
    """For each stretch between two consecutive ends (`ends` sorted; segment k lies after k of them) in
    which some of `deliveries` ([(offset, delivery)] sorted by offset) were acquired: per index i of
    `keys` (every delivered offset, sorted), the latest-acquired delivery of that stretch at an offset
    above keys[i - 1], i.e. at keys[i] or above (None if none)."""
    by_segment: dict = {}
    for o, d in deliveries:
        by_segment.setdefault(bisect_right(ends, d.acquired_after), []).append((o, d))
    out = {}
    for seg, items in by_segment.items():
        suffix = [None] * (len(keys) + 1)
        j = len(items) - 1
        for i in range(len(keys) - 1, -1, -1):
            best = suffix[i + 1]
            while j >= 0 and items[j][0] >= keys[i]:
                d = items[j][1]
                if best is None or d.acquired_after > best.acquired_after:
                    best = d
                j -= 1
            suffix[i] = best
        out[seg] = suffix
    return out
