"""The prober's KIP-932 share sessions on a live cluster (issue 31 §3): in a share run it joins a
share group of its own, opens a share session on a partition leader, continues it, sends a
deliberately wrong epoch (answered INVALID_SHARE_SESSION_EPOCH), acknowledges at epoch 0 (refused
alike), accepts what it acquired, closes
the session and finds it gone; the checker's share-session rule finds the history valid."""
from __future__ import annotations

import time

import pytest

from kipcheck.harness.backends import releases
from kipcheck.rundir.history import read_history

pytestmark = pytest.mark.cluster

#: how long the run may take to show one whole share round (s): the prober's group is new, and
#: its members get partitions only once the group's share state is initialized
ROUND_WAIT_S = 120


def _round_done(path) -> bool:
    text = path.read_text(errors="replace")
    return "SHARE_SESSION_NOT_FOUND" in text and '"f":"share_acknowledge"' in text.replace(" ", "")


def test_the_prober_drives_share_sessions_and_the_history_is_valid(workload, history, kafka_dist):
    if not releases.has(kafka_dist.version, "share-groups"):
        pytest.skip(f"Kafka {kafka_dist.version} has no share groups")
    workload.start(workload="share", producers=1, consumers=1, share_consumers=1, share_stall=0.0, rate=300)
    workload.wait(10)
    deadline = time.monotonic() + ROUND_WAIT_S
    while not _round_done(history.path) and time.monotonic() < deadline:
        workload.wait(5)
    verdict = workload.verify()
    records = read_history(history.path)
    fetches = [r for r in records if r["f"] == "share_fetch" and r["type"] == "ok"]
    assert fetches, "no share_fetch answered"
    assert {r["value"]["top_error"] for r in fetches} >= {"NONE", "INVALID_SHARE_SESSION_EPOCH",
                                                         "SHARE_SESSION_NOT_FOUND"}
    wrong = [r for r in fetches if r["value"]["top_error"] == "INVALID_SHARE_SESSION_EPOCH"]
    assert all(r["value"]["session_epoch"] > 0 for r in wrong)
    acquired = [a for r in fetches for p in r["value"]["partitions"] for a in p["acquired"]]
    assert acquired and all(first <= last and count >= 1 for first, last, count in acquired)
    acks = {r["value"]["session_epoch"]: r["value"] for r in records
            if r["f"] == "share_acknowledge" and r["type"] == "ok"}
    assert acks[0]["top_error"] == "INVALID_SHARE_SESSION_EPOCH"  # an acknowledgement never opens a session
    assert acks[2]["top_error"] == "NONE" and all(a[4] == "accept" for a in acks[2]["acks"])
    assert any(r["f"] == "share_heartbeat" and r["type"] == "ok" and r["value"]["member_epoch"] == -1
               and r["value"]["error"] == "NONE"
               for r in records), "the prober's member never left its group"
    assert verdict["valid"] is True, verdict["anomalies"]
    assert verdict["coverage"]["kip932.share_session_answer"]["observations"] >= 6
