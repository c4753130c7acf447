"""Checker throughput on synthetic valid histories of 1e5, 1e6, 1e7 events.

    python benchmarks/bench_checker.py [--sizes 1e5,1e6,1e7] [--local-max 1e6] [--master local[2]]
                                       [--baseline REV] [--baseline-max 1e5]

Each history is generated once to DIR/<n>/history.{jsonl,parquet} (streaming: never held
in memory; sizes above --local-max get only the Parquet copy). Each (engine, size) runs in
a fresh subprocess so its peak RSS is its own: the process tree (Python, Spark's JVM and
its Python workers) is sampled every 0.2 s, and the JVM + workers part is shown apart.
Prints wall time, events/s, time(10x)/time(x), peak RSS and the load average (1 min) at
the start and end of each run. The Spark time excludes the session start-up (shown apart);
the local engine also reports its CPU time, which other load does not inflate.

`--baseline REV` (default: the commit before the streaming rewrite) also runs the
checker of that git revision (extracted with `git archive` to a temporary directory) on
sizes up to --baseline-max, right after the current one, and prints new/old speed-up.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("KIPCHECK_BENCH_ROOT", str(ROOT)))
#: where the checker under test imports from: `kipcheck.checks` (this tree, or a baseline's from `baseline_tree`),
#: or `checks` for a revision from before the package was named kipcheck
CHECKER_PACKAGE = os.environ.get("KIPCHECK_BENCH_CHECKER", "kipcheck.checks")


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


def children_rss(pid: int) -> int:
    """RSS of the descendants only (Spark: the JVM and its Python workers)."""
    return tree_rss(pid) - tree_rss_one(pid)


def tree_rss_one(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


class PeakRss(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak = self.peak_self = self.peak_children = 0
        self.running = True

    def sample(self):
        me = tree_rss_one(os.getpid())
        total = tree_rss(os.getpid())
        self.peak = max(self.peak, total)
        self.peak_self = max(self.peak_self, me)
        self.peak_children = max(self.peak_children, total - me)

    def run(self):
        while self.running:
            self.sample()
            time.sleep(0.2)


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return fh.read().split()[0]


DEFAULT_BASELINE = "902199df14d4f8d9ab6eadd68cd7b6a27008e275"  # before the streaming rewrite


def make_history(n: int, directory: Path, jsonl: bool = True) -> Path:
    """Write the synthetic history of n events as Parquet (and JSONL when asked).

    The Parquet copy has `to_parquet`'s schema; the value JSON is written by orjson when
    installed (the synthetic values are plain strings and ints, so it is the same JSON)."""
    from kipcheck.rundir.history import ParquetSink
    from tests.synthetic import generate

    try:
        import orjson

        def dumps(v):
            return orjson.dumps(v).decode()
    except ImportError:
        def dumps(v):
            return json.dumps(v, separators=(",", ":"))

    directory.mkdir(parents=True, exist_ok=True)
    jsonl_path, parquet_path = directory / "history.jsonl", directory / "history.parquet"
    if parquet_path.exists() and (jsonl_path.exists() or not jsonl):
        return directory
    sink = ParquetSink(directory / "history.parquet.tmp")
    fh = open(directory / "history.jsonl.tmp", "w") if jsonl else None
    for r in generate(n, seed=n, partitions=8, producers=8, consumers=4):
        value = dumps(r["value"])
        if fh is not None:
            fh.write(f'{{"index":{r["index"]},"time":{r["time"]},"process":{json.dumps(r["process"])},'
                     f'"type":"{r["type"]}","f":"{r["f"]}","value":{value}}}\n')
        sink.add(r, value)
    sink.close()
    if fh is not None:
        fh.close()
        (directory / "history.jsonl.tmp").replace(jsonl_path)
    (directory / "history.parquet.tmp").replace(parquet_path)
    return directory


def run_one(engine: str, directory: str, master: str) -> dict:
    """In the subprocess: time one check, report JSON on stdout."""
    monitor = PeakRss()
    monitor.start()
    startup = 0.0
    load0 = loadavg()
    if engine == "spark":
        engine_spark = importlib.import_module(f"{CHECKER_PACKAGE}.engine_spark")
        check_path, spark_session = engine_spark.check_path, engine_spark.spark_session
        t0 = time.perf_counter()
        spark = spark_session(master)
        # a first small check warms the JVM up (class loading, JIT): counted as start-up
        warm = make_history(2000, Path(directory).parent / "warmup-2000", jsonl=False)
        check_path(warm / "history.parquet", spark=spark)
        startup = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        verdict = check_path(Path(directory) / "history.parquet", spark=spark)
    else:
        check_path = importlib.import_module(f"{CHECKER_PACKAGE}.engine_local").check_path
        t0, c0 = time.perf_counter(), time.process_time()
        verdict = check_path(Path(directory) / "history.jsonl")
    elapsed = time.perf_counter() - t0
    monitor.running = False
    monitor.sample()
    return {"seconds": elapsed, "cpu": time.process_time() - c0, "startup": startup,
            "records": verdict["counts"]["records"], "valid": verdict["valid"],
            "peak_rss_mb": monitor.peak / 2**20, "peak_self_mb": monitor.peak_self / 2**20,
            "peak_children_mb": monitor.peak_children / 2**20, "load": f"{load0}->{loadavg()}"}


def baseline_tree(rev: str, parent: Path = Path("/tmp")) -> tuple[Path, str]:
    """The whole tree of git revision `rev`, extracted to a directory: (the directory to put first
    on the path, the package its checker imports as). A revision with the `kipcheck` package
    reaches its own folders from its kipcheck/__init__.py, so `kipcheck.checks` is the baseline's
    and not the editable install's; an older one imports its checker as `checks`."""
    target = parent / f"kipcheck-baseline-{rev[:12]}-whole"  # "-whole": this function once extracted checks/ alone
    if not (target / "pyproject.toml").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target, "kipcheck.checks" if (target / "kipcheck" / "__init__.py").exists() else "checks"


def run_subprocess(engine: str, directory: Path, master: str, baseline: tuple[Path, str] | None = None) -> dict | str:
    env = dict(os.environ)
    if baseline is not None:  # its checker first on the path (driver and workers)
        code_root, checker = baseline
        env["PYTHONPATH"] = os.pathsep.join([str(code_root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env["KIPCHECK_BENCH_ROOT"] = str(code_root)
        env["KIPCHECK_BENCH_CHECKER"] = checker
    out = subprocess.run([sys.executable, __file__, "--one", engine, str(directory), "--master", master],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        return f"FAILED {out.stderr.strip().splitlines()[-1:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e5,1e6,1e7")
    ap.add_argument("--local-max", default="1e6", help="largest size for the local engine")
    ap.add_argument("--engines", default="local,spark")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--dir", default="/tmp/kipcheck-bench")
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare with ('' for none)")
    ap.add_argument("--baseline-max", default="1e5", help="largest size the baseline runs on")
    ap.add_argument("--one", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one[0], args.one[1], args.master)))
        return
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    engines = args.engines.split(",")
    results: dict[tuple[str, int], dict] = {}
    print(f"kipcheck checker benchmark, master {args.master}, {os.cpu_count()} cores, "
          f"load average {loadavg()}", flush=True)
    for n in sizes:
        t0 = time.perf_counter()
        local = "local" in engines and n <= float(args.local_max)
        d = make_history(n, Path(args.dir) / str(n), jsonl=local)
        print(f"history {n:>10,} events ready in {time.perf_counter() - t0:7.1f} s  ({d})", flush=True)
        for engine in engines:
            if engine == "local" and not local:
                continue
            r = run_subprocess(engine, d, args.master)
            if isinstance(r, str):
                print(f"{engine:>5} {n:>10,}: {r}", flush=True)
                continue
            results[(engine, n)] = r
            prev = results.get((engine, n // 10))
            ratio = f"{r['seconds'] / prev['seconds']:5.1f}" if prev else "    -"
            if prev and engine == "local":  # CPU time: what other load does not inflate
                ratio += f" (cpu {r['cpu'] / prev['cpu']:.1f})"
            rss = (f"peak RSS {r['peak_rss_mb']:6.0f} MB (driver {r['peak_self_mb']:.0f}, JVM+workers "
                   f"{r['peak_children_mb']:.0f})" if engine == "spark" else f"peak RSS {r['peak_rss_mb']:6.0f} MB")
            line = (f"{engine:>5} {n:>10,} events: {r['seconds']:8.1f} s  {r['records'] / r['seconds']:>8,.0f} ev/s"
                    f"  time(10x)/time(x) {ratio}  {rss}  valid={r['valid']}"
                    + (f"  (+{r['startup']:.1f} s session start)" if engine == "spark" else f"  cpu {r['cpu']:.1f} s")
                    + f"  load {r['load']}")
            if args.baseline and n <= float(args.baseline_max):
                b = run_subprocess(engine, d, args.master, baseline_tree(args.baseline))
                if isinstance(b, str):
                    line += f"\n      baseline {args.baseline[:8]}: {b}"
                else:
                    line += (f"\n      baseline {args.baseline[:8]}: {b['seconds']:8.1f} s "
                             f"{b['records'] / b['seconds']:>8,.0f} ev/s  peak RSS {b['peak_rss_mb']:6.0f} MB"
                             f"  valid={b['valid']}  load {b['load']}  -> speed-up x{b['seconds'] / r['seconds']:.2f}"
                             + (f" (cpu {b['cpu']:.1f} s: x{b['cpu'] / r['cpu']:.2f})" if engine == "local" else ""))
            print(line, flush=True)

if __name__ == "__main__":
    main()
