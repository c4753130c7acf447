"""Cluster figures: Kafka resolution cold and warm, 3-node start to ready, teardown.

    python benchmarks/bench_cluster.py [--kafka-version 4.3.1] [--repeat 3]
    python benchmarks/bench_cluster.py --versions all-kraft [--repeat 1]   # start time per release

With `--versions` (a comma-separated list, or `all-kraft`: the newest patch of every KRaft
minor line from harness.backends.releases) it prints, per version, the warm resolution and the
start-to-ready time, and each version's ratio against the first one, measured in this process.

Prints figures; asserts nothing (targets live in the issue: ready in <= 20 s warm).
"Cold" resolves into an empty Maven repository and cache, so it downloads every jar.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kipcheck.harness.backends import kafka_dist, releases  # noqa: E402
from kipcheck.harness.backends.cluster import NativeCluster  # noqa: E402


def timed(fn):
    t0 = time.monotonic()
    result = fn()
    return time.monotonic() - t0, result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka-version", default="4.3.1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-cold", action="store_true")
    ap.add_argument("--versions", help="comma-separated versions or `all-kraft`: start time per release")
    args = ap.parse_args()
    if args.versions:
        per_version(args.versions, args.repeat)
        return

    if not args.skip_cold:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as repo:
            os.environ["KIPCHECK_CACHE"], os.environ["KIPCHECK_MAVEN_REPO"] = cache, repo
            cold, _ = timed(lambda: kafka_dist.resolve(args.kafka_version))
            del os.environ["KIPCHECK_CACHE"], os.environ["KIPCHECK_MAVEN_REPO"]
    warm, dist = timed(lambda: kafka_dist.resolve(args.kafka_version))
    if not args.skip_cold:
        print(f"resolve Kafka {dist.version}: cold {cold:.1f} s, warm {warm * 1000:.1f} ms "
              f"(cold/warm {cold / max(warm, 1e-6):.0f}x)")
    else:
        print(f"resolve Kafka {dist.version}: warm {warm * 1000:.1f} ms")

    ups, downs = [], []
    with tempfile.TemporaryDirectory() as root:
        for i in range(args.repeat):
            c = NativeCluster(dist, Path(root) / f"c{i}", owner_pid=os.getpid())
            try:
                up, _ = timed(c.up)
            finally:
                down, _ = timed(c.down)
            ups.append(up)
            downs.append(down)
            print(f"  run {i + 1}: ready {up:.1f} s, teardown {down:.1f} s ({c.mode})")
    print(f"3 nodes start to ready: median {statistics.median(ups):.1f} s (min {min(ups):.1f}, max {max(ups):.1f}); "
          f"target <= 20 s")
    print(f"teardown: median {statistics.median(downs):.1f} s; ready/teardown ratio "
          f"{statistics.median(ups) / statistics.median(downs):.1f}")


def start_times(dist, repeat: int) -> list[float]:
    """Start-to-ready seconds of `repeat` fresh 3-node clusters of `dist`."""
    ups = []
    with tempfile.TemporaryDirectory() as root:
        for i in range(repeat):
            c = NativeCluster(dist, Path(root) / f"c{i}", owner_pid=os.getpid())
            try:
                up, _ = timed(c.up)
            finally:
                c.down()
            ups.append(up)
    return ups


def per_version(versions: str, repeat: int) -> None:
    """Cluster start time per Kafka release; the first version is the baseline."""
    names = releases.all_kraft() if versions == "all-kraft" else [v.strip() for v in versions.split(",") if v.strip()]
    baseline = None
    print(f"{'version':>8}  {'resolve':>9}  {'ready (median)':>14}  ratio")
    for v in names:
        try:
            warm, dist = timed(lambda: kafka_dist.resolve(v))
            up = statistics.median(start_times(dist, repeat))
        except Exception as e:  # one release that cannot start must not hide the others
            print(f"{v:>8}  failed: {str(e)[:120]}")
            continue
        baseline = baseline or up
        print(f"{v:>8}  {warm:>8.1f}s  {up:>13.1f}s  {up / baseline:.2f}x")


if __name__ == "__main__":
    main()
