"""KIP-32 LogAppendTime stamps, judged against the clocks the history shows: `append-time-violation`.

A run whose workload topics stamp LogAppendTime records each read record's stamp in its poll
(`append_ms`, ms since the history's time 0, harness/clients/workload.py). A stamp is the clock
of the leader that appended the record, so `kip32.append_time_allowed` asks whether it lies
between the record's send and the earlier of its acknowledgement and the poll that read it, moved
by a skew some node's clock may have had meanwhile: 0, or the `skew_s` of a `clock-skew` or
`clock-strobe` fault whose window overlaps that span. The window runs from its start's invoke
(less `CLOCK_LAG_MS`) to its stop's completion: a heal returns only once libfaketime must have
re-read the node's offset file (the start's `settle_ms`, faults/clock.py), so its completion is
when the skew ended. A history whose start lacks `settle_ms` was written by a heal that returned
as soon as the file was gone: its window is widened by `CLOCK_LAG_MS` past the completion, as is
one whose stop failed (`info`).

One group, streamed in index order. It holds two ms stamps, a value hash, a stamp read and a tie
flag per acknowledged offset (arrays, dense by offset: 33 bytes an offset) and the sends still
in flight, never a poll: each read is judged when its poll completes, with every send and fault
start before it, which is all a stamp can depend on (the append came after the send and the
fault's start, and before the poll).

The same stamps judge the prober's ListOffsets by a real timestamp (`time-offset-violation`,
`kip32.offset_for_time_allowed`): the broker's answer must be the first offset stamped at or
after the target, whatever order a skewed leader's stamps came in. A stamp is taken back to the
Unix ms the broker compared (`append_ms` plus the poll's `wall_minus_history_ms`), so the bound
holds to `BY_TIME_TOLERANCE_MS` at any run length. Answers are held (a few tuples a second) and
judged at the end, against every stamp read of an acknowledged record; a partition where a read
showed another record at an acknowledged offset (an unclean election rewrote it) is left alone.

The same reads judge ListOffsets for the largest timestamp (-3, KIP-734,
`kip734.max_timestamp_answer_allowed`): the record the answer names carries the timestamp the
answer gives (`found_timestamp`), and no acknowledged record just below it, read in the same poll,
carries the same stamp (one poll maps its stamps through one clock reading, so equal there is
exact: `ties`). Kafka 3.3-3.7 name a batch's last offset instead (KAFKA-16310), known under their
profiles as `max-timestamp-shallow-offset`.
"""
from __future__ import annotations

from array import array
from typing import Iterable

from kipcheck import effects
from kipcheck.reference_model import kip32, kip734, profiles

from kipcheck.checks.rules.base import DEVIATIONS, RULE, Anomaly, BaseRule

GROUP = "append-times"
#: libfaketime 0.9.10 with FAKETIME_CACHE_DURATION=1 (harness/backends/node.py) re-reads a node's
#: offset file on the first clock call whose whole second exceeds its last read's by more than
#: 1: a node may run on its old clock up to 2 s after the file changed (1.5 s was assumed until
#: 2026-11-28 and let a seed-1 run flag stamps 1.5-1.6 s after a heal: docs/findings.md, "clock-strobe heal")
CLOCK_LAG_MS = 2000
#: the stamp's ms truncation, the history's own ms rounding, and the gap between the invoke
#: record and the real produce call, on one machine's clocks
TOLERANCE_MS = 100
#: the wall clock may be slewed against the monotonic one the history keeps (NTP: at most
#: 500 ppm): the stamp is mapped to history time when it is read, so the error grows with the
#: time between the send and the read that showed it
SLEW_PER_MS = 0.0005
#: ListOffsets by timestamp compares Unix ms on both sides: only the history's ms floor and the
#: rounding of `wall_minus_history_ms` lie between the broker's numbers and ours
BY_TIME_TOLERANCE_MS = 2
_UNSET = -(1 << 31)
#: `_Stamps.ties`: the record at this offset was read right after the one below it, stamped alike
TIED = 1
#: `_Stamps._poll`: no partition yet (compares unequal to every topic and partition)
_NO_PARTITION = object()


def _ms(record: dict) -> int:
    return int(record.get("time", 0)) // 1_000_000


def _by_time(record: dict) -> bool:
    """A ListOffsets answer for a real timestamp (the special ones are negative) with an offset."""
    v = record.get("value") or {}
    return (record.get("f") == "list_offsets" and record.get("type") == "ok" and v.get("error") == "NONE"
            and type(v.get("timestamp")) is int and v["timestamp"] >= 0 and type(v.get("offset")) is int
            and v["offset"] >= 0)


def _max_timestamp(record: dict) -> bool:
    """A ListOffsets answer for the largest timestamp (-3, KIP-734) that named an offset."""
    v = record.get("value") or {}
    return (record.get("f") == "list_offsets" and record.get("type") == "ok" and v.get("error") == "NONE"
            and v.get("timestamp") == kip734.MAX_TIMESTAMP and type(v.get("offset")) is int and v["offset"] >= 0)


def _clock_fault(record: dict) -> bool:
    v = record.get("value") or {}
    return record.get("f") == "fault" and (effects.MOVES_CLOCK in effects.of(v) or v.get("fault") == "heal-all")


class AppendTimeRule(BaseRule):
    anomalies = ("append-time-violation", "time-offset-violation")
    streams = True
    one_pass = True
    key = GROUP
    fs = frozenset(("send", "fault", "poll", "list_offsets"))

    def reads(self, f: str, type_: str) -> bool:
        return f in self.fs and (type_ == "ok" if f in ("poll", "list_offsets") else True)

    def group_keys(self, record: dict) -> Iterable[str]:
        f = record.get("f")
        v = record.get("value") or {}
        if (f == "send" or _clock_fault(record) or f == "poll" and record.get("type") == "ok" and "append_ms" in v
                or _by_time(record)
                or _max_timestamp(record)):
            return (GROUP,)
        return ()

    def start(self, key: str, profile: str) -> "_Stamps":
        return _Stamps(profile)


class _Stamps:
    """The streaming judge: sends by offset, in-flight sends by value, the clock windows so far."""

    def __init__(self, profile: str = "kip"):
        self.profile = profile
        self.sent: dict[tuple, array] = {}  # (topic, partition) -> send invoke ms by offset
        self.acked: dict[tuple, array] = {}  # (topic, partition) -> send completion ms by offset
        self.values: dict[tuple, array] = {}  # (topic, partition) -> hash of the acknowledged value at each offset
        self.stamps: dict[tuple, array] = {}  # (topic, partition) -> Unix ms stamp read of the record at each offset
        # (topic, partition) -> TIED at an offset read in one poll right after the one below it, both
        # acknowledged there, with the same stamp (exact: one poll maps its stamps alike); else 0
        self.ties: dict[tuple, bytearray] = {}
        self.max_timestamp: list[tuple] = []  # (index, topic, partition, offset, Unix ms or None) of -3 answers
        self.diverged: set[tuple] = set()  # partitions where a read showed another record at an acknowledged offset
        self.by_time: list[tuple] = []  # (index, topic, partition, target Unix ms, answered offset)
        self.base: dict[tuple, int] = {}  # (topic, partition) -> the offset at index 0 (its first acknowledged one)
        self.early: dict[tuple, tuple] = {}  # (topic, partition, offset) -> (sent, acked, hash) below the base
        self.in_flight: dict[str, int] = {}  # value -> invoke ms (the workload's values are unique: "process-n")
        self.unsure: dict = {}  # value -> invoke ms of a send that ended `info` (may have landed anywhere)
        self.windows: list[list] = []  # [start ms, end ms or None (open), skew ms, fault kind, lag past its stop ms]
        self.starting: int | None = None  # invoke ms of the clock fault whose ok is awaited
        self.out: list[Anomaly] = []

    def add(self, r: dict) -> None:
        f, v, t = r.get("f"), r.get("value") or {}, r.get("type")
        if f == "send":
            self._send(r, v, t)
        elif f == "fault":
            self._fault(r, v, t)
        elif f == "list_offsets" and v["timestamp"] == kip734.MAX_TIMESTAMP:
            found = v.get("found_timestamp")
            self.max_timestamp.append((r["index"], v.get("topic"), v.get("partition"), v["offset"],
                                       found if type(found) is int and found >= 0 else None))
        elif f == "list_offsets":
            self.by_time.append((r["index"], v.get("topic"), v.get("partition"), v["timestamp"], v["offset"]))
        elif t == "ok":
            self._poll(r, v)

    def _send(self, r: dict, v: dict, t: str) -> None:
        value = str(v.get("value"))
        if t == "invoke":
            self.in_flight[value] = _ms(r)
            return
        sent = self.in_flight.pop(value, None)
        if sent is None:
            return
        if t == "info":
            self.unsure[value] = sent
        elif t == "ok" and isinstance(v.get("offset"), int) and v["offset"] >= 0:
            tp, acked = (v.get("topic"), v.get("partition")), _ms(r)
            index = v["offset"] - self.base.setdefault(tp, v["offset"])
            if index < 0:  # acknowledged after a later offset was: rare, kept aside
                self.early[(*tp, v["offset"])] = (sent, acked, hash(value))
                return
            sent_at, acked_at = self.sent.setdefault(tp, array("q")), self.acked.setdefault(tp, array("q"))
            values, stamps = self.values.setdefault(tp, array("q")), self.stamps.setdefault(tp, array("q"))
            if index >= len(sent_at):
                grow = index + 1 - len(sent_at)
                sent_at.extend([_UNSET] * grow)
                acked_at.extend([_UNSET] * grow)
                values.extend([0] * grow)
                stamps.extend([_UNSET] * grow)
                self.ties.setdefault(tp, bytearray()).extend(bytes(grow))
            sent_at[index], acked_at[index], values[index] = sent, acked, hash(value)

    def _fault(self, r: dict, v: dict, t: str) -> None:
        if v.get("phase") == "start" and effects.MOVES_CLOCK in effects.of(v):
            if t == "invoke":
                self.starting = _ms(r)
            elif t == "ok" and self.starting is not None and isinstance(v.get("skew_s"), (int, float)):
                # a heal that waits out libfaketime's re-read (settle_ms) completes when the skew has ended
                settled = isinstance(v.get("settle_ms"), int) and v["settle_ms"] >= CLOCK_LAG_MS
                self.windows.append([self.starting - CLOCK_LAG_MS, None, int(v["skew_s"] * 1000), v.get("fault"),
                                     0 if settled else CLOCK_LAG_MS])
                self.starting = None
        elif v.get("phase") == "stop" and t in ("ok", "info"):
            for w in self.windows:  # a stop (or heal-all) ends every open clock window before it
                if w[1] is None and (v.get("fault") == "heal-all" or v.get("fault") == w[3]):
                    w[1] = _ms(r) + (w[4] if t == "ok" else CLOCK_LAG_MS)

    def _skews(self, start: int, end: int) -> list[int]:
        return [0, *(w[2] for w in self.windows if w[0] <= end and (w[1] is None or w[1] >= start))]

    def _poll(self, r: dict, v: dict) -> None:
        """Each stamped record of the poll against its send. Hot (every polled record passes
        here): a partition's arrays are looked up once per run of its records, and the record
        just before is kept as scalars."""
        read_at, wall_minus_history = _ms(r), v.get("wall_minus_history_ms")
        mapped = isinstance(wall_minus_history, int)
        no_skew = [0] if not self.windows else None  # no clock fault yet: the skews of every span
        allowed, early, in_flight, unsure = kip32.append_time_allowed, self.early, self.in_flight, self.unsure
        bases, sents = self.base, self.sent
        unset, tied, tolerance_ms, slew, hash_ = _UNSET, TIED, TOLERANCE_MS, SLEW_PER_MS, hash  # locals: read per record
        # the acknowledged record read just before (its partition, offset and stamp), else None
        before_tp = before_offset = before_stamp = None
        # the partition of the run of records being read, as scalars (the sentinel matches none)
        tp = None
        tp_topic = tp_partition = tp_type = _NO_PARTITION
        for rec, stamp in zip(v.get("records") or (), v.get("append_ms") or ()):
            if stamp is None:
                before_tp = None
                continue
            topic, partition = rec[0], rec[1]
            if topic != tp_topic or partition != tp_partition or type(partition) is not tp_type:
                tp = (topic, partition)
                tp_topic, tp_partition, tp_type = topic, partition, type(partition)
                base = bases.get(tp)
                sent_at = sents.get(tp)
                if sent_at is not None:
                    acked_at, values, stamps, ties = self.acked[tp], self.values[tp], self.stamps[tp], self.ties[tp]
                    n = len(sent_at)  # `_send` grows the partition's arrays together: all of this length
                else:
                    n = 0
            offset, value = rec[2], rec[3]
            if type(value) is not str:
                value = str(value)
            sent = None  # the acknowledged send of this value at this offset: (sent, upper)
            if type(offset) is int:
                # sent at all: base set (`_send` sets it before the arrays); else no offset is in range
                i = offset - base if base is not None else 0
                if 0 <= i < n:
                    sent = sent_at[i]
                    if sent == unset:
                        sent = None
                    elif values[i] == hash_(value):
                        upper = acked_at[i]
                    else:
                        sent = None
                        self.diverged.add(tp)
                elif early:
                    aside = early.get((*tp, offset))
                    if aside and aside[2] == hash_(value):
                        sent, upper = aside[0], aside[1]
            if sent is not None:
                if upper > read_at:
                    upper = read_at
                # `i` is still offset - base: sent at all, so base is set; a send kept aside is below it
                if 0 <= i < n:  # not one kept aside
                    if mapped:
                        stamps[i] = stamp + wall_minus_history
                    if i > 0 and before_tp == tp and before_offset == offset - 1 and before_stamp == stamp:
                        ties[i] = tied
                before_tp, before_offset, before_stamp = tp, offset, stamp
            else:  # acknowledged after this read, or never (info): bounded by the read
                before_tp = None
                sent, upper = in_flight.get(value, unsure.get(value)), read_at
                if sent is None:  # no send of ours, or another one at this offset: other rules judge that
                    continue
            span = read_at - sent
            tolerance = tolerance_ms + (int(slew * span) if span > 0 else 0)
            skews = no_skew or self._skews(sent, upper)
            if not allowed(stamp, sent, upper, skews, tolerance):
                self.out.append(Anomaly(
                    "append-time-violation", (r["index"],),
                    f"{tp[0]}/{tp[1]} offset {offset} was read with LogAppendTime {stamp} ms (history time), "
                    f"but it was sent at {sent} ms and appended by {upper} ms, and no node's clock was off "
                    f"by more than the skews {sorted(set(skews))} ms then (tolerance {tolerance} ms)",
                    details={"topic": tp[0], "partition": tp[1], "offset": offset, "stamp_ms": stamp,
                             "sent_ms": sent, "appended_by_ms": upper, "skews_ms": sorted(set(skews)),
                             RULE: "kip32.append_time_allowed"}))

    def finish(self) -> list[Anomaly]:
        self._judge_max_timestamp()
        highest: dict[tuple, array] = {}  # (topic, partition) -> the highest stamp read at or below each offset
        for index, topic, partition, target, answer in self.by_time:
            tp = (topic, partition)
            stamps = self.stamps.get(tp)
            if stamps is None or tp in self.diverged:
                continue
            if tp not in highest:
                running, highest[tp] = _UNSET, array("q", bytes(8 * len(stamps)))
                for i, stamp in enumerate(stamps):
                    running = max(running, stamp)
                    highest[tp][i] = running
            i = answer - self.base[tp]
            below = highest[tp][min(i, len(stamps)) - 1] if i > 0 else _UNSET
            at = stamps[i] if 0 <= i < len(stamps) else _UNSET
            below, at = (None if below == _UNSET else below), (None if at == _UNSET else at)
            if not kip32.offset_for_time_allowed(answer, target, below, at, BY_TIME_TOLERANCE_MS):
                self.out.append(Anomaly(
                    "time-offset-violation", (index,),
                    f"ListOffsets for {topic}/{partition} at timestamp {target} answered offset {answer}, but "
                    + (f"a record below it was stamped {below}" if below is not None
                       and below >= target + BY_TIME_TOLERANCE_MS else f"the record there was stamped {at}, before the target")
                    + " (LogAppendTime read by the consumers): the answer is not the first offset at or after it",
                    details={"topic": topic, "partition": partition, "timestamp": target, "offset": answer,
                             "highest_stamp_below": below, "stamp_at": at, RULE: "kip32.offset_for_time_allowed"}))
        return self.out

    def _judge_max_timestamp(self) -> None:
        """Each -3 answer against the records consumers read (`kip734.max_timestamp_answer_allowed`):
        the stamp read at the offset it named, and the acknowledged records read in one poll just
        below it with the same stamp (one poll maps its stamps alike, so equal is exact there)."""
        for index, topic, partition, answer, answered_ms in self.max_timestamp:
            tp = (topic, partition)
            ties = self.ties.get(tp)
            if ties is None or tp in self.diverged:
                continue
            i = answer - self.base[tp]
            first = i
            while 0 < first < len(ties) and ties[first] == TIED:
                first -= 1
            first_offset = first + self.base[tp] if first != i else None
            at = self.stamps[tp][i] if 0 <= i < len(self.stamps[tp]) and self.stamps[tp][i] != _UNSET else None
            judged = (answer, first_offset, at, answered_ms, BY_TIME_TOLERANCE_MS)
            if kip734.max_timestamp_answer_allowed(*judged):
                continue
            known = kip734.max_timestamp_answer_allowed(*judged, profile=self.profile)
            stamped_otherwise = kip734.max_timestamp_answer_allowed(answer, first_offset)  # so its stamp failed
            self.out.append(Anomaly(
                "time-offset-violation", (index,),
                f"ListOffsets for {topic}/{partition} at the largest timestamp (-3) answered offset {answer} "
                + (f"with timestamp {answered_ms}, but the record there was read stamped {at}" if stamped_otherwise else
                   f"but offset {first_offset} below it carries the same stamp (read in one poll with it, both "
                   f"acknowledged there): the answer is not the first record of its timestamp"),
                known=known,
                details={"topic": topic, "partition": partition, "timestamp": kip734.MAX_TIMESTAMP, "offset": answer,
                         "first_with_its_stamp": first_offset, "stamp_at": at, "answered_timestamp": answered_ms,
                         RULE: "kip734.max_timestamp_answer_allowed",
                         **({DEVIATIONS: [profiles.MAX_TIMESTAMP_SHALLOW_OFFSET]} if known else {})}))
