"""Client-visible log anomalies over `send`, `poll`, `assign` and `seek` records.

One rule, grouped by topic-partition, yields `lost-write`, `duplicate`,
`inconsistent-offset`, `nonmonotonic-poll` and `poll-skip` (docs/checker.md definitions): they
all need the same digest of a partition (who wrote and read which value at which offset),
so one grouping pass serves five checks. Conventions (docs/history.md):

* offsets, not value positions, measure read continuity; a process's first read, and its
  first read after an `assign` or `seek` of the partition, may start anywhere;
* an `info` send may or may not have happened: it is never a lost write, but when a read
  shows its value, it happened at that offset;
* `poll-skip` is flagged only for offsets proven to exist: returned by some read or
  acknowledged by a send (compaction is off, so the only legitimate gaps are transaction
  markers, never proven to exist, and, for a read_committed reader, the records of
  transactions not known to have committed);
* a transactional send (its value names its `txn`) counts for `lost-write` only when its
  transaction committed (a `txn-commit` or `txn-abort` completion lists the partitions it
  wrote, and reaches this partition's group).

The partition log must also be linearisable as an append-only log: a send called after
another send was acknowledged must land at a higher offset. That is checked with the
bounded WGL search of `checks.linearize`. A violation means an offset held one record
when the earlier send was acknowledged and another one later, so it is reported as
`inconsistent-offset` with the two sends as proof.
"""
from __future__ import annotations

import bisect
import json
from typing import Iterable

from kipcheck.checks import linearize
from kipcheck.checks.rules.base import RULE, UNKNOWN, Anomaly, BaseRule
from kipcheck.reference_model import kip392
from kipcheck.reference_model.transactions import COMMITTED, READ_COMMITTED, transaction_outcome

TXN_ENDS = ("txn-commit", "txn-abort")
HISTORY_ANOMALIES = ("lost-write", "duplicate", "inconsistent-offset", "nonmonotonic-poll", "poll-skip")


def partition_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def _vkey(value):
    """A hashable, canonical form of a record value."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


_MISSING = object()


class Digest:
    """What one partition's records say, built in one pass over them (`add`), kept
    compact: no record is held, only what the checks read, in flat dicts and lists.

    Observations are (offset, value) pairs: an ok send's acknowledged offset and value,
    every polled record. Each pair keeps the index of its first observation, sends
    first: a send's completion index when any ok send observed the pair, else the first
    read's (the order the rule has always used). The common case — one value per offset,
    one offset per value — costs one entry in `_val` and `_idx` per offset and one in
    `_voff` per value; only conflicting pairs go to the small `_extra` / `_vextra`.
    Values compare as dict keys do (`1 == 1.0 == True`), and a value's shown form is
    the first one observed, sends first (`finish` re-keys the rare non-string values an
    ok send saw after a read did).

    Continuity (`nonmonotonic-poll`, `poll-skip`) is followed as the reads stream by:
    only each process's last (offset, index) is kept, plus the candidate anomalies, in
    order; a gap becomes a `poll-skip` in `finish`, once every offset proven to exist is
    known.
    """

    def __init__(self, topic: str, partition: int):
        self.topic, self.partition = topic, partition
        # sends, as parallel lists (completion order, then the ones still pending at the end)
        self.s_invoke: list = []
        self.s_done: list = []  # None: pending
        self.s_type: list = []
        self.s_value: list = []
        self.s_offset: list = []  # None unless an ok send acknowledged an offset >= 0
        self.s_call: list = []
        self.s_ret: list = []
        self.s_txn: list = []  # the send's transaction (None: not transactional)
        self._ends: dict = {}  # txn -> ([commit completion types], [abort completion types])
        self.s_producer: list = []  # the workload's producer that sent it (None in older histories)
        self._pending: dict = {}  # process -> its send invoke record
        # observations: offset -> first value (its class); encoded first index of that
        # pair: i >= 0 from a send, ~i (< 0) from reads only; offset -> {value: encoded
        # index} for the other values; value -> first offset; value -> other offsets
        self._val: dict = {}
        self._idx: dict = {}
        self._extra: dict = {}
        self._voff: dict = {}
        self._vextra: dict = {}
        self.read_values: set = set()
        self._first_read: dict = {}  # offset -> first index reading it (any value)
        self._last: dict = {}  # process -> (offset, index) of its last read, since a reset
        self._resumed: set = set()  # processes whose `_last` is a resume position, not a read
        self.resume_points: dict = {}  # assign index -> the offset it resumed a process at
        self._cont: list = []  # continuity candidates in history order
        self._points: list = []  # (fetch offset, first offset returned, index): raw fetches that began above their offset
        self._odd = False  # an ok send with a non-string value or a non-int offset
        self.finished = False

    # --- building -----------------------------------------------------------------------

    def _new_pair(self, offset, value):
        """Offset `offset` joins value `value`'s offsets (the pair is new)."""
        first = self._voff.get(value, _MISSING)
        if first is _MISSING:
            self._voff[value] = offset
        else:
            more = self._vextra.get(value)
            if more is None:
                self._vextra[value] = [offset]
            else:
                more.append(offset)

    def _other_value(self, offset, value, code):
        """A value at `offset` other than its first one (a conflict: rare)."""
        ex = self._extra.get(offset)
        if ex is None:
            shown = offset
            if self._odd:  # a `true` offset may have come: key it as `_val` has it
                shown = next(k for k in self._val if k is offset or k == offset)
            ex = self._extra[shown] = {}
        old = ex.get(value, _MISSING)
        if old is _MISSING:
            ex[value] = code
            self._new_pair(offset, value)
        elif code >= 0 and old < 0:  # the first send of a pair only read so far
            ex[value] = code

    def add(self, r: dict) -> None:
        """Take the next record (index order) of this partition's group."""
        f, t, v = r["f"], r["type"], r["value"]
        if f == "poll":
            if t != "ok":
                return
            topic, partition = self.topic, self.partition
            index, process = r["index"], r["process"]
            observe, first_read, read_values = self._observe_read, self._first_read, self.read_values
            prev = self._last.get(process)
            # the process's last read (offset, index) as two scalars: no tuple per polled record
            seen = prev is not None
            p_off, p_index = prev if seen else (None, None)
            # the first read after a resume: below it is a reset of the position (out of range), not a read
            # going back; above it, the offsets skipped from the resume position on are judged as any gap
            resumed = bool(self._resumed) and process in self._resumed
            cont = self._cont
            rc = v.get("isolation") == READ_COMMITTED
            known = self._val.get
            add_value = read_values.add
            for rec in v["records"]:
                if rec[0] != topic or rec[1] != partition:
                    continue
                offset, value = rec[2], rec[3]
                cur = known(offset, _MISSING)  # `_observe_read`'s common case inline: a value read before
                if type(value) is str and cur is not _MISSING and (cur is value or cur == value):
                    value = cur
                else:
                    value = observe(offset, value, ~index)
                if offset not in first_read:
                    first_read[offset] = index
                add_value(value)
                if seen:
                    if (offset <= p_off and not resumed) or offset > p_off + 1:
                        cont.append((process, p_off, p_index, offset, index, rc))
                else:
                    seen = True
                p_off, p_index = offset, index
                resumed = False
            if seen:
                self._last[process] = (p_off, p_index)
                self._resumed.discard(process)
        elif f == "send":
            if t == "invoke":
                self._pending[r["process"]] = r
                return
            inv = self._pending.pop(r["process"], None)
            off = v.get("offset")
            offset = off if t == "ok" and isinstance(off, int) and off >= 0 else None
            value = _vkey(v.get("value"))
            index = r["index"]
            self.s_invoke.append(inv["index"] if inv else index)
            self.s_done.append(index)
            self.s_type.append(t)
            self.s_value.append(value)
            self.s_offset.append(offset)
            self.s_call.append(inv["time"] if inv else r["time"])
            self.s_ret.append(linearize.INF if t == "info" else r["time"])
            self.s_txn.append(v.get("txn"))
            self.s_producer.append(v.get("producer"))
            if offset is not None:
                if type(value) is not str or type(offset) is not int:
                    self._odd = True
                cur = self._val.get(offset, _MISSING)
                if cur is _MISSING:
                    self._val[offset] = value
                    self._idx[offset] = index
                    self._new_pair(offset, value)
                elif cur is value or cur == value:
                    if self._idx[offset] < 0:  # only read so far: the send's index wins
                        self._idx[offset] = index
                else:
                    self._other_value(offset, value, index)
        elif f == "fetch":
            if v.keys() <= {"records", "start"}:  # the part `split` made: this partition's records and read start
                self._fetched(v["records"], r["index"], v.get("start"))
            else:  # a whole record (plain `check`)
                for key, recs, start in fetched_records(r):
                    if key == partition_key(self.topic, self.partition):
                        self._fetched(recs, r["index"], start)
        elif f in ("assign", "seek"):
            resume = (v.get("resume") or {}).get(partition_key(self.topic, self.partition)) if f == "assign" else None
            if type(resume) is int:  # a subscriber resumes at the group's committed offset
                if t == "invoke":
                    self._last[r["process"]] = (resume - 1, r["index"])
                    self._resumed.add(r["process"])
                    self.resume_points[r["index"]] = resume
                elif t != "ok":  # the assign failed: where the next read starts is unknown
                    self._last.pop(r["process"], None)
                    self._resumed.discard(r["process"])
            else:
                self._last.pop(r["process"], None)
                self._resumed.discard(r["process"])
        elif f in TXN_ENDS and t != "invoke":
            ends = self._ends.setdefault(v.get("txn"), ([], []))
            ends[f == "txn-abort"].append(t)

    def _fetched(self, records, index, start) -> None:
        """A raw-protocol fetch's [offset, value] records of this partition: observations
        for `inconsistent-offset` and `duplicate` (and proof that the offsets exist), but
        not consumer reads: a fetch is a point read at an offset the prober chose, so it
        neither continues a process's reads nor shows that reads went past an offset
        (`lost-write`), and its values do not make a send "read". It does start at its fetch
        offset: one whose first record lies above it is kept for `point_skips`."""
        observe, code = self._observe_read, ~index
        for rec in records:
            observe(rec[0], rec[1], code)
        first = min((rec[0] for rec in records), default=None)
        if start is not None and first is not None and first > start:
            self._points.append((start, first, index))

    def _observe_read(self, offset, value, code):
        """A read observed (offset, value) (`code`: ~ its index); returns the value as
        kept (the one object kept per offset, so this record's copy is freed)."""
        if type(value) is not str:
            value = _vkey(value)
        cur = self._val.get(offset, _MISSING)
        if cur is _MISSING:
            self._val[offset] = value
            self._idx[offset] = code
            self._new_pair(offset, value)
        elif cur is value or cur == value:
            return cur
        else:
            self._other_value(offset, value, code)
        return value

    def finish(self) -> "Digest":
        """End of the records: pending sends, shown forms, sorted offset indexes."""
        if self.finished:
            return self
        self.finished = True
        for inv in self._pending.values():  # the run ended before these completed
            self.s_invoke.append(inv["index"])
            self.s_done.append(None)
            self.s_type.append("pending")
            self.s_value.append(_vkey(inv["value"].get("value")))
            self.s_offset.append(None)
            self.s_call.append(inv["time"])
            self.s_ret.append(linearize.INF)
            self.s_txn.append(inv["value"].get("txn"))
            self.s_producer.append(inv["value"].get("producer"))
        self._pending = {}
        if self._odd:
            self._rekey()
        first_read = self._first_read
        self.read_offsets = sorted(first_read)  # offsets read, ascending
        self.read_first = [first_read[o] for o in self.read_offsets]  # first index reading each
        self._first_read = {}
        idx, extra = self._idx, self._extra
        known = sorted(idx)
        self.known_offsets = known  # offsets proven to exist, ascending
        self.known_first = [_decode(idx[o]) if o not in extra
                            else min(_decode(idx[o]), *(_decode(c) for c in extra[o].values()))
                            for o in known]  # first index proving each (as the checks define it)
        return self

    def _rekey(self):
        """A non-string value is shown as the first ok send of it showed it, when a read
        showed an equal but differently typed one first (`1` / `1.0` / `true`); so is an
        acknowledged offset that is not a plain int (`true`)."""
        fixed_pairs, fixed_values, sent_offsets = set(), set(), set()
        for value, offset in zip(self.s_value, self.s_offset):
            if offset is None:
                continue
            if offset not in sent_offsets:
                sent_offsets.add(offset)
                if type(offset) is not int:  # the first send at this offset shows it
                    for d in (self._val, self._idx, self._extra):
                        if offset in d:
                            d[offset] = d.pop(offset)
            if type(offset) is not int and (offset, value) not in fixed_pairs:
                # this send is the first of its pair: the value's offsets show it as it did
                if self._voff[value] == offset:
                    self._voff[value] = offset
                else:
                    more = self._vextra[value]
                    more[more.index(offset)] = offset
            if type(value) is str:
                fixed_pairs.add((offset, value))
                continue
            if (offset, value) not in fixed_pairs:
                fixed_pairs.add((offset, value))
                cur = self._val[offset]
                if cur is value or cur == value:
                    self._val[offset] = value
                else:
                    ex = self._extra[offset]
                    ex[value] = ex.pop(value)
            if value not in fixed_values:
                fixed_values.add(value)
                self._voff[value] = self._voff.pop(value)
                if value in self._vextra:
                    self._vextra[value] = self._vextra.pop(value)

    # --- reading ------------------------------------------------------------------------

    def uncommitted(self, k: int) -> bool:
        """Send k belongs to a transaction not known to have committed."""
        txn = self.s_txn[k]
        if txn is None:
            return False
        commits, aborts = self._ends.get(txn, ((), ()))
        return transaction_outcome(tuple(commits), tuple(aborts)) != COMMITTED

    def hidden_offsets(self) -> set:
        """Offsets holding records of transactions not known to have committed: a
        read_committed reader may pass them by (KIP-98: aborted records are filtered)."""
        out = set()
        for k, offset in enumerate(self.s_offset):
            if self.s_txn[k] is not None and self.uncommitted(k):
                out.update([offset] if offset is not None else self.offsets_of(self.s_value[k]))
        return out

    def values_at(self, offset) -> list[tuple[object, int]]:
        """[(value, first index)] observed at `offset`, first value first."""
        out = [(self._val[offset], _decode(self._idx[offset]))]
        ex = self._extra.get(offset)
        if ex:
            out.extend((v, _decode(c)) for v, c in ex.items())
        return out

    def pair_index(self, offset, value) -> int:
        cur = self._val[offset]
        if cur is value or cur == value:
            return _decode(self._idx[offset])
        return _decode(self._extra[offset][value])

    def offsets_of(self, value) -> list:
        """Offsets `value` was observed at (first one first); [] when never observed."""
        first = self._voff.get(value, _MISSING)
        if first is _MISSING:
            return []
        return [first, *self._vextra.get(value, ())]


def _decode(code: int) -> int:
    return code if code >= 0 else ~code


def digest(records: Iterable[dict], topic: str, partition: int) -> Digest:
    d = Digest(topic, partition)
    add = d.add
    for r in records:
        add(r)
    return d.finish()


# --- the five checks --------------------------------------------------------------------

def _where(d: Digest) -> dict:
    return {"topic": d.topic, "partition": d.partition}


def inconsistent_offsets(d: Digest) -> list[Anomaly]:
    out = []
    for offset in d._extra:
        seen = sorted(d.values_at(offset), key=lambda kv: kv[1])
        out.append(Anomaly(
            "inconsistent-offset", tuple(i for _, i in seen),
            f"{d.topic}/{d.partition} offset {offset} holds {len(seen)} values: "
            + ", ".join(f"{v!r} (index {i})" for v, i in seen),
            details={**_where(d), "offset": offset, "values": [v for v, _ in seen]}))
    return out


def duplicates(d: Digest) -> list[Anomaly]:
    out = []
    if not d._vextra:
        return out
    sent_as = {v: k for k, v in enumerate(d.s_value) if v in d._vextra}  # the send of each duplicate
    timeouts: dict = {}  # producer -> ascending indices of its sends' `info` completions
    for j, t in enumerate(d.s_type):
        if t == "info" and d.s_done[j] is not None:
            timeouts.setdefault(d.s_producer[j], []).append(d.s_done[j])
    for value, first in d._voff.items():  # its keys are the values' shown forms
        more = d._vextra.get(value)
        if more is None:
            continue
        seen = sorted((o, d.pair_index(o, value)) for o in (first, *more))
        by = _sender(d, sent_as.get(value), timeouts)
        out.append(Anomaly(
            "duplicate", tuple(sorted(i for _, i in seen)),
            f"value {value!r} appears at {len(seen)} offsets of {d.topic}/{d.partition}: "
            + ", ".join(f"{o} (index {i})" for o, i in seen) + (f"; {by['text']}" if by else ""),
            details={**_where(d), "value": value, "offsets": [o for o, _ in seen],
                     **({"sender": {k: v for k, v in by.items() if k != "text"}} if by else {})}))
    return out


def _sender(d: Digest, k: int | None, timeouts: dict) -> dict | None:
    """Who wrote a duplicated value, and what points at the cause: the producer, how long the
    send was in flight, and how many of its producer's sends to this partition timed out
    (`info`) meanwhile. An idempotent producer's client bumps its epoch after a timeout and
    re-sends what it held as a new batch, which the broker rightly appends again
    (docs/releases.md, "3.3.2: duplicates under a partition")."""
    if k is None or d.s_producer[k] is None:  # a history from before `producer`, or not ours
        return None
    producer, invoked, done = d.s_producer[k], d.s_invoke[k], d.s_done[k]
    mine = timeouts.get(producer, [])
    timed_out = 0 if done is None else bisect.bisect_left(mine, done) - bisect.bisect_right(mine, invoked)
    held_s = None if d.s_ret[k] == linearize.INF else round((d.s_ret[k] - d.s_call[k]) / 1e9, 1)
    text = (f"sent by {producer} (send index {invoked})"
            + (f", in flight {held_s} s" if held_s is not None else f", {d.s_type[k]}")
            + (f"; {timed_out} of its sends to this partition timed out meanwhile (a client epoch bump "
               f"re-sends held sends as a new batch)" if timed_out else ""))
    return {"producer": producer, "send_index": invoked, "in_flight_s": held_s, "timed_out_meanwhile": timed_out,
            "text": text}


def lost_writes(d: Digest) -> list[Anomaly]:
    out = []
    read_offsets = d.read_offsets
    if not read_offsets:
        return out
    top = read_offsets[-1]
    read_values = d.read_values
    for k, (offset, value) in enumerate(zip(d.s_offset, d.s_value)):
        if offset is None or offset >= top or value in read_values or d.uncommitted(k):
            continue
        # the proof that reads went past k: the read of the smallest offset above k
        j = bisect.bisect_right(read_offsets, offset)
        above, above_idx = read_offsets[j], d.read_first[j]
        done = d.s_done[k]
        out.append(Anomaly(
            "lost-write", (d.s_invoke[k], done, above_idx),
            f"send of {value!r} acknowledged at {d.topic}/{d.partition} offset {offset} "
            f"(index {done}) was never read, although offset {above} was (index {above_idx})",
            details={**_where(d), "offset": offset, "value": value}))
    return out


def continuity(d: Digest) -> list[Anomaly]:
    """nonmonotonic-poll and poll-skip, per process; an assign/seek restarts it."""
    known, known_first = d.known_offsets, d.known_first
    hidden = d.hidden_offsets() if d._ends or any(t is not None for t in d.s_txn) else set()
    out = []
    for process, p_off, p_idx, offset, index, rc in d._cont:
        idx = (p_idx, index) if p_idx != index else (index,)
        if offset <= p_off:
            out.append(Anomaly(
                "nonmonotonic-poll", idx,
                f"process {process} read {d.topic}/{d.partition} offset {p_off} (index {p_idx}) "
                f"then offset {offset} (index {index}) without an assign or seek",
                details={**_where(d), "process": process, "from": p_off, "to": offset}))
        else:
            k = bisect.bisect_right(known, p_off)
            if rc and hidden:  # a read_committed reader passes aborted records by
                while k < len(known) and known[k] < offset and known[k] in hidden:
                    k += 1
            if k < len(known) and known[k] < offset:
                skipped, proof = known[k], known_first[k]
                before = (f"resumed at offset {p_off + 1} (assign, index {p_idx})" if p_idx in d.resume_points
                          else f"read {d.topic}/{d.partition} offset {p_off} (index {p_idx})")
                out.append(Anomaly(
                    "poll-skip", tuple(sorted({*idx, proof})),
                    f"process {process} {before} "
                    f"then offset {offset} (index {index}), skipping offset {skipped} "
                    f"which exists (index {proof})",
                    details={**_where(d), "process": process, "from": p_off, "to": offset,
                             "skipped": skipped}))
    return out


def point_skips(d: Digest) -> list[Anomaly]:
    """poll-skip of a raw fetch: Kafka reads a fetch from the batch holding its fetch offset
    (`LogSegment.read` starts at the first batch whose last offset is at or above it; a remote
    read, `RemoteLogManager.read`, the same), so an answer whose first data record lies above
    the fetch offset skipped every offset in between; flagged for one proven to exist (as in
    `continuity`: transaction markers, the only legitimate data-less offsets, never are)."""
    known, known_first = d.known_offsets, d.known_first
    out = []
    for start, first, index in d._points:
        k = bisect.bisect_left(known, start)
        if k < len(known) and known[k] < first:
            skipped, proof = known[k], known_first[k]
            out.append(Anomaly(
                "poll-skip", tuple(sorted({index, proof})),
                f"fetch of {d.topic}/{d.partition} at offset {start} (index {index}) returned records from "
                f"offset {first} on, skipping offset {skipped} which exists (index {proof})",
                details={**_where(d), "fetch_offset": start, "to": first, "skipped": skipped}))
    return out


# --- linearisability of the append-only log ---------------------------------------------

def _placed_sends(d: Digest) -> tuple[list[int], list[int]]:
    """Sends whose offset is known: acknowledged, or proven by a read of their value, as
    (send numbers, offsets).

    An unread `info` send may not have happened; it constrains nothing and is left out
    (the WGL view: it linearises as a no-op). A value read at several offsets has no
    single position; `duplicate` reports it."""
    sends, offsets = [], []
    read_values, voff, vextra = d.read_values, d._voff, d._vextra
    for k, (offset, type_) in enumerate(zip(d.s_offset, d.s_type)):
        if offset is not None:
            sends.append(k)
            offsets.append(offset)
        elif type_ in ("ok", "info", "pending"):
            value = d.s_value[k]
            if value in read_values and value not in vextra:
                first = voff.get(value, _MISSING)
                if first is not _MISSING:
                    sends.append(k)
                    offsets.append(first)
    return sends, offsets


def _inversions(d: Digest, sends: list[int], offsets: list[int]) -> list[tuple[int, int, int, int]]:
    """Pairs (a, b) of send numbers with offsets: a returned before b was called, yet b
    sits at a lower offset."""
    call, ret = d.s_call, d.s_ret
    by_ret = sorted(range(len(sends)), key=lambda j: ret[sends[j]])
    out, k, best = [], 0, None
    for j in sorted(range(len(sends)), key=lambda j: call[sends[j]]):
        s_call = call[sends[j]]
        while k < len(by_ret) and ret[sends[by_ret[k]]] < s_call:
            if best is None or offsets[by_ret[k]] > offsets[best]:
                best = by_ret[k]
            k += 1
        if best is not None and offsets[best] > offsets[j]:
            out.append((sends[best], offsets[best], sends[j], offsets[j]))
    return out


def send_order(d: Digest, budget: int) -> list[Anomaly]:
    sends, offsets = _placed_sends(d)
    call, ret = d.s_call, d.s_ret
    order = sorted(offsets)

    def step(state, op):  # the next op must take the next offset of the log
        return (state + 1,) if state < len(order) and order[state] == op.input else ()

    out, start, failed = [], 0, False
    # windows cut at quiescent points (`linearize.windows`, over plain send numbers: an
    # `Op` is made only for the windows that need a search)
    for window in linearize.window_ids([call[k] for k in sends], [ret[k] for k in sends]):
        if len(window) == 1:  # nothing overlaps it: no search needed
            j = window[0]
            failed |= not (start < len(order) and order[start] == offsets[j])
        else:
            ops = [linearize.Op(j, call[sends[j]], ret[sends[j]], offsets[j]) for j in window]
            res = linearize.check(ops, linearize.Model(start, step), budget=budget)
            if res.ok is None:
                out.append(Anomaly(UNKNOWN, (d.s_invoke[sends[window[0]]],),
                                   f"{d.topic}/{d.partition}: {res.reason}", details=_where(d)))
            failed |= res.ok is False
        start += len(window)
    if failed:
        for a, a_off, b, b_off in _inversions(d, sends, offsets):
            a_inv, a_done, b_inv, b_done = d.s_invoke[a], d.s_done[a], d.s_invoke[b], d.s_done[b]
            out.append(Anomaly(
                "inconsistent-offset", tuple(sorted({a_inv, a_done, b_inv, b_done} - {None})),
                f"send of {d.s_value[b]!r} (index {b_inv}) was called after the send of {d.s_value[a]!r} "
                f"was acknowledged at {d.topic}/{d.partition} offset {a_off} (index {a_done}), "
                f"yet landed at lower offset {b_off}: offset {b_off} was rewritten",
                details={**_where(d), "offset": b_off}))
    return out


def reads_before_send(d: Digest) -> list[Anomaly]:
    """`uncommitted-read`: a consumer's poll returned an acknowledged record before the
    send of it was called (`kip392.sent_before_read`). Offsets holding more than one value
    are `inconsistent-offset`'s."""
    first = dict(zip(d.read_offsets, d.read_first))
    out = []
    for invoked, offset, value in zip(d.s_invoke, d.s_offset, d.s_value):
        read = first.get(offset) if offset is not None else None
        if read is None or kip392.sent_before_read(read, invoked) or len(d.values_at(offset)) > 1:
            continue
        out.append(Anomaly("uncommitted-read", (read, invoked),
                           f"a poll of {d.topic}/{d.partition} returned offset {offset} ({value!r}) at index {read}, "
                           f"before its send was called (index {invoked}): no replica had it, let alone committed it",
                           details={"topic": d.topic, "partition": d.partition, "offset": offset,
                                    RULE: "kip392.records_committed"}))
    return out


class PartitionHistoryRule(BaseRule):
    """The client-visible log checks of one topic-partition (see module docstring), and
    reads of a record before its send was called (`uncommitted-read`)."""

    anomalies = HISTORY_ANOMALIES + ("uncommitted-read",)
    streams = True  # `start`: one compact digest per partition; `check`/`check_group` are BaseRule's
    one_pass = True

    fs = frozenset(("send", "seek", "poll", "fetch", "assign", *TXN_ENDS))

    def __init__(self, budget: int = 1_000_000):
        self.budget = budget  # WGL steps per window before the verdict becomes unknown

    def reads(self, f: str, type_: str) -> bool:
        """Polls and fetches answered, transactions ended (`fetched_records` reads ok answers alone)."""
        return f in self.fs and (type_ == "ok" if f in ("poll", "fetch") else f not in TXN_ENDS or type_ != "invoke")

    def group_keys(self, record: dict) -> Iterable[str]:
        f, v = record["f"], record["value"]
        if f in ("send", "seek"):
            return (partition_key(v["topic"], v["partition"]),)
        if f == "poll" and record["type"] == "ok":
            return {partition_key(r[0], r[1]) for r in v["records"]}
        if f == "fetch":
            return tuple(key for key, _, _ in fetched_records(record))
        if f == "assign":
            return {partition_key(t, p) for t, p in v.get("partitions", ())}
        if f in TXN_ENDS and record["type"] != "invoke":
            return {partition_key(t, p) for t, p in v.get("partitions", ())}
        return ()

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """The record's groups (the keys of `group_keys`, sorted), each with only what
        `check_group` reads of it: a poll keeps that partition's records (the filter
        `digest` applies). See `checks.verdict.Dispatch.keyed`."""
        f, v = record["f"], record["value"]
        if f == "poll":
            if record["type"] != "ok":
                return []
            recs = v["records"]
            by: dict = {}
            exact = True
            last_t = last_p = part = None  # the partition of the record before: a poll's records come in runs
            for rec in recs:
                t, p = rec[0], rec[1]
                if type(t) is not str or type(p) is not int:
                    exact = False
                    break
                if p == last_p and t == last_t:
                    part.append(rec)
                    continue
                part = by.get((t, p))
                if part is None:
                    part = by[(t, p)] = [rec]
                else:
                    part.append(rec)
                last_t, last_p = t, p
            if not exact:  # odd types: the very filter `digest` applies, key by key
                out = []
                for key in sorted(self.group_keys(record)):
                    topic, _, partition = key.rpartition("/")
                    partition = int(partition)
                    mine = [rec for rec in recs if rec[0] == topic and rec[1] == partition]
                    out.append((key, {**record, "value": {**({"isolation": v["isolation"]} if "isolation" in v else {}),
                                                          "records": mine}}))
                return out
            shown = {"isolation": v["isolation"]} if "isolation" in v else {}
            out = [(partition_key(t, p), {**record, "value": {**shown, "records": part}}) for (t, p), part in by.items()]
            if len(out) > 1:
                out.sort(key=lambda kv: kv[0])
            return out
        if f == "fetch":
            return [(key, {**record, "value": {"records": recs, "start": start}}) for key, recs, start in fetched_records(record)]
        if f == "send" or f == "seek":  # one group: nothing to share, the record as it is
            return [(partition_key(v["topic"], v["partition"]), record)]
        if f == "assign":
            resume = v.get("resume") or {}
            return [(key, {**record, "value": {"partitions": [tp for tp in v.get("partitions", ())
                                                              if partition_key(tp[0], tp[1]) == key],
                                               **({"resume": {key: resume[key]}} if key in resume else {})}})
                    for key in sorted(set(self.group_keys(record)))]
        if f in TXN_ENDS:
            return [(key, {**record, "value": {"txn": v.get("txn")}}) for key in sorted(self.group_keys(record))]
        return []

    def start(self, key: str, profile: str) -> "_Judge":
        """Judge one group as its records stream by: `add(record)` each, in index order,
        then `finish() -> [Anomaly]`. Engines that see records one at a time use this and
        hold no records of the group (`checks.verdict.starter`)."""
        topic, _, partition = key.rpartition("/")
        return _Judge(Digest(topic, int(partition)), self.budget)


class _Judge:
    __slots__ = ("digest", "add", "budget")

    def __init__(self, d: Digest, budget: int):
        self.digest, self.add, self.budget = d, d.add, budget

    def finish(self) -> list[Anomaly]:
        d = self.digest.finish()
        return (lost_writes(d) + duplicates(d) + inconsistent_offsets(d) + continuity(d) + point_skips(d)
                + send_order(d, self.budget) + reads_before_send(d))


def fetched_records(record: dict) -> list[tuple[str, list, int | None]]:
    """(partition key, [[offset, value], ...], read start) of each partition an ok raw `fetch`
    returned records for, keys sorted. The entries are inline (one partition) or in
    `partitions`; a record that is not an [int offset, value] pair is not an observation and
    is left out (the fetch rules judge the answer's shape). The read start is the entry's
    fetch offset when the answer says the read began there (error NONE, the offset at or above
    the log start it answered), else None."""
    if record["type"] != "ok":
        return []
    v = record["value"]
    entries = v.get("partitions")
    if entries is None:
        entries = (v,)
    out = {}
    for e in entries:
        recs = e.get("records") if type(e) is dict else None
        topic, partition = (e.get("topic"), e.get("partition")) if recs else (None, None)
        if not recs or type(topic) is not str or type(partition) is not int:
            continue
        good = [rec for rec in recs if type(rec) is list and len(rec) >= 2 and type(rec[0]) is int]
        if good:
            key = partition_key(topic, partition)
            start = _read_start(e)
            if key in out:  # one partition twice in an answer: no single start
                out[key] = (out[key][0] + good, None)
            else:
                out[key] = (good, start)
    return [(key, recs, start) for key, (recs, start) in sorted(out.items())]


def _read_start(entry: dict) -> int | None:
    o, log_start = entry.get("fetch_offset"), entry.get("log_start_offset")
    if entry.get("error") != "NONE" or type(o) is not int or type(log_start) is not int or not 0 <= log_start <= o:
        return None
    return o


HISTORY_RULES = (PartitionHistoryRule(),)
