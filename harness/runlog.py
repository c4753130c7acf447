"""The harness log: every internal traceback of a run goes to `<run dir>/harness.log`.

The terminal shows one-line errors only; what a maintainer needs to debug kipcheck
itself (a worker's exception, a crash of the run) is kept here, beside the history.
Workers log through `internal_error`, which also returns the one line that the
history (an `info` completion's `error`) or the terminal keeps.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import tempfile
import threading
import traceback
from pathlib import Path

LOGGER = logging.getLogger("kipcheck")
LOG_NAME = "harness.log"


#: internal errors logged per worker (`who`) during the current run
COUNTS: collections.Counter = collections.Counter()


def internal_error(who: str, what: str, error: BaseException) -> str:
    """Log `error` with its traceback under `who`; return `TypeName: message` (≤ 200 chars)."""
    COUNTS[who] += 1
    LOGGER.error("%s: %s", who, what, exc_info=(type(error), error, error.__traceback__))
    return one_line(error)


def one_line(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text}"[:200] if text else type(error).__name__


@contextlib.contextmanager
def harness_log(run_dir: Path):
    """Send the `kipcheck` logger, and uncaught exceptions of threads, to run_dir/harness.log."""
    handler = logging.FileHandler(Path(run_dir) / LOG_NAME, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(message)s"))
    previous_level, previous_propagate = LOGGER.level, LOGGER.propagate
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.INFO)
    LOGGER.propagate = False  # never on the terminal (no root handler, no logging.lastResort)
    previous_hook = threading.excepthook

    def thread_hook(args):  # a thread that dies of an exception: its traceback here, not on stderr
        if args.exc_type is not SystemExit:
            LOGGER.error("thread %s died", getattr(args.thread, "name", "?"),
                         exc_info=(args.exc_type, args.exc_value, args.exc_traceback))
    threading.excepthook = thread_hook
    COUNTS.clear()
    try:
        yield handler
    finally:
        threading.excepthook = previous_hook
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(previous_level)
        LOGGER.propagate = previous_propagate
        handler.close()


def save_traceback(error: BaseException) -> Path:
    """Write `error`'s traceback to a new file (outside any run directory); return its path."""
    with tempfile.NamedTemporaryFile("w", prefix="kipcheck-error-", suffix=".log", delete=False) as f:
        f.write("".join(traceback.format_exception(error)))
    return Path(f.name)
