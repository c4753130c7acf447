"""The local engine: plain Python, one process, memory bounded in bytes.

One pass over the history puts each record in the groups its rules name (through
`checks.verdict.Dispatch`: a record is offered only to the rules that read its kind, and a
group sees only what its rule reads of the record):

* a group its rule judges as the records stream by (`start(key, profile)`, see
  `checks.verdict.starter`; every group of the history rule, the consumer fetch rule's
  poll group) gets each part at once and keeps only its judge's compact summary: it is
  never held;
* the other groups are held as pickled chunks of `CHUNK_ROWS` rows (plus
  each group's last, not yet pickled, rows). When the chunks held in memory pass
  `max_bytes` pickled bytes, they are all appended to one spill file on disk (the group
  remembers where its chunks are) and memory is cleared. The second pass judges these
  groups one at a time, each in index order: its chunks from disk, then from memory.
  Such a group is judged whole: the largest one must fit in memory.

Gathering is `checks.verdict`'s, shared with the Spark engine.
"""
from __future__ import annotations

import os
import pickle
import tempfile
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from kipcheck.checks.conformance import run_context
from kipcheck.rundir.history import iter_history
from kipcheck.checks.verdict import (Counts, Dispatch, as_row, build_verdict, default_rules, from_row,
                            no_cyclic_gc, run_rule, starter)

def max_bytes_from_env() -> int:
    """KIPCHECK_LOCAL_MAX_BYTES, else 256 MiB. Read at import; a bad value is a ValueError naming the
    variable (one line), not int()'s bare message: `kipcheck run` calls it before its cluster starts, so
    that the check at the end cannot fail on it (harness.campaign.check_engine_environment)."""
    text = os.environ.get("KIPCHECK_LOCAL_MAX_BYTES")
    if text is None:
        return 256 * 2**20
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"KIPCHECK_LOCAL_MAX_BYTES must be a whole number of bytes >= 0, got {text!r}")
    return value


#: pickled bytes of held groups kept in memory before they are spilled to disk
#: (KIPCHECK_LOCAL_MAX_BYTES)
DEFAULT_MAX_BYTES = max_bytes_from_env()
#: rows of a held group pickled together (and counted) as one chunk
CHUNK_ROWS = 256
_PROTOCOL = pickle.HIGHEST_PROTOCOL


class _Groups:
    """Groups held for rules that judge whole groups: pickled chunks in memory, spilled
    to one file past `limit` bytes."""

    def __init__(self, limit: int, directory: str | None):
        self.limit = limit
        self.directory = directory
        self.rows: dict = {}  # group id -> rows not yet pickled
        self.chunks: dict = {}  # group id -> [pickled chunk] in memory
        self.disk: dict = {}  # group id -> [(offset, length)] in the spill file
        self.held = 0  # bytes of the chunks in memory
        self.pending = 0  # rows not yet pickled
        self.sealed_rows = 0
        self.sealed_bytes = 0
        self.spills = 0
        self._tmp = None
        self._fh = None
        self._room = self._pending_room()

    def _pending_room(self) -> int:
        """The most rows not yet pickled that fit beside the chunks held: rows not yet
        pickled count at the mean pickled size so far. Kept up to date where the held bytes
        or that mean change, so that `add` compares one count."""
        mean = self.sealed_bytes // max(1, self.sealed_rows) or 100
        return (self.limit - self.held) // mean  # pending * mean > limit - held <=> pending > this

    def add(self, gid, part: dict) -> None:
        rows = self.rows.get(gid)
        if rows is None:
            rows = self.rows[gid] = []
        rows.append(as_row(part))
        self.pending += 1
        if len(rows) >= CHUNK_ROWS:
            self._seal(gid, rows)
        if self.pending > self._room:
            self._spill()

    def _seal(self, gid, rows: list) -> None:
        chunk = pickle.dumps(rows, _PROTOCOL)
        self.chunks.setdefault(gid, []).append(chunk)
        self.held += len(chunk)
        self.pending -= len(rows)
        self.sealed_rows += len(rows)
        self.sealed_bytes += len(chunk)
        self.rows[gid] = []
        self._room = self._pending_room()

    def _spill(self) -> None:
        for gid, rows in list(self.rows.items()):
            if rows:
                self._seal(gid, rows)
        if self._fh is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="kipcheck-spill-", dir=self.directory)
            self._fh = open(os.path.join(self._tmp.name, "groups.spill"), "w+b")
        fh = self._fh
        for gid, chunks in self.chunks.items():
            where = self.disk.get(gid)
            if where is None:
                where = self.disk[gid] = []
            for chunk in chunks:
                where.append((fh.tell(), len(chunk)))
                fh.write(chunk)
        self.chunks.clear()
        self.held = 0
        self.spills += 1
        self._room = self._pending_room()

    def ids(self) -> list:
        return sorted(set(self.rows) | set(self.chunks) | set(self.disk))

    def take(self, gid) -> Iterator[dict]:
        """The group's records in index order (disk, memory, then unpickled rows); what
        was read is dropped from memory as it goes."""
        where = self.disk.pop(gid, ())
        if where:
            self._fh.flush()
        for offset, length in where:
            self._fh.seek(offset)
            for row in pickle.loads(self._fh.read(length)):
                yield from_row(row)
        chunks = self.chunks.pop(gid, [])
        chunks.reverse()
        while chunks:
            chunk = chunks.pop()
            self.held -= len(chunk)
            self._room = self._pending_room()
            for row in pickle.loads(chunk):
                yield from_row(row)
        rows = self.rows.pop(gid, ())
        self.pending -= len(rows)
        for row in rows:
            yield from_row(row)

    def close(self):
        if self._fh is not None:
            self._fh.close()
            self._tmp.cleanup()
            self._fh = None


def check_records(records: Iterable[dict], rules: Sequence | None = None,
                  profile: str = "kip", max_bytes: int | None = None,
                  spill_dir: str | None = None, context: dict | None = None) -> dict:
    """Verdict for records in index order (already validated).

    `context`: the run's skips and release features (`checks.conformance.run_context`);
    `max_bytes`: pickled bytes of held groups kept in memory before spilling to disk
    (None: `DEFAULT_MAX_BYTES`); `spill_dir`: where the spill file goes (default: the
    system temporary directory)."""
    return check_records_under(records, [profile], rules, max_bytes, spill_dir, context)[0]


def check_records_under(records: Iterable[dict], profiles: Sequence[str], rules: Sequence | None = None,
                        max_bytes: int | None = None, spill_dir: str | None = None,
                        context: dict | None = None) -> list[dict]:
    """`check_records` under each of `profiles`, the records read, keyed and held once
    (`judge_records_under`): a verdict per profile, each the one `check_records` gives."""
    rules = default_rules() if rules is None else list(rules)
    found, pairs = judge_records_under(records, rules, profiles, max_bytes, spill_dir)
    verdicts = []
    for profile, anomalies in zip(profiles, found):
        counts = Counts()
        counts.add_pairs(pairs)
        verdicts.append(build_verdict(anomalies, counts, profile, engine="local", rules=rules, context=context))
    return verdicts


def judge_records(records: Iterable[dict], rules: Sequence, profile: str = "kip",
                  max_bytes: int | None = None, spill_dir: str | None = None) -> tuple[list, Counter]:
    """Every anomaly the rules prove (none dropped, unlike the verdict's examples) and the
    (f, type) counts: what `check_records` turns into a verdict, and what the recall
    measurement (checks/mutate) reads to see whether a planted proof was named."""
    (anomalies,), pairs = judge_records_under(records, rules, [profile], max_bytes, spill_dir)
    return anomalies, pairs


def judge_records_under(records: Iterable[dict], rules: Sequence, profiles: Sequence[str],
                        max_bytes: int | None = None, spill_dir: str | None = None) -> tuple[list[list], Counter]:
    """`judge_records` under several profiles in one pass (each profile's anomalies, in the
    order one pass under it alone gives them): a streaming rule's group gets a judge per
    profile, a held group is read once and judged under each. Reading, keying and holding
    are most of a check, so the second profile costs about half of the first."""
    limit = DEFAULT_MAX_BYTES if max_bytes is None else max_bytes
    keyed = Dispatch(rules).keyed
    judges: list[dict] = [{} for _ in rules]  # per rule: key -> its streaming judge under each profile
    adds: list[dict] = [{} for _ in rules]  # per rule: key -> where that group's parts go (its judges, or held)
    held = _Groups(limit, spill_dir)
    pairs: Counter = Counter()
    found: list[list] = [[] for _ in profiles]

    def open_group(i: int, key: str):
        """Where the parts of a new group go: its streaming judges (`starter`), else the held groups."""
        start = starter(rules[i], key)
        if start is None:
            return partial(held.add, (i, key))
        each = judges[i][key] = [start(key, profile) for profile in profiles]
        if len(each) == 1:
            return each[0].add
        adds_of = [judge.add for judge in each]

        def add_to_each(part):
            for add in adds_of:
                add(part)
        return add_to_each

    def finished(each: list) -> None:
        for anomalies, judge in zip(found, each):
            anomalies.extend(judge.finish())

    try:
        with no_cyclic_gc():
            for record in records:
                pairs[(record["f"], record["type"])] += 1
                for i, key, part in keyed(record):
                    add = adds[i].get(key)
                    if add is None:
                        add = adds[i][key] = open_group(i, key)
                    add(part)
            # the groups of streaming rules in (rule, key) order; then the others in (rule, key)
            # order, held ones judged whole and a rule's streamed group finished in its place
            for rule, of_rule in zip(rules, judges):
                if rule.streams:
                    for key in sorted(of_rule):
                        finished(of_rule.pop(key))
            later = sorted({*held.ids(), *((i, key) for i, of_rule in enumerate(judges) for key in of_rule)})
            for i, key in later:
                each = judges[i].pop(key, None)
                if each is not None:
                    finished(each)
                    continue
                rule = rules[i]
                group = held.take((i, key))
                if not rule.one_pass or len(profiles) > 1:
                    group = list(group)
                for anomalies, profile in zip(found, profiles):
                    anomalies.extend(run_rule(rule, key, group, profile))
                for _ in group:  # a one-pass rule that stopped early: drop the rest
                    pass
    finally:
        held.close()
    return found, pairs


def check_path(path: str | Path, rules: Sequence | None = None, profile: str = "kip",
               max_bytes: int | None = None, spill_dir: str | None = None) -> dict:
    """Verdict for a run directory, JSONL or Parquet history."""
    return check_path_under(path, [profile], rules, max_bytes, spill_dir)[0]


def check_path_under(path: str | Path, profiles: Sequence[str], rules: Sequence | None = None,
                     max_bytes: int | None = None, spill_dir: str | None = None) -> list[dict]:
    """`check_path` under each of `profiles`, in one pass (`check_records_under`)."""
    return check_records_under(iter_history(path), profiles, rules, max_bytes, spill_dir, run_context(path))
