"""The history recorder: every operation as invoke + completion, one JSON line each.

Lines are written and flushed as they happen, so a harness that dies leaves every
record it made readable (the kernel holds the data even when the process is
killed); an fsync every `sync_interval` seconds covers a machine crash too.
Field names and meanings are DESIGN.md's "History format".
"""
from __future__ import annotations

import itertools
import json
import os
import threading
import time
from pathlib import Path

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


class History:
    def __init__(self, path: Path, sync_interval: float = 0.5):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._index = itertools.count()
        self._t0 = time.monotonic_ns()
        self._sync_interval = sync_interval
        self._last_sync = time.monotonic()
        self._processes = itertools.count()
        self.counts: dict[str, int] = {}

    def now(self) -> int:
        """Nanoseconds since the run started (monotonic)."""
        return time.monotonic_ns() - self._t0

    def new_process(self) -> int:
        """A fresh client process id (Jepsen: a process that saw `info` never issues again)."""
        return next(self._processes)

    def append(self, process, type_: str, f: str, value: dict) -> dict:
        with self._lock:
            rec = {"index": next(self._index), "time": self.now(), "process": process, "type": type_, "f": f,
                   "value": value}
            self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")
            self._file.flush()
            if time.monotonic() - self._last_sync >= self._sync_interval:
                os.fsync(self._file.fileno())
                self._last_sync = time.monotonic()
            key = f"{f}:{type_}"
            self.counts[key] = self.counts.get(key, 0) + 1
            return rec

    def invoke(self, process, f: str, value: dict) -> "Operation":
        self.append(process, INVOKE, f, value)
        return Operation(self, process, f, value)

    @property
    def closed(self) -> bool:
        """True once `close()` ran (e.g. a test checked its history): nothing more can be recorded."""
        return self._file.closed

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Operation:
    """An invoked operation awaiting its one completion record."""

    def __init__(self, history: History, process, f: str, value: dict):
        self.history, self.process, self.f, self.value = history, process, f, value
        self.done = False

    def _complete(self, type_: str, extra: dict) -> dict:
        if self.done:
            raise RuntimeError(f"operation {self.f} of process {self.process} completed twice")
        self.done = True
        return self.history.append(self.process, type_, self.f, {**self.value, **extra})

    def ok(self, **extra) -> dict:
        return self._complete(OK, extra)

    def fail(self, **extra) -> dict:
        """It certainly had no effect (e.g. never sent)."""
        return self._complete(FAIL, extra)

    def info(self, **extra) -> dict:
        """Indeterminate: it may or may not have taken effect (timeout, lost connection)."""
        return self._complete(INFO, extra)
