"""The local engine: plain Python, one process, memory bounded.

One pass over the history puts each record in the groups its rules name (through
`checks.verdict.keyed`, so a group holds only what its rule reads of the record). While
the groups held in memory stay under `max_in_memory` records they are simply kept;
beyond that, all of them are appended to spill files on disk (pickled chunks, one file per
hash bucket of the group key) and memory is cleared. The second pass runs every rule on
every group: groups that never spilled from memory, the others bucket by bucket, so at
most one bucket's groups are in memory at a time. A group is always judged whole, with its
records in index order: the largest group (one busy partition) must fit in memory.

Gathering is `checks.verdict`'s, shared with the Spark engine.
"""
from __future__ import annotations

import os
import pickle
import tempfile
import zlib
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from checks.history import iter_history
from checks.verdict import (Counts, as_row, build_verdict, default_rules, from_row, keyed,
                            no_cyclic_gc, run_rule)

#: group entries held in memory before they are spilled to disk (KIPCHECK_LOCAL_MAX_RECORDS)
DEFAULT_MAX_IN_MEMORY = int(os.environ.get("KIPCHECK_LOCAL_MAX_RECORDS", 1_000_000))
#: spill files (hash buckets of the group key)
SPILL_BUCKETS = 32


class _Spill:
    """Groups appended to bucket files as pickled (group, [row, ...]) chunks."""

    def __init__(self, directory: str | None):
        self._tmp = tempfile.TemporaryDirectory(prefix="kipcheck-spill-", dir=directory)
        self._files: dict[int, object] = {}
        self.groups: dict[int, set] = {}  # bucket -> group ids in it
        self.chunks = 0

    @staticmethod
    def bucket(gid: tuple[int, str]) -> int:
        return zlib.crc32(f"{gid[0]}\0{gid[1]}".encode("utf-8", "surrogatepass")) % SPILL_BUCKETS

    def write(self, groups: dict) -> None:
        for gid, records in groups.items():
            b = self.bucket(gid)
            fh = self._files.get(b)
            if fh is None:
                fh = self._files[b] = open(os.path.join(self._tmp.name, f"{b}.spill"), "ab")
            pickle.dump((gid, [as_row(r) for r in records]), fh, protocol=pickle.HIGHEST_PROTOCOL)
            self.groups.setdefault(b, set()).add(gid)
            self.chunks += 1

    def read(self):
        """Yield (group id, records in index order), bucket by bucket."""
        for fh in self._files.values():
            fh.close()
        for b in sorted(self._files):
            rows: dict = {}
            with open(os.path.join(self._tmp.name, f"{b}.spill"), "rb") as fh:
                while True:
                    try:
                        gid, chunk = pickle.load(fh)
                    except EOFError:
                        break
                    rows.setdefault(gid, []).append(chunk)
            for gid in sorted(rows):
                chunks = rows.pop(gid)  # chunks were written in record order
                yield gid, [from_row(row) for chunk in chunks for row in chunk]

    def close(self):
        for fh in self._files.values():
            fh.close()
        self._tmp.cleanup()


def check_records(records: Iterable[dict], rules: Sequence | None = None,
                  profile: str = "kip", max_in_memory: int | None = None,
                  spill_dir: str | None = None) -> dict:
    """Verdict for records in index order (already validated).

    `max_in_memory`: group entries kept in memory before spilling to disk (None: the
    default, `DEFAULT_MAX_IN_MEMORY`); `spill_dir`: where the spill files go (default:
    the system temporary directory)."""
    rules = default_rules() if rules is None else list(rules)
    limit = DEFAULT_MAX_IN_MEMORY if max_in_memory is None else max_in_memory
    groups: dict[tuple[int, str], list[dict]] = {}
    pairs: Counter = Counter()
    anomalies = []
    held = 0
    spill: _Spill | None = None
    try:
        with no_cyclic_gc():
            for record in records:
                pairs[(record["f"], record["type"])] += 1
                for i, key, part in keyed(rules, record):
                    group = groups.get((i, key))
                    if group is None:
                        groups[(i, key)] = [part]
                    else:
                        group.append(part)
                    held += 1
                if held > limit:
                    spill = spill or _Spill(spill_dir)
                    spill.write(groups)
                    groups.clear()
                    held = 0
            if spill is not None:
                # groups that ever spilled continue on disk; the others are judged from memory
                spilled = set().union(*spill.groups.values())
                spill.write({gid: g for gid, g in groups.items() if gid in spilled})
                for gid in spilled:
                    groups.pop(gid, None)
            for gid in sorted(groups):
                anomalies.extend(run_rule(rules[gid[0]], gid[1], groups.pop(gid), profile))
            if spill is not None:
                for (i, key), group in spill.read():
                    anomalies.extend(run_rule(rules[i], key, group, profile))
    finally:
        if spill is not None:
            spill.close()
    counts = Counts()
    counts.add_pairs(pairs)
    return build_verdict(anomalies, counts, profile, engine="local")


def check_path(path: str | Path, rules: Sequence | None = None, profile: str = "kip",
               max_in_memory: int | None = None, spill_dir: str | None = None) -> dict:
    """Verdict for a run directory, JSONL or Parquet history."""
    return check_records(iter_history(path), rules, profile, max_in_memory, spill_dir)
