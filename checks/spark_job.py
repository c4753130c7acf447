"""spark-submit entry point:

    spark-submit --master spark://HOST:7077 --py-files kipcheck.zip \\
        checks/spark_job.py HISTORY_OR_RUN [--profile P] [--recovery-bound S] [--out verdict.json]

The history path must be readable by the driver and the executors (shared storage,
HDFS, S3...). Prints the verdict JSON; exit codes as `kipcheck check`.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    from checks.api import write_verdict
    from checks.cli_check import EXIT_ERROR, exit_code
    from checks.engine_spark import check_path
    from checks.history import HistoryError
    from checks.profiles import choose_profile
    from checks.recovery import choose_bound, liveness_rule
    from checks.verdict import default_rules

    parser = argparse.ArgumentParser(prog="spark_job.py")
    parser.add_argument("path")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--recovery-bound", type=float, default=None)
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kipcheck-check").getOrCreate()  # master from spark-submit
    try:
        rules = default_rules(liveness_rule(choose_bound(args.path, args.recovery_bound)))
        verdict = check_path(args.path, rules, profile=choose_profile(args.path, args.profile), spark=spark)
    except (HistoryError, ValueError, OSError) as e:
        print(f"kipcheck check: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ERROR
    if args.out:
        write_verdict(verdict, args.out)
    print(json.dumps(verdict, indent=2))
    return exit_code(verdict)


if __name__ == "__main__":
    sys.exit(main())
