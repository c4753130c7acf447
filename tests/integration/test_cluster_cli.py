"""`kipcheck cluster up|status|down` and a run against it with the external backend."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.harness.backends.network import list_namespaces

pytestmark = pytest.mark.cluster


def kipcheck(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_cluster_up_status_external_run_and_down(tmp_path, kafka_version):
    version = ["--kafka-version", kafka_version] if kafka_version else []
    up = kipcheck("cluster", "up", "--dir", str(tmp_path / "c"), *version)
    assert up.returncode == 0, up.stderr[-2000:]
    info = json.loads(up.stdout.strip().splitlines()[-1])
    try:
        status = kipcheck("cluster", "status")
        mine = [json.loads(l) for l in status.stdout.splitlines() if l.startswith("{")]
        mine = [c for c in mine if c["cluster_id"] == info["cluster_id"]]
        assert mine and set(mine[0]["nodes"].values()) == {"up"}
        assert mine[0]["owner_pid"] is None  # survives the command that started it

        # the external backend cannot see the release, so the version (and with it the profile) is given
        run = kipcheck("run", "--backend", "external", "--bootstrap", info["bootstrap"], "--faults", "none",
                       "--kafka-version", mine[0]["kafka_version"],
                       "--duration", "15", "--runs-dir", str(tmp_path / "runs"), "--quiet")
        assert run.returncode == 0, run.stderr[-2000:]
        run_dir = next((tmp_path / "runs").iterdir())
        verdict = json.loads((run_dir / "verdict.json").read_text())
        assert verdict["valid"] is True and verdict["counts"]["records"] > 50
        assert verdict["profile"] == "kafka-" + ".".join(mine[0]["kafka_version"].split(".")[:2])
        assert json.loads((run_dir / "config.json").read_text())["backend"] == "external"
    finally:
        down = kipcheck("cluster", "down", "--id", info["cluster_id"])
    assert down.returncode == 0 and "stopped 1" in down.stdout
    assert not [ns for ns in list_namespaces() if info["cluster_id"] in ns]
    after = kipcheck("cluster", "status")
    assert info["cluster_id"] not in after.stdout


@pytest.mark.long  # 90 s; dedicated controllers also run in the ELR and ssh tests
def test_dedicated_controllers_run(tmp_path, kafka_version):
    version = ["--kafka-version", kafka_version] if kafka_version else []
    run = kipcheck("run", "--controllers", "3", "--brokers", "3", "--faults", "none", "--duration", "15",
                   "--runs-dir", str(tmp_path), "--quiet", *version)
    assert run.returncode == 0, run.stderr[-2000:]
    run_dir = next(tmp_path.iterdir())
    config = json.loads((run_dir / "config.json").read_text())
    assert sorted(config["racks"]) == ["4", "5", "6"]  # nodes 1-3 are controllers only
    roles = {p.parent.name: p.read_text() for p in (run_dir / "cluster").glob("node-*/server.properties")}
    assert sum("process.roles=controller\n" in r for r in roles.values()) == 3
    assert sum("process.roles=broker\n" in r for r in roles.values()) == 3
