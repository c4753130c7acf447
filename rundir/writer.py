"""The history recorder: every operation as invoke + completion, one JSON line each.

Appenders encode a line (orjson) and add it to one buffer under one lock, which also gives
the line its index and time, so the file is in index order. The buffer is handed to the
OS in one write by the appender that finds its oldest line `flush_interval` (2 ms) old,
and by a writer thread every `idle_interval` (10 ms) when nobody appends: a harness that
is killed (SIGKILL) leaves every line recorded more than ~10 ms before (the kernel keeps
what was written even when the process dies). Writing from the appenders keeps the
writer thread from taking the GIL hundreds of times a second under load. One bytearray,
not a list of lines: each line is freed as soon as it is copied, where hundreds of
malloc'd lines freed together every 2 ms made glibc give the heap back and fault it in
again (~0.8 page faults per record, more CPU than the encoding). The buffer needs no
bound of its own: an appender that finds it due waits for a write under way (`_wlock`)
and writes it, so a slow disk holds appenders back with ~2 ms of lines buffered. An fsync
every `sync_interval` seconds covers a machine crash too. Field names and meanings:
docs/history.md.
"""
from __future__ import annotations

import itertools
import json
import math
import os
import threading
import time
from pathlib import Path

import orjson

from kipcheck.rundir.records import FAIL, INFO, INVOKE, OK

_ORJSON_OPTS = orjson.OPT_NON_STR_KEYS  # int keys become strings, as json.dumps does
_LINE = orjson.OPT_APPEND_NEWLINE  # the common case, string keys only: orjson's faster path, the same bytes
#: reading the wall clock between two monotonic reads: tries, and a gap that needs no more of them
CLOCK_READ_TRIES, TIGHT_READ_NS = 8, 200_000


def encode_line(rec: dict) -> bytes:
    """One JSON line; through json itself for what orjson refuses (huge ints, lone
    surrogates, NaN which orjson would turn into null)."""
    try:
        return orjson.dumps(rec, option=_ORJSON_OPTS | orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps(rec, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


class History:
    def __init__(self, path: Path, sync_interval: float = 0.5, flush_interval: float = 0.002,
                 idle_interval: float = 0.01):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._buffer = bytearray()  # encoded lines not yet handed to the OS
        self._next_index = 0  # taken only by a record that was encoded: indices stay dense
        self._t0 = time.monotonic_ns()
        self._sync_interval, self._flush_interval_ns = sync_interval, int(flush_interval * 1e9)
        self._idle_interval = idle_interval
        self._oldest = 0  # monotonic ns of the oldest queued line
        self._processes = itertools.count()
        self._closed = False
        self._refusal: BaseException | None = None  # what append raises: a write error, or closed
        self._kept_functions: frozenset[str] = frozenset()
        self.kept: list[dict] = []  # records of `keep`'s operations, in index order
        self._wlock = threading.Lock()
        self._writer = threading.Thread(target=self._write_loop, name="history-writer", daemon=True)
        self._writer.start()

    def now(self) -> int:
        """Nanoseconds since the run started (monotonic)."""
        return time.monotonic_ns() - self._t0

    def since_start_ms(self, unix_ms: int, wall_minus_history_ms: float | None = None) -> int:
        """A wall-clock stamp of this machine (Unix ms, a broker's LogAppendTime) as ms since the
        history's time 0, through the wall and monotonic clocks' relation now (or the one given,
        read once for many stamps): a slew of the wall clock moves the result only by what it did
        since the stamp, not since the run began."""
        offset = self.wall_minus_history_ms() if wall_minus_history_ms is None else wall_minus_history_ms
        return math.floor(unix_ms - offset)

    def wall_minus_history_ms(self) -> float:
        """The wall clock (Unix ms) less the history's time (ms) now: a stamp mapped by
        `since_start_ms` is its Unix ms again when this, read at the mapping, is added back.

        The two clocks are read as monotonic, wall, monotonic, and the tightest of a few tries is
        kept: a thread switched out between two reads (the GIL, a loaded machine) once moved one
        record's stamp 233 ms later than its batch's, an `append-time-violation` of our making."""
        best_gap, offset_ns = None, 0
        for _ in range(CLOCK_READ_TRIES):
            before, wall, after = time.monotonic_ns(), time.time_ns(), time.monotonic_ns()
            if best_gap is None or after - before < best_gap:
                best_gap, offset_ns = after - before, wall - ((before + after) // 2 - self._t0)
            if best_gap <= TIGHT_READ_NS:
                break
        return offset_ns / 1e6

    def new_process(self) -> int:
        """A fresh client process id (Jepsen: a process that saw `info` never issues again)."""
        return next(self._processes)

    def append(self, process, type_: str, f: str, value: dict) -> dict:
        """One record: `append_batch`'s steps for a batch of one, kept apart because going through
        the batch (its list, tuple and loop) cost a fifth of the writer's rate (bench_history
        --writer-only, 2026-11-29: ~370k against ~460k records/s on 4 threads)."""
        lock = self._lock
        lock.acquire()  # not `with`: its __enter__/__exit__ calls cost as much again as the lock itself
        try:
            if self._refusal is not None:
                raise self._refusal
            now = time.monotonic_ns()
            index = self._next_index
            rec = {"index": index, "time": now - self._t0, "process": process,
                   "type": type_, "f": f, "value": value}
            try:
                line = orjson.dumps(rec, option=_LINE)
            except TypeError:  # non-string keys, huge ints, ...; raises for what nothing can encode
                line = encode_line(rec)
            self._next_index = index + 1
            buffer = self._buffer
            if not buffer:
                self._oldest = now
            buffer += line
            if f in self._kept_functions:
                self.kept.append(rec)
            due = now - self._oldest >= self._flush_interval_ns
        finally:
            lock.release()
        if due:
            self._drain()
        return rec

    def append_batch(self, entries: list[tuple]) -> list[dict]:
        """Several `(process, type, f, value)` records under one lock and one clock read: dense
        consecutive indices in the given order, all with the same `time`, read after the caller
        learnt of every one of them (e.g. the completions one poll served), so each record's
        time is still no earlier than what it records. All or nothing: a value nothing can
        encode raises and leaves no line of the batch and no index taken. Saves a lock
        acquisition, a clock read and a call per record (~0.4 us of ~1.2)."""
        dumps, t0, kept_functions = orjson.dumps, self._t0, self._kept_functions
        recs = []
        lock = self._lock
        lock.acquire()
        try:
            if self._refusal is not None:
                raise self._refusal
            now = time.monotonic_ns()
            index = start = self._next_index
            buffer = self._buffer
            size = len(buffer)
            t = now - t0
            try:
                for process, type_, f, value in entries:
                    rec = {"index": index, "time": t, "process": process, "type": type_, "f": f, "value": value}
                    try:
                        buffer += dumps(rec, option=_LINE)
                    except TypeError:
                        buffer += encode_line(rec)
                    index += 1
                    recs.append(rec)
            except BaseException:
                del buffer[size:]  # no part of the batch: the buffer holds whole batches only
                raise
            if index == start:
                return recs
            self._next_index = index
            if not size:
                self._oldest = now
            if kept_functions:
                self.kept.extend(r for r in recs if r["f"] in kept_functions)
            due = now - self._oldest >= self._flush_interval_ns
        finally:
            lock.release()
        if due:
            self._drain()
        return recs

    def keep(self, *functions: str) -> list[dict]:
        """Also keep the records of these operations in memory (`kept`), so the run can read
        what it has measured while it runs (e.g. whether KIP-1166 has its sample yet)."""
        with self._lock:
            self._kept_functions = self._kept_functions | frozenset(functions)
        return self.kept

    def invoke(self, process, f: str, value: dict) -> "Operation":
        self.append(process, INVOKE, f, value)
        return Operation(self, process, f, value)

    def _drain(self) -> None:
        """Write every buffered line; `_wlock` keeps takes and writes in order."""
        with self._wlock:  # a buffer taken by another drainer is written by it first
            with self._lock:
                data, self._buffer = self._buffer, bytearray()
            if data:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]

    def _write_loop(self) -> None:
        last_sync = time.monotonic()
        try:
            while not self._closed:
                time.sleep(self._idle_interval)
                self._drain()
                if time.monotonic() - last_sync >= self._sync_interval:
                    os.fsync(self._fd)
                    last_sync = time.monotonic()
        except OSError as e:  # the next append raises it: a history that cannot be written ends the run
            self._refusal = e

    def flush(self) -> None:
        """Hand everything recorded so far to the OS now (e.g. before reading the file)."""
        self._drain()

    @property
    def closed(self) -> bool:
        """True once `close()` ran (e.g. a test checked its history): nothing more can be recorded."""
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._refusal = self._refusal or ValueError(f"history {self.path} is closed")
        self._writer.join()
        self._drain()
        os.fsync(self._fd)
        os.close(self._fd)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Operation:
    """An invoked operation awaiting its one completion record."""

    __slots__ = ("history", "process", "f", "value", "done")

    def __init__(self, history: History, process, f: str, value: dict):
        self.history, self.process, self.f, self.value = history, process, f, value
        self.done = False

    def _complete(self, type_: str, extra: dict) -> dict:
        if self.done:
            raise RuntimeError(f"operation {self.f} of process {self.process} completed twice")
        self.done = True
        return self.history.append(self.process, type_, self.f, {**self.value, **extra})

    def completion(self, type_: str, extra: dict) -> tuple:
        """This operation's completion as an entry for `History.append_batch` (it counts as done)."""
        if self.done:
            raise RuntimeError(f"operation {self.f} of process {self.process} completed twice")
        self.done = True
        return self.process, type_, self.f, {**self.value, **extra}

    def ok(self, **extra) -> dict:
        return self._complete(OK, extra)

    def fail(self, **extra) -> dict:
        """It certainly had no effect (e.g. never sent)."""
        return self._complete(FAIL, extra)

    def info(self, **extra) -> dict:
        """Indeterminate: it may or may not have taken effect (timeout, lost connection)."""
        return self._complete(INFO, extra)

