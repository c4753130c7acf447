"""A whole `kipcheck run` with every default fault kind: valid on a healthy Kafka, and nothing left behind."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.faults.registry import DEFAULT_MIX
from kipcheck.harness.backends.state import all_states

pytestmark = pytest.mark.cluster


def _processes(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-af", pattern], capture_output=True, text=True).stdout.splitlines()


def _paused_pids(root: str) -> list[str]:
    """Stopped (SIGSTOP) JVMs and proxies of this run's cluster; another test's paused ones are not ours."""
    out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout.splitlines()
    return [l for l in out if l.split()[1].startswith("T") and ("kafka" in l or "toxiproxy" in l) and root in l]


def test_run_with_every_fault_kind_is_valid_and_leaves_nothing(tmp_path, pytestconfig):
    v = pytestconfig.getoption("--kafka-version")
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--faults", "all", "--seed", "1",
                           "--duration", "60", "--runs-dir", str(tmp_path), "--quiet",
                           *(["--kafka-version", v] if v else [])], capture_output=True, text=True, timeout=900)
    run_dir = next(tmp_path.iterdir())
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True
    # the prober's ListOffsets by a real time were judged against the stamps the consumers read
    by_time = verdict["conformance"]["KIP-32"]["kip32.offset_for_time_allowed"]
    assert by_time["status"] == "holds" and by_time["observations"] > 0, by_time

    config = json.loads((run_dir / "config.json").read_text())
    assert {s["kind"] for s in config["schedule"]} <= set(DEFAULT_MIX)
    records = [json.loads(l) for l in (run_dir / "history.jsonl").read_text().splitlines()]
    faults = [r for r in records if r["f"] == "fault" and r["type"] == "ok"]
    starts = [r["value"]["fault"] for r in faults if r["value"]["phase"] == "start"]
    stops = [r["value"]["fault"] for r in faults if r["value"]["phase"] == "stop" and r["value"]["fault"] != "heal-all"]
    assert starts and sorted(starts) == sorted(stops)  # every inject was healed, and said so
    assert any(r["value"]["fault"] == "heal-all" for r in faults)
    members = [r["value"] for r in records if r["f"] == "membership" and r["type"] == "ok"]
    assert members and members[0]["brokers"] == [1, 2, 3] and members[0]["voters"] == [1, 2, 3], members[:1]

    root = str(run_dir / "cluster")
    assert not [s for s in all_states() if s.data.get("root") == root]
    if config.get("mode") == "namespaces":  # the bridge (and with it every namespace's link) is gone
        props = (run_dir / "cluster" / "node-1" / "server.properties").read_text()
        subnet = props.split("CONTROLLER://", 1)[1].rsplit(".", 1)[0] + "."
        assert subnet not in subprocess.run(["ip", "-4", "addr", "show"], capture_output=True, text=True).stdout
    assert not [l for l in _processes("kafka.Kafka") if root in l]
    assert not [l for l in _processes("toxiproxy-server") if root in l]  # its -config file lives in the root
    assert (run_dir / "cluster" / "toxiproxy.log").exists()  # the link faults ran through proxies
    assert (run_dir / "cluster" / "toxiproxy-n1.log").exists()  # and those between nodes through each node's own
    assert not _paused_pids(root)
    # clock faults' offset files and failed log directories (faults/clock.py, faults/logdir.py) are gone too
    assert not list((run_dir / "cluster").glob("node-*/faketime*"))
    assert not list((run_dir / "cluster").glob("node-*/*.failed"))
