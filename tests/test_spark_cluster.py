"""The Spark engine on a real standalone Spark cluster (master + worker started from
PySpark's spark-class on loopback), compared with the local engine: through the CLI's
--master, through spark-submit with the package shipped, and several runs in one job.
No Spark JVM outlives the module."""
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kipcheck.checks import engine_local
from kipcheck.checks.api import check
from kipcheck.rundir.history import to_parquet, write_jsonl
from tests.synthetic import generate, mutated
from kipcheck.checks.verdict import comparable
from kipcheck.harness.spark_standalone import spark_class, standalone_spark

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parent.parent


def daemons_of(url: str) -> list[str]:
    """Command lines of this master's JVM (--port P) and its worker (spark://127.0.0.1:P)."""
    port = url.rsplit(":", 1)[1]
    out = subprocess.run(["pgrep", "-af", f"deploy.(master.Master .*--port {port}|worker.Worker {url})"],
                         capture_output=True, text=True).stdout
    return out.splitlines()


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    with standalone_spark(tmp_path_factory.mktemp("spark"), cores=2, memory="2g") as url:
        assert len(daemons_of(url)) == 2  # the pattern below sees both while they run
        yield url
    assert daemons_of(url) == [], "a Spark master or worker outlived the test"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three run directories: valid, invalid (forged reads), valid as Parquet."""
    paths = []
    for n, mutate in enumerate((False, True, False)):
        d = tmp_path_factory.mktemp(f"run{n}")
        records = list(generate(1500, seed=20 + n, partitions=3))
        write_jsonl(mutated(records) if mutate else records, d / "history.jsonl")
        if n == 2:
            to_parquet(d / "history.jsonl", d / "history.parquet")
        paths.append(d)
    return paths


def kipcheck(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_cli_check_on_the_cluster_agrees_with_the_local_engine(master, runs):
    proc = kipcheck("check", *map(str, runs), "--engine", "spark", "--master", master, "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]  # run 1 is invalid: the worst exit wins
    remote = json.loads(proc.stdout)["runs"]
    for path in runs:
        local = check(path, engine="local")  # the same API the CLI uses (profile and its note included)
        assert comparable(remote[str(path)]) == comparable(local)
        assert remote[str(path)]["engine"] == "spark"
    assert [remote[str(p)]["valid"] for p in runs] == [True, False, True]


def test_spark_submit_with_the_package_shipped(master, runs, tmp_path):
    package = tmp_path / "kipcheck.zip"
    with zipfile.ZipFile(package, "w") as z:
        for pkg in ("checks", "reference_model"):
            for f in (ROOT / pkg).rglob("*.py"):
                z.write(f, f.relative_to(ROOT))
    submit = Path(spark_class()).parent / "spark-submit"
    proc = subprocess.run([str(submit), "--master", master, "--py-files", str(package),
                           "--conf", "spark.sql.shuffle.partitions=4", str(ROOT / "checks" / "spark_job.py"),
                           str(runs[1]), "--profile", "kafka-4.3"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "{" in proc.stdout, (proc.stdout[-2000:], proc.stderr[-2000:])
    verdict = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert comparable(verdict) == comparable(engine_local.check_path(runs[1], profile="kafka-4.3"))
