"""HTML report cost on a big history: `kipcheck report` (reports.html.write_report) on a
synthetic history of about 10^6 records (tests/synthetic.py: ~3,700 processes, since every
timed-out send starts a new process), with fault windows and a verdict whose anomaly
examples name records spread over the whole run.

Prints:
- the time to read the history alone (rundir.history.iter_history into a list): the
  baseline, the floor of any report;
- the time of write_report (read, pair operations, build the view data and the proofs,
  write one self-contained index.html) and its ratio to the baseline (target: <= 30 s);
- the page's size, and whether every anomaly record is among the timeline's marks;
- with Chromium on PATH, the viewer's start and redraw times in the browser.

    python benchmarks/bench_report.py [--records 1000000] [--seed 0] [--keep DIR [--reuse]]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kipcheck.rundir.history import iter_history, write_jsonl  # noqa: E402
from tests.synthetic import generate  # noqa: E402
from kipcheck.reports.html import write_report  # noqa: E402

FAULTS = 6  # kill windows spread over the run
#: the synthetic clock advances 1-1000 ns a record; stretched, 10^6 records span ~10 minutes
STRETCH = 1200


def with_faults(records, faults: int) -> list[dict]:
    """The synthetic records with `faults` nemesis start/stop pairs inserted, re-indexed."""
    records = list(records)
    n = len(records)
    out = []
    at = {int(n * (k + 1) / (faults + 1)): k for k in range(faults)}
    stops = {int(n * (k + 1) / (faults + 1)) + n // (3 * (faults + 1)): k for k in range(faults)}
    for i, r in enumerate(records):
        for phase, table in (("start", at), ("stop", stops)):
            if i in table:
                value = {"fault": "kill", "phase": phase, "targets": [table[i] % 3 + 1]}
                for type_ in ("invoke", "ok"):
                    out.append({"index": 0, "time": r["time"], "process": "nemesis", "type": type_, "f": "fault",
                                "value": value})
        out.append(r)
    for i, r in enumerate(out):
        r["index"] = i
        r["time"] *= STRETCH
    return out


def forged_verdict(records: list[dict], seed: int) -> dict:
    """A verdict naming completion records spread over the run as anomaly proofs: the report
    must mark every one of them (the verdict's content is not judged here)."""
    rng = random.Random(seed)
    ok_sends = [r["index"] for r in records if r["f"] == "send" and r["type"] == "ok"]
    picks = sorted(rng.sample(ok_sends, 100))
    examples = [{"indices": [i], "message": f"benchmark anomaly at index {i}"} for i in picks[:50]]
    known = [{"indices": [i], "message": f"benchmark known deviation at index {i}"} for i in picks[50:]]
    return {"valid": False, "profile": "kafka-4.3", "anomalies": {"lost-write": examples},
            "known": {"uncommitted-read": known},
            "counts": {"anomalies": {"lost-write": 50}, "known": {"uncommitted-read": 50}}}


def browser(page: Path) -> None:
    """The page in headless Chromium: the viewer's own timings (decode + index + first draw,
    and one redraw of both views over every operation, i.e. the cost of each zoom or pan step)."""
    chromium = shutil.which("chromium")
    if chromium is None:
        print("browser: no chromium on PATH, skipped")
        return
    t = time.perf_counter()
    dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=30000",
                          "--window-size=1400,1200", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=600).stdout
    wall = time.perf_counter() - t
    load, draw = (re.search(rf'data-{k}-ms="([0-9.]+)"', dom) for k in ("load", "draw"))
    if not (load and draw):
        print("browser: the viewer did not finish")
        return
    print(f"browser: page opened and drawn in {wall:.1f} s wall (Chromium start included); viewer start "
          f"{float(load.group(1)):.0f} ms, one redraw of both views {float(draw.group(1)):.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", help="write the run directory here (else a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="reuse the history already in --keep")
    args = parser.parse_args()
    run = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    run.mkdir(parents=True, exist_ok=True)
    try:
        if args.reuse and (run / "history.jsonl").exists():
            verdict = json.loads((run / "verdict.json").read_text())
            print(f"history: reused {run / 'history.jsonl'}")
        else:
            t = time.perf_counter()
            records = with_faults(generate(args.records, seed=args.seed, producers=64, consumers=8), FAULTS)
            write_jsonl(records, run / "history.jsonl")
            verdict = forged_verdict(records, args.seed)
            (run / "verdict.json").write_text(json.dumps(verdict))
            processes = len({r["process"] for r in records})
            print(f"history: {len(records):,} records, {processes:,} processes, {FAULTS} fault windows "
                  f"(made in {time.perf_counter() - t:.1f} s)")
            del records
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
              "(wall times are noisy when other work shares the machine; CPU times less so)")

        t, c = time.perf_counter(), time.process_time()
        n = len(list(iter_history(run / "history.jsonl")))
        read_s, read_cpu = time.perf_counter() - t, time.process_time() - c
        print(f"baseline, reading the history alone: {read_s:.1f} s wall, {read_cpu:.1f} s CPU ({n:,} records)")

        t, c = time.perf_counter(), time.process_time()
        page = write_report(run)
        report_s, report_cpu = time.perf_counter() - t, time.process_time() - c
        text = page.read_text()
        data = json.loads(text.split('<script id="kipcheck-data" type="application/json">', 1)[1]
                          .split("</script>", 1)[0].replace("<\\/", "</"))
        marked = {m["index"] for m in data["marks"]} | {m["invoke"] for m in data["marks"]}
        wanted = {i for section in ("anomalies", "known") for ex in sum(verdict[section].values(), [])
                  for i in ex["indices"]}
        print(f"kipcheck report: {report_s:.1f} s wall, {report_cpu:.1f} s CPU (target <= 30 s); "
              f"{report_s / read_s:.2f}x the baseline wall, {report_cpu / read_cpu:.2f}x its CPU; "
              f"index.html {page.stat().st_size / 2**20:.1f} MiB, {data['count']:,} operations in "
              f"{len(data['labels'])} lanes")
        print(f"anomaly records marked on the timeline: {len(wanted & marked)} of {len(wanted)}")
        browser(page)
    finally:
        if not args.keep:
            shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    main()
