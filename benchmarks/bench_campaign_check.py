"""A night of histories: N runs checked one by one (one Spark job each) against all N in ONE
Spark job (checks.engine_spark.check_paths), on the same Spark cluster, in one process.

    python benchmarks/bench_campaign_check.py [--runs 12] [--events 20000] [--master spark://...|local[2]]

Without --master a standalone master + worker is started on loopback (harness.spark_standalone)
and stopped at the end. Both ways share one Spark session (its start-up is printed apart), run
once as a warm-up first. Prints wall times, events/s and the ratio one-by-one / one-job, and
checks that both give the same verdicts.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_histories(directory: Path, runs: int, events: int) -> list[Path]:
    from kipcheck.rundir.history import ParquetSink
    from tests.synthetic import generate
    paths = []
    for n in range(runs):
        d = directory / f"run{n}"
        d.mkdir()
        sink = ParquetSink(d / "history.parquet")
        for record in generate(events, seed=100 + n, partitions=4):
            sink.add(record)
        sink.close()
        paths.append(d / "history.parquet")
    return paths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=12)
    ap.add_argument("--events", type=int, default=20000)
    ap.add_argument("--master", default=None, help="default: a standalone master + worker started here")
    args = ap.parse_args()
    from kipcheck.checks.engine_spark import check_path, check_paths, spark_session
    from kipcheck.checks.verdict import comparable
    from kipcheck.harness.spark_standalone import standalone_spark
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-") as tmp, contextlib.ExitStack() as stack:
        paths = write_histories(Path(tmp), args.runs, args.events)
        master = args.master or stack.enter_context(standalone_spark(Path(tmp) / "spark", cores=os.cpu_count() or 2))
        t0 = time.perf_counter()
        spark = spark_session(master)
        print(f"master {master}; session start {time.perf_counter() - t0:.1f} s; "
              f"{args.runs} histories x ~{args.events} events; load {os.getloadavg()[0]:.1f}")
        check_paths(paths[:2], spark=spark)  # warm-up: JVM classes, Python workers
        t0 = time.perf_counter()
        alone = [check_path(p, spark=spark) for p in paths]
        one_by_one = time.perf_counter() - t0
        t0 = time.perf_counter()
        together = check_paths(paths, spark=spark)
        one_job = time.perf_counter() - t0
        assert [comparable(v) for v in alone] == [comparable(v) for v in together]
        total = sum(v["counts"]["records"] for v in together)
        print(f"one by one: {one_by_one:.1f} s ({total / one_by_one:,.0f} events/s)")
        print(f"one job:    {one_job:.1f} s ({total / one_job:,.0f} events/s)")
        print(f"ratio one-by-one / one-job: {one_by_one / one_job:.2f}  (load {os.getloadavg()[0]:.1f})")
        spark.stop()


if __name__ == "__main__":
    main()
