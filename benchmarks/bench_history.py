"""History recording cost: producer throughput with and without recording, and writer speed.

Prints:
- records/s the History writer sustains (several threads appending, as workers do),
- acknowledged sends/s of the workload's pipelined ProducerWorkers (unthrottled: `rate`
  0) against a healthy 3-node cluster, recording to a JSONL history and recording
  nothing, in alternating slices of one run, and their ratio (targets: >= 20,000
  acknowledged sends/s with recording, ratio >= 0.9).

    python benchmarks/bench_history.py [--seconds 20] [--producers 2] [--in-flight 1024] [--kafka-version 4.3.1]

Use `--writer-only` to skip the cluster.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kipcheck.rundir.writer import History  # noqa: E402


class NoHistory(History):
    """A History that keeps nothing: the baseline for recording cost."""

    def append(self, process, type_, f, value):
        return {"index": 0, "time": 0, "process": process, "type": type_, "f": f, "value": value}

    def append_batch(self, entries):
        return [{"index": 0, "time": 0, "process": process, "type": type_, "f": f, "value": value}
                for process, type_, f, value in entries]

    def close(self):
        super().close()
        self.path.unlink(missing_ok=True)


def writer_rate(seconds: float = 3.0, threads: int = 4) -> float:
    """Records per second `threads` appenders sustain into one JSONL history."""
    with tempfile.TemporaryDirectory() as d:
        history = History(Path(d) / "history.jsonl")
        stop = time.monotonic() + seconds
        counts = [0] * threads

        def append(i):
            value = {"topic": "kipcheck", "partition": i, "key": "k", "value": "v" * 16}
            while time.monotonic() < stop:
                for _ in range(100):
                    history.append(i, "invoke", "send", value)
                counts[i] += 100

        workers = [threading.Thread(target=append, args=(i,)) for i in range(threads)]
        t0 = time.monotonic()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - t0
        history.close()
        return sum(counts) / elapsed


def ratio_interval(pairs: list[dict[str, float]], draws: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """The run's recorded/unrecorded ratio (of the rates summed over the pairs of slices) with a 95 %
    bootstrap interval: the pairs drawn again with replacement `draws` times (a fixed seed, so one
    run's figures print the same), the 2.5th and 97.5th percentiles of the ratio of each draw. On a
    busy 2-core machine one pair's ratio ran from 0.4 to 1.9 within a run: the interval says how far
    the run's single ratio can be trusted against the 0.9 target."""
    pairs = [p for p in pairs if p.get("recorded") is not None and p.get("unrecorded")]
    if not pairs:
        raise ValueError("no complete pair of slices")
    recorded, unrecorded = [p["recorded"] for p in pairs], [p["unrecorded"] for p in pairs]
    point = sum(recorded) / sum(unrecorded)
    rng, n, ratios = random.Random(seed), len(pairs), []
    for _ in range(draws):
        picks = [rng.randrange(n) for _ in range(n)]
        ratios.append(sum(recorded[i] for i in picks) / sum(unrecorded[i] for i in picks))
    ratios.sort()
    return point, ratios[int(0.025 * (draws - 1))], ratios[int(0.975 * (draws - 1))]


def producer_rates(bootstrap: str, topic: str, seconds: float, producers: int, in_flight: int,
                   run_dir: Path, requests: int = 1, sync_interval: float = 0.5) -> dict[str, float]:
    """Acknowledged sends/s of the workload's producers with and without recording,
    interleaved in alternating slices so both see the same cluster conditions."""
    from kipcheck.harness.clients.workload import ProducerWorker, WorkloadOptions
    options = WorkloadOptions(topic=topic, partitions=3, producers=producers, in_flight=in_flight, rate=0,
                              max_in_flight_requests=requests)
    histories = {"recorded": History(run_dir / "history.jsonl", sync_interval=sync_interval),
                 "unrecorded": NoHistory(run_dir / "none.jsonl")}
    totals = {name: [0, 0.0] for name in histories}
    cpu = {name: 0.0 for name in histories}
    slice_s = 2.0
    pairs: list[dict[str, float]] = []  # each pair's two rates, for their spread
    for n in range(int(seconds / slice_s) * 2):
        # ABBA: a pair's first slice alternates, so a drift of the cluster over the run (its log and page cache
        # growing) falls on both variants alike instead of always favouring the one measured first
        name = ("recorded", "unrecorded")[(n + n // 2) % 2]
        if n % 2 == 0:
            pairs.append({})
        stop = threading.Event()
        workers = [ProducerWorker(bootstrap, options, histories[name], stop, i) for i in range(producers)]
        for w in workers:
            w.start()
        time.sleep(0.5)  # connect and warm up outside the measured window
        before, t0, c0 = sum(w.sent for w in workers), time.monotonic(), time.process_time()
        time.sleep(slice_s)
        sent, elapsed = sum(w.sent for w in workers) - before, time.monotonic() - t0
        totals[name][0] += sent
        totals[name][1] += elapsed
        pairs[-1][name] = sent / elapsed
        cpu[name] += time.process_time() - c0
        stop.set()
        for w in workers:
            w.join(30)
            if w.error:
                raise w.error
    for h in histories.values():
        h.close()
    print(f"history: {(run_dir / 'history.jsonl').stat().st_size / 1e6:,.0f} MB for the recorded slices")
    ratios = sorted(p["recorded"] / p["unrecorded"] for p in pairs if p.get("unrecorded"))
    print(f"ratio per pair of slices ({len(ratios)}): median {statistics.median(ratios):.3f}, "
          f"from {ratios[0]:.3f} to {ratios[-1]:.3f}")
    point, low, high = ratio_interval(pairs)
    print(f"ratio of the pairs' summed rates: {point:.3f}, 95 % bootstrap interval {low:.3f}-{high:.3f}"
          f"{' (the target 0.9 inside it)' if low < 0.9 <= high else ''}")
    for name, (sent, _) in totals.items():
        print(f"harness CPU per acknowledged send, {name}: {cpu[name] / max(sent, 1) * 1e6:.1f} us "
              f"(client library included)")
    return {name: sent / elapsed for name, (sent, elapsed) in totals.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0,
                   help="measured seconds per variant (the brokers take ~10 s to reach their pace)")
    p.add_argument("--producers", type=int, default=2)
    p.add_argument("--in-flight", type=int, default=1024,
                   help="sends outstanding per producer (with one request per broker, throughput is about "
                        "in-flight / round trip)")
    p.add_argument("--requests", type=int, default=1, help="max.in.flight.requests.per.connection (1..5)")
    p.add_argument("--sync-interval", type=float, default=0.5, help="seconds between the history's fsyncs")
    p.add_argument("--kafka-version", default=None)
    p.add_argument("--writer-only", action="store_true")
    args = p.parse_args(argv)

    print("load average at the start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    rate = writer_rate()
    print(f"history writer: {rate:,.0f} records/s (4 threads, JSONL, handed to the OS every 2 ms, "
          f"fsync every 0.5 s)")
    if args.writer_only:
        return 0

    from kipcheck.harness.clients.admin import Admin
    from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
    from kipcheck.harness.backends.kafka_dist import resolve
    with tempfile.TemporaryDirectory(prefix="kipcheck-bench-") as d:
        cluster = NativeCluster(resolve(args.kafka_version), Path(d) / "cluster", ClusterOptions(brokers=3),
                                owner_pid=os.getpid())
        try:
            cluster.up()
            Admin(cluster.bootstrap_servers()).create_topic("bench", 3, 3)
            Admin(cluster.bootstrap_servers()).wait_full_isr("bench", 60)
            rates = producer_rates(cluster.bootstrap_servers(), "bench", args.seconds, args.producers,
                                   args.in_flight, Path(d), args.requests, args.sync_interval)
        finally:
            cluster.down()
    ratio = rates["recorded"] / rates["unrecorded"]
    print("load average at the end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"acknowledged sends/s without recording: {rates['unrecorded']:,.0f} "
          f"({args.producers} producers x {args.in_flight} in flight, {args.requests} request(s) per broker)")
    print(f"acknowledged sends/s with recording:    {rates['recorded']:,.0f} (target >= 20,000)")
    print(f"ratio recorded/unrecorded: {ratio:.3f} (target >= 0.9) {'OK' if ratio >= 0.9 else 'BELOW TARGET'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
