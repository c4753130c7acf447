"""Reading, validating and converting histories (docs/history.md).

A history is read as a stream of plain dicts, one per record, so that big histories are
never held in memory here. Every record is validated on the way; the first bad record
raises `HistoryError` with a one-line message naming the line (JSONL) or row (Parquet),
because a checker that silently skips a record could certify a history it never saw.

`to_parquet` turns the harness's JSONL into the Parquet file the Spark engine reads. Its
schema is explicit and independent of the writer: typed key columns for grouping plus the
operation-specific `value` kept as a JSON string.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from kipcheck.rundir.records import JSONL_NAME, PARQUET_NAME, TYPES

try:  # a C JSON parser, 2-3x faster than json; json stays the reference (errors, edge cases)
    import orjson as _orjson
except ImportError:  # pragma: no cover - optional
    _orjson = None


#: 19+ digits in a row: a number orjson might turn into a float (json keeps it an int)
_LONG_DIGITS_B = re.compile(rb"[0-9]{19}")
_LONG_DIGITS_S = re.compile(r"[0-9]{19}")
#: a byte map taking digits to b"9" and every other byte to b" ": 19 nines in the map of a text
#: are 19 digits in a row in it (one scan of a block of lines, cheaper than the regex per line)
_DIGIT_MAP = bytes(57 if 48 <= c <= 57 else 32 for c in range(256))
_NINETEEN = b"9" * 19
#: bytes of whole JSONL lines read (and scanned for long numbers) at a time
_BLOCK_BYTES = 1 << 20


def loads(text, short_numbers: bool = False):
    """`json.loads`, through orjson when it is installed and safe. orjson refuses some
    inputs that json accepts and turns integers beyond int64 into floats: text with 19
    digits in a row, and every input orjson rejects, go through json itself, so results
    and error messages are json's. `short_numbers`: the caller has scanned the text (or a
    block holding it) and found no 19 digits in a row."""
    if _orjson is not None:
        try:
            if not short_numbers and (_LONG_DIGITS_B if type(text) is bytes else _LONG_DIGITS_S).search(text):
                return json.loads(text)
            return _orjson.loads(text)
        except (_orjson.JSONDecodeError, TypeError):
            pass
    return json.loads(text)




#: Operations docs/history.md names, plus a few a Kafka workload sanely records.
KNOWN_F = frozenset({
    "send", "poll", "fetch", "list_offsets", "offsets_for_leader_epoch", "metadata",
    "metadata_propagation", "membership", "assign", "revoke", "fault", "upgrade",
    "list_transactions", "describe_transactions",  # the prober's KIP-664 round
    "partition_change", "metadata_feature",  # the controller's metadata log, read after the run
    "txn-begin", "txn-commit", "txn-abort",  # transactions (docs/history.md)
    "committed",  # a group member's OffsetFetch of its group's committed offsets (docs/history.md)
    "group_describe",  # the coordinator's ConsumerGroupDescribe answer (harness.clients.group_describer)
    "share_subscribe", "share_poll", "share_ack",  # share consumers, KIP-932 (docs/history.md, "Share groups")
    "share_heartbeat", "share_fetch", "share_acknowledge",  # the prober's KIP-932 share sessions
    # sane extras: consumer positioning and bookkeeping, admin probes, run markers
    "seek", "subscribe", "commit", "create_topics", "describe_cluster", "log",
})

REQUIRED = ("index", "time", "process", "type", "f", "value")

#: value fields the history rules rely on, by f (checked on every record of that f)
VALUE_REQUIRED = {
    "send": ("topic", "partition"),
    "assign": ("partitions",),
    "revoke": ("partitions", "group"),
    "seek": ("topic", "partition"),
}

PARQUET_SCHEMA = pa.schema([
    pa.field("index", pa.int64(), nullable=False),
    pa.field("time", pa.int64(), nullable=False),
    pa.field("process", pa.string(), nullable=False),  # "3", "nemesis", "observer"
    pa.field("type", pa.string(), nullable=False),
    pa.field("f", pa.string(), nullable=False),
    pa.field("topic", pa.string()),  # value.topic when the record names one partition
    pa.field("partition", pa.int32()),
    pa.field("value", pa.string(), nullable=False),  # the whole value object as JSON
])


class HistoryError(ValueError):
    """A history that cannot be checked. The message is one line naming the place."""


def _problem(where: str, what: str) -> HistoryError:
    return HistoryError(f"{where}: {' '.join(str(what).split())}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def validate(record, where: str, previous_index: int | None = None) -> dict:
    """Check one record against the contract; return it. `where` names it in errors.

    A fast path (`_well_formed`) accepts the common well-formed record with exact type tests
    (JSON gives plain int/str/dict); anything it does not accept goes through the full checks
    below, which decide and word the error."""
    return record if _well_formed(record, previous_index) else _validate_slow(record, where, previous_index)


def _well_formed(record, previous_index: int | None) -> bool:
    """`validate`'s fast path: True for a record the full checks surely accept (False: let them decide)."""
    if type(record) is dict:
        get = record.get
        index, time_, process, f, value = get("index"), get("time"), get("process"), get("f"), get("value")
        if (type(index) is int and index >= 0 and (previous_index is None or index > previous_index)
                and type(time_) is int and (type(process) is int or (type(process) is str and process))
                and get("type") in TYPES and f in KNOWN_F and type(value) is dict):
            if f == "poll":
                if record["type"] != "ok":
                    return True
                recs = value.get("records")
                if type(recs) is list:
                    for r in recs:
                        if type(r) is not list or len(r) < 4 or type(r[1]) is not int or type(r[2]) is not int:
                            break
                    else:
                        return True
            elif f == "send" or f == "seek":
                if "topic" in value and type(value.get("partition")) is int:
                    return True
            elif f == "assign":
                if "partitions" in value:
                    return True
            elif f in TXN_F:
                if _txn_well_formed(value):
                    return True
            else:
                return True
    return False


TXN_F = ("txn-begin", "txn-commit", "txn-abort")


def _txn_well_formed(value: dict) -> bool:
    """A transaction record names its txn; the partitions it lists are [topic, partition] pairs."""
    if "txn" not in value:
        return False
    parts = value.get("partitions", [])
    return type(parts) is list and all(type(p) is list and len(p) == 2 and type(p[0]) is str
                                       and type(p[1]) is int for p in parts)


def _validate_slow(record, where: str, previous_index: int | None = None) -> dict:
    if not isinstance(record, dict):
        raise _problem(where, f"expected a JSON object, got {type(record).__name__}")
    for name in REQUIRED:
        if name not in record:
            raise _problem(where, f"missing field {name!r}")
    if not _is_int(record["index"]) or record["index"] < 0:
        raise _problem(where, f"index must be a non-negative integer, got {record['index']!r}")
    if previous_index is not None and record["index"] <= previous_index:
        raise _problem(where, f"index {record['index']} does not follow index {previous_index}")
    if not _is_int(record["time"]):
        raise _problem(where, f"time must be integer nanoseconds, got {record['time']!r}")
    process = record["process"]
    if not (_is_int(process) or (isinstance(process, str) and process)):
        raise _problem(where, f"process must be an integer or a name, got {process!r}")
    if record["type"] not in TYPES:
        raise _problem(where, f"unknown type {record['type']!r} (expected one of {sorted(TYPES)})")
    f = record["f"]
    if f not in KNOWN_F:
        raise _problem(where, f"unknown f {f!r}")
    value = record["value"]
    if not isinstance(value, dict):
        raise _problem(where, f"value must be a JSON object, got {type(value).__name__}")
    for name in VALUE_REQUIRED.get(f, ()):
        if name not in value:
            raise _problem(where, f"{f} record is missing value field {name!r}")
    if f in ("send", "seek") and not _is_int(value["partition"]):
        raise _problem(where, f"partition must be an integer, got {value['partition']!r}")
    if f in TXN_F and not _txn_well_formed(value):
        raise _problem(where, f"{f} needs value.txn and, if given, value.partitions as [[topic, partition], ...]")
    if f == "poll" and record["type"] == "ok":
        recs = value.get("records")
        well_formed = isinstance(recs, list)
        for r in recs if well_formed else ():  # a plain loop: this runs for every polled record
            if type(r) is not list or len(r) < 4 or type(r[1]) is not int or type(r[2]) is not int:
                well_formed = False
                break
        if not well_formed:
            raise _problem(where, "ok poll needs value.records as [[topic, partition, offset, value], ...]")
    return record


# --- locating and reading ---------------------------------------------------------------

def resolve(path: str | Path, prefer_parquet: bool = True) -> Path:
    """The history file for a run directory or file path.

    In a run directory the Parquet copy is preferred when it is at least as new as the
    JSONL (it is written after the run from the JSONL); otherwise the JSONL is used."""
    p = Path(path)
    if p.is_dir():
        jsonl, parquet = p / JSONL_NAME, p / PARQUET_NAME
        if prefer_parquet and parquet.exists() and (
                not jsonl.exists() or parquet.stat().st_mtime >= jsonl.stat().st_mtime):
            return parquet
        if jsonl.exists():
            return jsonl
        if parquet.exists():
            return parquet
        raise HistoryError(f"{p}: no {JSONL_NAME} or {PARQUET_NAME} in this directory")
    if not p.exists():
        raise HistoryError(f"{p}: no such file or directory")
    return p


def is_parquet(path: Path) -> bool:
    if path.is_dir():  # a Spark-written Parquet directory
        return any(path.glob("*.parquet"))
    return path.suffix == ".parquet"


def iter_history(path: str | Path) -> Iterator[dict]:
    """Yield the validated records of a history (run directory, JSONL or Parquet)."""
    p = resolve(path)
    yield from (_iter_parquet(p) if is_parquet(p) else _iter_jsonl(p))


def read_history(path: str | Path) -> list[dict]:
    """All records of a small history, validated, in index order."""
    return list(iter_history(path))


def _iter_jsonl(path: Path) -> Iterator[dict]:
    """Blocks of whole lines, each scanned once for long numbers (`loads`); a line's place
    is spelt out only for an error."""
    previous, lineno, name = None, 0, path.name
    with open(path, "rb") as fh:
        while True:
            lines = fh.readlines(_BLOCK_BYTES)
            if not lines:
                return
            short = b"".join(lines).translate(_DIGIT_MAP).find(_NINETEEN) < 0
            for raw in lines:
                lineno += 1
                if not raw.strip():
                    continue
                try:
                    record = loads(raw, short)
                except UnicodeDecodeError as e:
                    raise _problem(f"{name}:{lineno}", f"not UTF-8 text ({e.reason})") from None
                except json.JSONDecodeError as e:
                    # the line ended mid-value: a cut-off last line or a torn write
                    truncated = (not raw.endswith(b"\n") or e.msg.startswith("Unterminated")
                                 or e.pos >= len(raw.rstrip()))
                    raise _problem(f"{name}:{lineno}", f"{'truncated' if truncated else 'invalid'} JSON ({e.msg}, "
                                                       f"at column {e.colno})") from None
                if not _well_formed(record, previous):
                    _validate_slow(record, f"{name}:{lineno}", previous)
                yield record
                previous = record["index"]


def decode_row(index, time, process, type_, f, value_json, where: str, short_numbers: bool = False) -> dict:
    """One Parquet row back into the record dict the rules see (not yet validated);
    `short_numbers`: as `loads`'."""
    try:
        value = loads(value_json, short_numbers)
    except (TypeError, json.JSONDecodeError) as e:
        raise _problem(where, f"value column is not valid JSON ({e})") from None
    return {"index": index, "time": time, "process": _process_from_column(process),
            "type": type_, "f": f, "value": value}


def _process_from_column(text):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def _iter_parquet(path: Path) -> Iterator[dict]:
    try:
        dataset = pq.ParquetFile(path) if path.is_file() else None
        batches = dataset.iter_batches(batch_size=65536) if dataset else \
            pq.read_table(path).to_batches(65536)
    except (pa.ArrowException, OSError) as e:
        raise _problem(path.name, f"unreadable Parquet ({e})") from None
    previous, row, name = None, 0, path.name
    cols = ("index", "time", "process", "type", "f", "value")
    for batch in batches:
        missing = [c for c in cols if c not in batch.schema.names]
        if missing:
            raise _problem(path.name, f"Parquet history is missing column {missing[0]!r}")
        short = not _long_numbers(batch.column("value"))
        columns = [batch.column(c).to_pylist() for c in cols]
        for values in zip(*columns):
            row += 1
            try:
                record = decode_row(*values, "", short)
            except HistoryError:  # decoded again to name the row: only now is its place spelt out
                decode_row(*values, f"{name}: row {row}", short)
                raise
            if not _well_formed(record, previous):
                _validate_slow(record, f"{name}: row {row}", previous)
            yield record
            previous = record["index"]


def _long_numbers(column) -> bool:
    """Whether any text of a string column holds 19 digits in a row (one vectorised scan)."""
    import pyarrow.compute as pc
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        return True  # not text: let `loads` look at each value
    return bool(pc.any(pc.match_substring_regex(column, "[0-9]{19}")).as_py())


# --- JSONL -> Parquet -------------------------------------------------------------------

def key_columns(record: dict) -> tuple[str | None, int | None]:
    """The (topic, partition) a record names directly, or (None, None)."""
    value = record["value"]
    topic, partition = value.get("topic"), value.get("partition")
    if isinstance(topic, str) and _is_int(partition):
        return topic, partition
    return None, None


def dumps_value(value: dict) -> str:
    """A record's value as the Parquet column keeps it (JSON text): through orjson when it is installed
    and the value holds no float orjson would write as null (NaN, infinities: json writes them as
    tokens `loads` reads back), else through json itself."""
    if _orjson is not None:
        try:
            text = _orjson.dumps(value, option=_orjson.OPT_NON_STR_KEYS)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate
            pass
        else:
            if b"null" not in text or not _has_odd_float(value):
                return text.decode()
    return json.dumps(value, separators=(",", ":"))


def _has_odd_float(value) -> bool:
    """A NaN or infinity anywhere in `value` (x != x is NaN; an infinity equals itself doubled)."""
    if isinstance(value, float):
        return value != value or (value != 0 and value == value * 2)
    if isinstance(value, dict):
        return any(_has_odd_float(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_odd_float(v) for v in value)
    return False


class ParquetSink:
    """Appends records to a Parquet history in batches (the explicit schema above)."""

    def __init__(self, path: str | Path, batch_rows: int = 65536):
        self.batch_rows = batch_rows
        self.rows = 0
        self._cols: dict[str, list] = {name: [] for name in PARQUET_SCHEMA.names}
        self._writer = pq.ParquetWriter(path, PARQUET_SCHEMA, compression="zstd")

    def add(self, record: dict, value_json: str | None = None) -> None:
        """Append one record; `value_json` is its value already encoded, when the caller has it."""
        topic, partition = key_columns(record)
        c = self._cols
        c["index"].append(record["index"])
        c["time"].append(record["time"])
        c["process"].append(str(record["process"]))
        c["type"].append(record["type"])
        c["f"].append(record["f"])
        c["topic"].append(topic)
        c["partition"].append(partition)
        c["value"].append(value_json if value_json is not None else dumps_value(record["value"]))
        self.rows += 1
        if len(c["index"]) >= self.batch_rows:
            self._flush()

    def _flush(self):
        if self._cols["index"]:
            self._writer.write_table(pa.Table.from_pydict(self._cols, schema=PARQUET_SCHEMA))
            for v in self._cols.values():
                v.clear()

    def close(self) -> None:
        self._flush()
        self._writer.close()


def to_parquet(jsonl_path: str | Path, parquet_path: str | Path, batch_rows: int = 65536) -> int:
    """Convert a JSONL history to Parquet (streaming, validating). Returns the row count.

    Writes to a temporary name first so a failed conversion never leaves a partial file
    that `resolve` would prefer."""
    jsonl_path, parquet_path = Path(jsonl_path), Path(parquet_path)
    tmp = parquet_path.with_name(parquet_path.name + ".tmp")
    try:
        sink = ParquetSink(tmp, batch_rows)
        try:
            for record in _iter_jsonl(jsonl_path):
                sink.add(record)
        finally:
            sink.close()
        tmp.replace(parquet_path)
    finally:
        tmp.unlink(missing_ok=True)
    return sink.rows


def write_jsonl(records: Iterable[dict], path: str | Path) -> None:
    """Write records as JSONL (tests and benchmarks; the harness has its own writer)."""
    with open(path, "w") as fh:
        for r in records:
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
