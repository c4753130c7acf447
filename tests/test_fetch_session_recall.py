"""Recall of `fetch-session-violation` (KIP-227 "Incremental Fetch Responses") when no
metadata answer of the broker follows the request: the leader epoch the broker answered the
incremental request in is then proven by its first accepted fetch answer after it
(`log_bounds.HwmFloor.epoch_after`). Kafka `Partition.checkCurrentLeaderEpoch` answers a
partition NONE only when the request's `current_leader_epoch` equals the broker's own, and a
broker's leader epoch never goes back, so an answer of epoch E completed before the request
and one of E invoked after it leave the broker in E (same life) while it answered; within
them its HWM does not go back (KIP-392), so an HWM it reported before the request still
holds. The shared histories fetch-session-violation-04 and -06 are this shape.

Each new bound has a history just inside it (flagged) and just outside it (accepted):
the later answer invoked after the request completed (not at the same instant), in the same
epoch, answered NONE, in the same broker life; with no metadata of the broker naming the
epoch's leader, the worst case (a follower just past an election, which under Kafka may still
copy a lower HWM from the new leader) is assumed until the HWM was seen rising in the epoch."""
import json

import pytest

from kipcheck.checks.engine_local import check_records
from tests.support.raw_protocol import H, S, part, sess
from tests.support.shared_histories import SHARED, why_indices

PROFILES = ("kip", "kafka-4.3")
NAME = "fetch-session-violation"
DONE = 2 * S + 1_000_000  # when the incremental request below completes (H.op's dt)


def found(records, profile: str, known: bool = False) -> dict:
    v = check_records(records, profile=profile)
    return {n: ex for n, ex in v["known" if known else "anomalies"].items() if ex}


def later_proof(later_at=3 * S, later_epoch=5, later_error="NONE", kill_at=None, meta=True, rise=False) -> H:
    """Broker 1's session 42 last sent t/0 with HWM 10 (fetch offset 10); at 1 s another
    client's sessionless fetch to broker 1 (epoch 5) reports HWM 12; at 2 s the session's
    incremental response leaves t/0 out; at `later_at` a fetch to broker 1 naming
    `later_epoch` is answered `later_error`. Broker 1's metadata (leader 1, epoch 5) only at
    0.5 s when `meta`, none after the request. `rise`: an HWM of 11 reported at 0.75 s."""
    h = sess(H(), 0, 0, 0, 42, [part(10, hwm=10)])
    if meta:
        h.meta(S // 2)
    if rise:
        h.fetch(3 * S // 4, 10, [], broker=1, hwm=11, epoch=5, rack="r1", proc=8)
    h.fetch(S, 10, [], broker=1, hwm=12, epoch=5, rack="r1")
    sess(h, 2 * S, 42, 1, 42, [part(10, omitted=True)], sent=[])
    if kill_at is not None:
        h.fault(kill_at, "kill", [1])
    return h.fetch(later_at, 12, [], broker=1, hwm=12, epoch=later_epoch, rack="r1", error=later_error)


# --- the shared histories -------------------------------------------------------------------


@pytest.mark.parametrize("case, proof", [
    ("fetch-session-violation-04", {15, 21, 23, 25}),  # session opened, HWM 5 served, left out, epoch after
    ("fetch-session-violation-06", {15, 23, 25, 27}),
])
@pytest.mark.parametrize("profile", PROFILES)
def test_shared_history_is_flagged_at_its_indices(case, proof, profile):
    folder = SHARED / case
    if not folder.exists():
        pytest.skip(f"{folder} not on this machine")
    expected = json.loads((folder / "expected.json").read_text())
    records = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    got = found(records, profile)
    assert not set(got) & set(expected["must_not_flag"])
    [example] = got[NAME]
    shown = set(example["indices"])
    assert proof <= shown and proof <= why_indices(expected["why"])
    assert "its HWM had changed since the session last sent it (3)" in example["message"]
    invokes = {r["index"] for r in records if r["type"] == "invoke"}
    assert shown - invokes <= why_indices(expected["why"])  # every completion shown is one the why names


# --- the epoch bracket closed by a later accepted fetch answer -------------------------------


@pytest.mark.parametrize("profile", PROFILES)
def test_a_later_answer_in_the_same_epoch_proves_the_floor(profile):
    h = later_proof()
    [example] = found(h.records, profile)[NAME]
    assert "broker 1 had proven an HWM of at least 12" in example["message"]
    fetches = [r["index"] for r in h.records if r["f"] == "fetch"]
    assert set(example["indices"]) == {1} | set(fetches[2:])  # opened, HWM 12, left out, epoch proof


@pytest.mark.parametrize("profile", PROFILES)
def test_the_later_answer_must_be_invoked_after_the_request_completed(profile):
    assert NAME in found(later_proof(later_at=DONE + 1).records, profile)  # just inside
    assert NAME not in found(later_proof(later_at=DONE).records, profile)  # just outside: may run first
    assert NAME not in found(later_proof(later_at=2 * S + 500_000).records, profile)  # in flight


@pytest.mark.parametrize("profile", PROFILES)
def test_the_later_answer_must_prove_the_same_epoch(profile):
    assert NAME not in found(later_proof(later_epoch=6).records, profile)  # an election in between
    assert NAME not in found(later_proof(later_error="FENCED_LEADER_EPOCH").records, profile)
    assert NAME not in found(later_proof(later_epoch=4, later_error="UNKNOWN_LEADER_EPOCH").records, profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_later_answer_must_be_in_the_same_broker_life(profile):
    assert NAME not in found(later_proof(kill_at=DONE + S // 2).records, profile)  # restarted after the request
    assert NAME in found(later_proof(kill_at=3 * S + S // 2).records, profile)  # after the proof: no matter


def test_an_unknown_role_is_taken_for_a_follower_just_past_an_election():
    """Without metadata naming epoch 5's leader, broker 1 may be a follower that under Kafka
    (`follower-hwm-follows-leader`) still copies a lower HWM from the new leader: known
    under kafka-4.3, flagged under `kip`; once its HWM rose in the epoch (11, then 12) it
    may no longer go back, so flagged under both."""
    h = later_proof(meta=False)
    assert NAME in found(h.records, "kip")
    assert NAME not in found(h.records, "kafka-4.3") and NAME in found(h.records, "kafka-4.3", known=True)
    risen = later_proof(meta=False, rise=True)
    assert NAME in found(risen.records, "kip") and NAME in found(risen.records, "kafka-4.3")
