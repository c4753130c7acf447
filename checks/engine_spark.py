"""The Spark engine: the same rules, run in Spark executors, for big and many histories.

Plan (one shuffle, every record decoded once):
  1. read the Parquet history (a JSONL history is first converted with `to_parquet`,
     which validates every line: that temporary Parquet is trusted, a Parquet file given
     by the user is validated row by row in step 2);
  2. `mapInArrow` (keying): decode each row's JSON once, validate it, and emit one row
     `(rule, key, index, payload)` per group it belongs to, where the payload is the
     record as that group needs it (`checks.verdict.Dispatch`: a poll's row for one
     partition carries only that partition's records), pickled;
  3. `repartition(rule, key)` + `sortWithinPartitions(rule, key, index)`: Spark's JVM
     shuffles and sorts (spilling to disk as it needs), so each task sees its groups one
     after another, each in index order;
  4. `mapInArrow` (judging): stream through the sorted rows, cut them into groups and run
     each rule on its group (`checks.verdict.run_rule`, or the rule's streaming judge,
     `checks.verdict.starter`: the very code the local engine calls). Only one group is
     in a Python worker at a time; a streaming judge (the history rule) or a rule that
     reads its records once (`one_pass`) gets them as they are unpickled, never as a
     list, so a worker holds only that judge's compact summary;
  5. collect the anomaly rows; counts come from a column-only aggregation.
The driver then builds the verdict with `checks.verdict.build_verdict`.
"""
from __future__ import annotations

import os
import pickle
import re
import tempfile
import warnings
from itertools import groupby
from pathlib import Path
from typing import Iterator, Sequence

from kipcheck.checks.conformance import run_context
from kipcheck.rundir.history import HistoryError, decode_row, is_parquet, resolve, to_parquet, validate
from kipcheck.checks.verdict import (Counts, Dispatch, anomaly_from_row, anomaly_to_row, as_row, build_verdict,
                            default_rules, from_row, no_cyclic_gc, run_rule, starter)

DEFAULT_MASTER = "local[*]"
_COLUMNS = ("index", "time", "process", "type", "f", "value")
_KEYED_SCHEMA = "run int, rule int, key string, index long, payload binary"
_ANOMALY_SCHEMA = "run int, name string, known boolean, indices array<long>, message string, details string"
_ANOMALY_COLUMNS = ("name", "known", "indices", "message", "details")


def driver_memory() -> str:
    """KIPCHECK_SPARK_MEMORY, the local driver's memory in the JVM's form (default 2g). Spark reads it only
    when the session starts, after a run's cluster: a bad value is a one-line ValueError naming the
    variable, which `kipcheck run` asks for before anything starts (harness.campaign.check_engine_environment)."""
    text = os.environ.get("KIPCHECK_SPARK_MEMORY", "2g")
    if not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", text):
        raise ValueError(f"KIPCHECK_SPARK_MEMORY must be a JVM memory size such as 2g or 512m, got {text!r}")
    return text


def spark_session(master: str | None = None):
    """The active session when there is one and no master is asked for, else a new one.

    Local masters get the project on the workers' PYTHONPATH; any other master gets the
    `checks` and `reference_model` packages shipped as a zip (`package_zip`)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    master = master or DEFAULT_MASTER
    if master.startswith("local"):
        root = str(Path(__file__).resolve().parent.parent)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    builder = (SparkSession.builder.master(master).appName("kipcheck-check")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.shuffle.partitions", "8")
               # smaller input splits than the 128 MB default: a big history is read by
               # more tasks than cores, so the cores stay evenly busy in the keying pass
               .config("spark.sql.files.maxPartitionBytes", str(32 * 2**20)))
    if master.startswith("local"):
        builder = builder.config("spark.driver.memory", driver_memory())
    else:  # executors elsewhere get this very checker, whatever is installed there
        builder = builder.config("spark.submit.pyFiles", str(package_zip()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def package_zip() -> Path:
    """`kipcheck.checks`, `kipcheck.reference_model` and `kipcheck.rundir` (all the executors run), with the
    bottom modules beside `kipcheck/__init__.py` that every layer may import (`kipcheck.effects`,
    `kipcheck.errors`), as a zip for spark.submit.pyFiles, rebuilt per process in the temporary directory."""
    import zipfile

    import kipcheck
    root = Path(__file__).resolve().parent.parent  # holds checks/ and reference_model/ (checkout or wheel)
    out = Path(tempfile.gettempdir()) / f"kipcheck-checker-{os.getpid()}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(Path(kipcheck.__file__).parent.glob("*.py")):
            z.write(f, f"kipcheck/{f.name}")
        for package in ("checks", "reference_model", "rundir"):
            for f in sorted((root / package).rglob("*.py")):
                z.write(f, Path("kipcheck") / f.relative_to(root))
    return out


def _keyer(run_rules: Sequence[Sequence], trusted: bool):
    """mapInArrow function: one (run, rule, key, index, pickled record part) row per group
    of each record; rows are validated unless the Parquet files are `trusted`."""
    import pyarrow as pa

    schema = pa.schema([("run", pa.int32()), ("rule", pa.int32()), ("key", pa.string()), ("index", pa.int64()),
                        ("payload", pa.binary())])
    dumps, protocol = pickle.dumps, pickle.HIGHEST_PROTOCOL
    dispatches = [Dispatch(rules) for rules in run_rules]

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with no_cyclic_gc():
            for batch in batches:
                run_col, rule_col, key_col, index_col, payload_col = [], [], [], [], []
                cols = [batch.column(c).to_pylist() for c in _COLUMNS]
                for run, *row in zip(batch.column("run").to_pylist(), *cols):
                    if trusted:
                        record = decode_row(*row, f"history row with index {row[0]}")
                    else:
                        where = f"history row with index {row[0]}"
                        record = validate(decode_row(*row, where), where)
                    index = row[0]
                    for i, key, part in dispatches[run].keyed(record):
                        run_col.append(run)
                        rule_col.append(i)
                        key_col.append(key)
                        index_col.append(index)
                        payload_col.append(dumps(as_row(part), protocol))
                if rule_col:
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(run_col, pa.int32()), pa.array(rule_col, pa.int32()), pa.array(key_col, pa.string()),
                         pa.array(index_col, pa.int64()), pa.array(payload_col, pa.binary())],
                        schema=schema)

    return fn


def _judge(run_rules: Sequence[Sequence], profiles: Sequence[str]):
    """mapInArrow function: rows sorted by (run, rule, key, index) in, anomaly rows out;
    run number r is judged under `profiles[r]`."""
    import pyarrow as pa

    schema = pa.schema([("run", pa.int32()), ("name", pa.string()), ("known", pa.bool_()), ("indices", pa.list_(pa.int64())),
                        ("message", pa.string()), ("details", pa.string())])
    loads = pickle.loads

    def rows(batches):
        for batch in batches:
            yield from zip(batch.column("run").to_pylist(), batch.column("rule").to_pylist(),
                           batch.column("key").to_pylist(), batch.column("payload").to_pylist())

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with no_cyclic_gc():
            for (run, i, key), group in groupby(rows(batches), key=lambda r: (r[0], r[1], r[2])):
                rule = run_rules[run][i]
                profile = profiles[run]
                start = starter(rule, key)
                if start is not None:  # a streaming judge: each record in, none held
                    judge = start(key, profile)
                    add = judge.add
                    for *_, payload in group:
                        add(from_row(loads(payload)))
                    found = [anomaly_to_row(a) for a in judge.finish()]
                else:
                    records = (from_row(loads(payload)) for *_, payload in group)
                    if not rule.one_pass:
                        records = list(records)
                    found = [anomaly_to_row(a) for a in run_rule(rule, key, records, profile)]
                for _ in group:  # a one-pass rule that stopped early: skip the group's rest
                    pass
                if found:
                    yield pa.RecordBatch.from_pydict(
                        {"run": [run] * len(found), **{c: [a[c] for a in found] for c in _ANOMALY_COLUMNS}},
                        schema=schema)

    return fn


def check_path(path: str | Path, rules: Sequence | None = None, profile: str = "kip",
               master: str | None = None, spark=None) -> dict:
    """Verdict for a run directory, JSONL or Parquet history, computed by Spark."""
    return check_paths([path], None if rules is None else [rules], [profile], master, spark)[0]


def check_paths(paths: Sequence[str | Path], rules: Sequence[Sequence] | None = None,
                profiles: Sequence[str] | None = None, master: str | None = None, spark=None) -> list[dict]:
    """Verdicts for many runs (or histories) from ONE Spark job: every record is keyed by
    its run as well, so groups of all runs spread over the cluster together, and each
    run's verdict is exactly the one `check_path` gives it alone. `rules[i]` (a rule list:
    the same rules, with that run's parameters such as its recovery bound) and
    `profiles[i]` judge `paths[i]` (defaults: `default_rules()`, `kip`)."""
    run_rules = [default_rules() for _ in paths] if rules is None else [list(r) for r in rules]
    profiles = list(profiles) if profiles is not None else ["kip"] * len(paths)
    if len(profiles) != len(paths):
        raise ValueError("one profile per path")
    with tempfile.TemporaryDirectory(prefix="kipcheck-") as tmp:
        sources, trusted = [], []
        for n, path in enumerate(paths):
            source = resolve(path)
            if not is_parquet(source):
                converted = Path(tmp) / f"history-{n}.parquet"
                to_parquet(source, converted)  # validates every line, naming it on error
                source = converted
                trusted.append(True)
            else:
                trusted.append(False)
            sources.append(str(source))
        spark = spark or spark_session(master)
        try:
            return _run(spark, sources, run_rules, profiles, all(trusted), [run_context(p) for p in paths])
        except Exception as e:  # executor errors arrive wrapped; surface ours as one line
            m = re.search(r"HistoryError: ([^\n]*)", str(e))
            if m:
                raise HistoryError(m.group(1)) from None
            raise


def _run(spark, sources: Sequence[str], run_rules: Sequence[Sequence], profiles: Sequence[str],
         trusted: bool = False, contexts: Sequence[dict | None] = ()) -> list[dict]:
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [spark.read.parquet(src).select(F.lit(n).cast("int").alias("run"), *_COLUMNS)
              for n, src in enumerate(sources)]
    df = reduce(lambda a, b: a.unionByName(b), frames)
    counts = [Counts() for _ in sources]
    for row in df.groupBy("run", "f", "type").count().collect():
        counts[row["run"]].add(row["f"], row["type"], row["count"])
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions", "8"))
    found = (df.mapInArrow(_keyer(run_rules, trusted), _KEYED_SCHEMA)
             .repartition(partitions, "run", "rule", "key")
             .sortWithinPartitions("run", "rule", "key", "index")
             .mapInArrow(_judge(run_rules, profiles), _ANOMALY_SCHEMA))
    anomalies: list[list] = [[] for _ in sources]
    for r in found.collect():
        row = r.asDict()
        anomalies[row.pop("run")].append(anomaly_from_row(row))
    contexts = list(contexts) or [None] * len(sources)
    return [build_verdict(anomalies[n], counts[n], profiles[n], engine="spark", rules=run_rules[n],
                          context=contexts[n]) for n in range(len(sources))]
