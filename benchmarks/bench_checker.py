"""Checker throughput on synthetic valid histories of 1e5, 1e6, 1e7 events.

    python benchmarks/bench_checker.py [--sizes 1e5,1e6,1e7] [--local-max 1e6] [--master local[2]]

Each history is generated once to DIR/<n>/history.{jsonl,parquet} (streaming: never held
in memory). Each (engine, size) runs in a fresh subprocess so its peak RSS (the process
and its children, e.g. Spark's JVM, sampled every 0.2 s) is its own. Prints events/s,
time(10x)/time(x) and peak RSS; the Spark time excludes the session start-up, shown apart.
Wall times on a shared machine are inflated by other load; the local engine also reports
its CPU time, which is not (the Spark CPU is spread over the JVM and Python workers).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def tree_rss(pid: int) -> int:
    """RSS in bytes of a process and all its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as fh:
                total += int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            pass
    return total


class PeakRss(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak, self.running = 0, True

    def run(self):
        while self.running:
            self.peak = max(self.peak, tree_rss(os.getpid()))
            time.sleep(0.2)


def make_history(n: int, directory: Path) -> Path:
    from checks.history import ParquetSink
    from checks.synthetic import generate

    directory.mkdir(parents=True, exist_ok=True)
    jsonl, parquet = directory / "history.jsonl", directory / "history.parquet"
    if jsonl.exists() and parquet.exists():
        return directory
    sink = ParquetSink(directory / "history.parquet.tmp")
    with open(directory / "history.jsonl.tmp", "w") as fh:
        for r in generate(n, seed=n, partitions=8, producers=8, consumers=4):
            fh.write(json.dumps(r, separators=(",", ":")) + "\n")
            sink.add(r)
    sink.close()
    (directory / "history.jsonl.tmp").replace(jsonl)
    (directory / "history.parquet.tmp").replace(parquet)
    return directory


def run_one(engine: str, directory: str, master: str) -> dict:
    """In the subprocess: time one check, report JSON on stdout."""
    monitor = PeakRss()
    monitor.start()
    startup = 0.0
    if engine == "spark":
        from checks.engine_spark import check_path, spark_session
        t0 = time.perf_counter()
        spark = spark_session(master)
        startup = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        verdict = check_path(Path(directory) / "history.parquet", spark=spark)
    else:
        from checks.engine_local import check_path
        t0, c0 = time.perf_counter(), time.process_time()
        verdict = check_path(Path(directory) / "history.jsonl")
    elapsed = time.perf_counter() - t0
    monitor.running = False
    return {"seconds": elapsed, "cpu": time.process_time() - c0, "startup": startup, "records": verdict["counts"]["records"],
            "valid": verdict["valid"], "peak_rss_mb": max(monitor.peak, tree_rss(os.getpid())) / 2**20}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e5,1e6,1e7")
    ap.add_argument("--local-max", default="1e6", help="largest size for the local engine")
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default="/tmp/kipcheck-bench")
    ap.add_argument("--one", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], args.master)))
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    results: dict[tuple[str, int], dict] = {}
    for n in sizes:
        t0 = time.perf_counter()
        d = make_history(n, Path(args.dir) / str(n))
        print(f"history {n:>10,} events ready in {time.perf_counter() - t0:7.1f} s  ({d})", flush=True)
        for engine in args.engines.split(","):
            if engine == "local" and n > float(args.local_max):
                continue
            out = subprocess.run([sys.executable, __file__, "--one", engine, str(d), "--master", args.master],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{engine:>5} {n:>10,}: FAILED {out.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            r = results[(engine, n)] = json.loads(out.stdout.strip().splitlines()[-1])
            prev = results.get((engine, n // 10))
            ratio = f"{r['seconds'] / prev['seconds']:5.1f}" if prev else "    -"
            print(f"{engine:>5} {n:>10,} events: {r['seconds']:8.1f} s  {r['records'] / r['seconds']:>10,.0f} ev/s"
                  f"  time(10x)/time(x) {ratio}  peak RSS {r['peak_rss_mb']:7.0f} MB"
                  f"  valid={r['valid']}" + (f"  (+{r['startup']:.1f} s session start)" if engine == "spark"
                                             else f"  cpu {r['cpu']:.1f} s"),
                  flush=True)


if __name__ == "__main__":
    main()
