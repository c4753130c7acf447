"""Share groups (KIP-932, issue 31) on a live cluster: share consumers acquire, acknowledge (accept,
release, reject) and commit, and the checker finds the history valid with the KIP-932 rules
observed. The shared cluster keeps the brokers' default lock (30 s) and limit (5): the history
records what the brokers run with (share_workload.broker_settings), not what was asked."""
from __future__ import annotations

import pytest

from kipcheck.harness.backends import releases
from kipcheck.rundir.history import read_history

pytestmark = pytest.mark.cluster


def _acknowledged(records: list[dict]) -> set:
    """The acknowledgement types acknowledged so far."""
    return {a[3] for r in list(records) if r["f"] == "share_ack" and r["type"] == "ok" for a in r["value"]["acks"]}


def test_share_workload_is_valid_and_observed(workload, history, kafka_dist):
    if not releases.has(kafka_dist.version, "share-groups"):
        pytest.skip(f"Kafka {kafka_dist.version} has no share groups")
    kept = history.keep("share_poll", "share_ack")
    workload.start(workload="share", producers=1, consumers=1, share_consumers=2, share_stall=0.0,
                   rate=500).wait(20)
    # the share coordinator's state topic may still be loading on a loaded machine (as __transaction_state was
    # for the txn workload in CI): run on until the acknowledgements the assertions need, at most 70 s more
    workload.wait_until(lambda: _acknowledged(kept) >= {"accept", "release"}, 70)
    verdict = workload.verify()
    assert verdict["valid"] is True
    records = read_history(history.path)
    polls = [r for r in records if r["f"] == "share_poll" and r["type"] == "ok" and r["value"]["records"]]
    acks = [r for r in records if r["f"] == "share_ack" and r["type"] == "ok"]
    assert polls and acks
    assert all(len(r["value"]["delivery_counts"]) == len(r["value"]["records"]) for r in polls)
    assert _acknowledged(acks) >= {"accept", "release"}
    assert polls[0]["value"]["lock_duration_ms"] == 30000 and polls[0]["value"]["delivery_count_limit"] == 5
    block = verdict["share_groups"]
    assert block["records_acquired"] >= sum(len(r["value"]["records"]) for r in polls) > 0
    for rule in ("kip932.exclusive_acquisition", "kip932.accepted_not_redelivered", "kip932.delivery_count_allowed",
                 "kip932.available_record_delivered"):
        assert verdict["coverage"][rule]["observations"] > 0, rule
