"""Cluster figures: Kafka resolution cold and warm, 3-node start to ready, teardown.

    python benchmarks/bench_cluster.py [--kafka-version 4.3.1] [--repeat 3]

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

from harness import kafka_dist  # noqa: E402
from harness.cluster import NativeCluster  # noqa: E402


def timed(fn):
    t0 = time.monotonic()
    result = fn()
    return time.monotonic() - t0, result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kafka-version", default="4.3.1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-cold", action="store_true")
    args = ap.parse_args()

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


if __name__ == "__main__":
    main()
