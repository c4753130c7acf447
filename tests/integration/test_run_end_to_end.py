"""`kipcheck run` end to end on a real 3-node cluster: verdict, report, history, hygiene."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kipcheck.harness.backends.network import list_namespaces
from tests.integration.run_support import (background_run, cluster_states, history_once_it_shows, jvms_under,
                                           kafka_args, kipcheck, leftovers)

pytestmark = pytest.mark.cluster


def test_run_is_valid_and_leaves_report_and_nothing_running(tmp_path, kafka_version):
    proc = kipcheck("run", "--duration", "40", "--seed", "7", "--runs-dir", str(tmp_path), "--quiet",
                    *kafka_args(kafka_version))
    out, err = proc.communicate(timeout=400)
    run_dir = next(tmp_path.iterdir())
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err[-3000:]}"

    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["valid"] is True
    assert not any(verdict["anomalies"].values())
    # every rule the run reached decided something; KIP-1166's statistic decided (its sample
    # gathered with the clients running) and did not fire on a healthy cluster
    assert verdict["uncovered"] == []
    config = json.loads((run_dir / "config.json").read_text())
    if config["features"]["kip-1166"] == "present":
        assert verdict["coverage"]["kip1166.propagation_statistic"]["observations"] >= 20
        assert not verdict["known"].get("hwm-propagation-delay")

    records = [json.loads(l) for l in (run_dir / "history.jsonl").read_text().splitlines()]
    assert [r["index"] for r in records] == list(range(len(records)))
    ok_sends = [r for r in records if r["f"] == "send" and r["type"] == "ok"]
    ok_polls = [r for r in records if r["f"] == "poll" and r["type"] == "ok" and r["value"]["records"]]
    assert len(ok_sends) > 100 and ok_polls
    phases = [(r["value"]["fault"], r["value"]["phase"]) for r in records if r["f"] == "fault" and r["type"] == "ok"]
    assert ("partition", "start") in phases and ("partition", "stop") in phases
    # every acknowledged value was read back by someone
    read_values = {rec[3] for r in ok_polls for rec in r["value"]["records"]}
    assert {r["value"]["value"] for r in ok_sends} <= read_values

    # KIP-848: the subscribers join with the release's group protocol; partitions move between
    # them by their own callbacks, each revoked by its owner before the other member is given it
    protocol = config["workload"]["group_protocol"]
    assert protocol == ("consumer" if config["features"]["consumer-group-protocol"] == "present" else "classic")
    given = [r for r in records if r["f"] == "assign" and r["type"] == "ok" and r["value"].get("rebalance")]
    assert given and all(r["value"]["protocol"] == protocol and r["value"]["member"] for r in given)
    assert verdict["coverage"]["kip848.handoff_allowed"]["observations"] == sum(len(r["value"]["partitions"]) for r in given)
    # their offset commits (sync and async by a seeded choice) and the group's committed offsets each
    # assignment resumed from, all judged (KIP-848 "Offset commit and fetch with the member epoch")
    commits = [r for r in records if r["f"] == "commit" and r["type"] == "ok"]
    fetched = [r for r in records if r["f"] == "committed" and r["type"] == "ok"]
    assert commits and fetched and {r["value"]["mode"] for r in commits} == {"sync", "async"}
    assert verdict["offset_commits"]["commits"]["applied"] == len(commits)
    assert verdict["coverage"]["kip848.committed_offset_kept"]["observations"] == \
        sum(len(r["value"]["offsets"]) for r in fetched)
    assert all(set(r["value"]["resume"]) == {f"{t}/{p}" for t, p in r["value"]["partitions"]} for r in given)
    # the coordinator's own view, asked once a second where the release answers ConsumerGroupDescribe
    described = [r for r in records if r["f"] == "group_describe" and r["type"] == "ok"
                 and any(m["assigned"] for m in r["value"]["members"])]
    if protocol == "consumer":
        assert described and {tuple(tp) for r in described for m in r["value"]["members"] for tp in m["assigned"]} \
            <= {(config["workload"]["topic"], p) for p in range(config["workload"]["partitions"])}
    assert verdict["coverage"]["kip848.assigned_to_one_member"]["observations"] == len(described)

    # KIP-392: the consumer sits in a follower's rack, so it reads some partition from a follower
    sources = json.loads((run_dir / "config.json").read_text())["consumer_fetch_sources"]
    assert any(v["fetching_from"] != v["leader"] for parts in sources.values() for v in parts.values()), sources

    html = (run_dir / "report" / "index.html").read_text()
    assert "VALID" in html and '<canvas id="timeline"' in html and "kipcheck-data" in html
    assert (run_dir / "history.parquet").exists()
    assert list((run_dir / "cluster").glob("node-*/server.log"))
    assert leftovers(run_dir) == []


def test_sigkilled_run_is_cleaned_up_and_keeps_its_history(tmp_path, kafka_version):
    with background_run(tmp_path, kafka_version, "--duration", "300", "--seed", "3") as proc:
        history = history_once_it_shows(proc, tmp_path, '"type":"ok","f":"send"', 180)
        run_dir = history.parent
        assert jvms_under(run_dir), "the cluster should be running before the kill"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30  # the reaper polls every second; teardown takes a few
        while time.monotonic() < deadline and leftovers(run_dir):
            time.sleep(1)
        assert leftovers(run_dir) == []
        lines = history.read_text().splitlines()
        assert all(json.loads(l) for l in lines)  # every line written before the kill is whole
        # and the next start (here: cluster status) finds nothing stale to clean
        status = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "cluster", "status"],
                                capture_output=True, text=True)
        assert status.returncode == 0


def test_ctrl_c_heals_stops_the_cluster_and_still_reports(tmp_path, kafka_version):
    with background_run(tmp_path, kafka_version, "--duration", "300", "--seed", "5") as proc:
        history = history_once_it_shows(proc, tmp_path, '"type":"ok","f":"send"', 180)
        proc.send_signal(signal.SIGINT)
        # heal, stop, Parquet, check and report of what was recorded: on a loaded 2-core machine
        # (CI, 2026-11-25) a 169 MB history took longer than 120 s
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 130, err[-2000:]
        assert "interrupted" in err and "Traceback" not in err
        run_dir = history.parent
        assert leftovers(run_dir) == []
        assert (run_dir / "report" / "index.html").exists()
        assert json.loads((run_dir / "verdict.json").read_text())["counts"]["records"] > 0


def test_sigkill_during_a_partition_then_cluster_down_heals_everything(tmp_path, kafka_version):
    """Issue 4's hygiene case: harness *and* its watchdog killed while DROP rules are in place."""
    with background_run(tmp_path, kafka_version, "--duration", "60", "--seed", "9") as proc:
        # the partition fault's inject completed: its DROP rules are in place
        history = history_once_it_shows(proc, tmp_path, '"phase":"start","targets"', 240)
        run_dir = history.parent
        states = cluster_states(run_dir)
        assert states
        ns = states[0].data["namespaces"][0]
        rules = subprocess.run(["ip", "netns", "exec", ns, "iptables", "-S", "KIPCHECK"], capture_output=True,
                               text=True).stdout
        assert "DROP" in rules, rules
        reaper = states[0].data["helpers"]["reaper"]["pid"]
        os.kill(reaper, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert leftovers(run_dir), "with the watchdog dead too, the cluster should still be there"
        # --id: the session's shared test cluster (other tests) must survive this one
        down = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "cluster", "down", "--id",
                               states[0].data["cluster_id"]], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stderr
        assert leftovers(run_dir) == []
        assert ns not in list_namespaces()
