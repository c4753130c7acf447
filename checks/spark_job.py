"""spark-submit entry point:

    spark-submit --master spark://HOST:7077 --py-files kipcheck.zip \\
        checks/spark_job.py RUN_OR_HISTORY... [--profile P] [--recovery-bound S] [--out verdict.json]

Every path must be readable by the driver and the executors (shared storage, HDFS,
S3...). All paths are judged in one Spark job. Prints the verdict JSON (several runs:
`{"runs": {path: verdict}}`); arguments and exit codes as `kipcheck check`.
"""
from __future__ import annotations

import sys


def main(argv=None) -> int:
    from pyspark.sql import SparkSession

    from kipcheck.checks.cli_check import main as check_main

    SparkSession.builder.appName("kipcheck-check").getOrCreate()  # master from spark-submit; the engine finds it
    argv = list(sys.argv[1:] if argv is None else argv)
    return check_main([*argv, "--engine", "spark", "--json"])


if __name__ == "__main__":
    sys.exit(main())
