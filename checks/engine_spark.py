"""The Spark engine: the same rules, run in Spark executors, for big and many histories.

Plan (one shuffle):
  1. read the Parquet history (a JSONL history is first converted with `to_parquet`);
  2. `mapInArrow`: decode and validate each row, and emit it once per (rule, group key)
     it belongs to — a record may go to several groups;
  3. `groupBy(rule, key).applyInPandas`: rebuild the group's records in index order and
     run the rule (`checks.verdict.run_rule`, the very code the local engine calls);
  4. collect the anomaly rows; counts come from a column-only aggregation.
The driver then builds the verdict with `checks.verdict.build_verdict`.
"""
from __future__ import annotations

import os
import re
import tempfile
import warnings
from pathlib import Path
from typing import Iterator, Sequence

from checks.history import HistoryError, decode_row, is_parquet, resolve, to_parquet, validate
from checks.verdict import (Counts, anomaly_from_row, anomaly_to_row, build_verdict, default_rules,
                            group_keys, no_cyclic_gc, run_rule)

DEFAULT_MASTER = "local[*]"
_COLUMNS = ("index", "time", "process", "type", "f", "value")
_GROUPED_SCHEMA = ("rule int, key string, index long, time long, process string, "
                   "type string, f string, value string")
_ANOMALY_SCHEMA = "name string, known boolean, indices array<long>, message string, details string"


def spark_session(master: str | None = None):
    """The active session when there is one and no master is asked for, else a new one.

    Local masters get the project on the workers' PYTHONPATH; on a cluster ship the
    `checks` and `reference_model` packages with `--py-files` (docs/checker.md)."""
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
               .config("spark.sql.shuffle.partitions", "8"))
    if master.startswith("local"):
        builder = builder.config("spark.driver.memory", os.environ.get("KIPCHECK_SPARK_MEMORY", "2g"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _explode(rules: Sequence):
    """mapInArrow function: validated rows, one per (rule, key) they belong to."""
    import pyarrow as pa

    schema = pa.schema([("rule", pa.int32()), ("key", pa.string()), ("index", pa.int64()),
                        ("time", pa.int64()), ("process", pa.string()), ("type", pa.string()),
                        ("f", pa.string()), ("value", pa.string())])

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = {c: [] for c in ("rule", "key", *_COLUMNS)}
            cols = [batch.column(c).to_pylist() for c in _COLUMNS]
            for row in zip(*cols):
                where = f"history row with index {row[0]}"
                record = validate(decode_row(*row, where), where)
                for i, rule in enumerate(rules):
                    for key in group_keys(rule, record):
                        out["rule"].append(i)
                        out["key"].append(key)
                        for c, v in zip(_COLUMNS, row):
                            out[c].append(v)
            yield pa.RecordBatch.from_pydict(out, schema=schema)

    return fn


def _judge(rules: Sequence, profile: str):
    """applyInPandas function: run one rule over one group."""
    import pandas as pd

    def fn(pdf: "pd.DataFrame") -> "pd.DataFrame":
        pdf = pdf.sort_values("index", kind="stable")
        rule = rules[int(pdf["rule"].iat[0])]
        key = pdf["key"].iat[0]
        with no_cyclic_gc():
            records = [decode_row(i, t, p, ty, f, v, "group")
                       for i, t, p, ty, f, v in zip(*(pdf[c].tolist() for c in _COLUMNS))]
            rows = [anomaly_to_row(a) for a in run_rule(rule, key, records, profile)]
        return pd.DataFrame(rows, columns=["name", "known", "indices", "message", "details"])

    return fn


def check_path(path: str | Path, rules: Sequence | None = None, profile: str = "kip",
               master: str | None = None, spark=None) -> dict:
    """Verdict for a run directory, JSONL or Parquet history, computed by Spark."""
    rules = default_rules() if rules is None else list(rules)
    source = resolve(path)
    with tempfile.TemporaryDirectory(prefix="kipcheck-") as tmp:
        if not is_parquet(source):
            converted = Path(tmp) / "history.parquet"
            to_parquet(source, converted)  # validates every line, naming it on error
            source = converted
        spark = spark or spark_session(master)
        try:
            return _run(spark, str(source), rules, profile)
        except Exception as e:  # executor errors arrive wrapped; surface ours as one line
            m = re.search(r"HistoryError: ([^\n]*)", str(e))
            if m:
                raise HistoryError(m.group(1)) from None
            raise


def _run(spark, source: str, rules: Sequence, profile: str) -> dict:
    df = spark.read.parquet(source).select(*_COLUMNS)
    counts = Counts()
    for row in df.groupBy("f", "type").count().collect():
        counts.add(row["f"], row["type"], row["count"])
    grouped = df.mapInArrow(_explode(rules), _GROUPED_SCHEMA)
    found = grouped.groupBy("rule", "key").applyInPandas(_judge(rules, profile), _ANOMALY_SCHEMA)
    anomalies = [anomaly_from_row(r.asDict()) for r in found.collect()]
    return build_verdict(anomalies, counts, profile, engine="spark")
