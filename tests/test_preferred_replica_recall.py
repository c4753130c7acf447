"""Recall of `preferred-replica-violation` (KIP-392 "Finding the preferred follower") for a
named replica whose node is down, or that is no replica at all, when the rule's hedges (the
leader's AlterPartition response ahead of its metadata image, a leader's image a replay behind
other brokers', the replica set of one epoch) let the answer through. Each hedge is bounded by
the Kafka mechanism it cites, not dropped:

* `offline_while_down` (shared history -02): the answering broker's own metadata showed the
  replica offline before the fetch, its node down from a second before that answer until the
  fetch completed. Only the replica's own heartbeat unfences it, and
  `ReplicaManager.findPreferredReadReplica` takes endpoints from that broker's metadata cache,
  which gives a fenced broker none; the controller rejects an AlterPartition naming it (KIP-841).
* `displaced_while_down` (-04): the replica led the epoch before the answering broker's, its
  node went down with no other fault since a replay before that answer, and the new leader is
  not the first replica (no preferred election): the electing record dropped it from the ISR
  (`ReplicationControlManager.generateLeaderAndIsrUpdates`), and a down node never fetches to
  rejoin (`Partition.maybeExpandIsr`).
* `never_a_replica` without a span of the broker's own answers (-03, -05): in the epoch the
  broker accepted, while no reassigning fault ran from a replay before the epoch's first answer
  to the fetch (within one leader epoch the replica set only grows; a reassignment is a fault).

Each bound has a history just inside the proof (flagged) and just outside it (accepted)."""
import json

import pytest

from kipcheck.checks.engine_local import check_records
from tests.support.raw_protocol import H, S
from tests.support.shared_histories import SHARED, why_indices

PROFILES = ("kip", "kafka-4.3")
NAME = "preferred-replica-violation"


def found(h: H, profile: str) -> dict:
    records = sorted(h.records, key=lambda r: r["time"])
    records = [dict(r, index=i) for i, r in enumerate(records)]
    v = check_records(records, profile=profile)
    return {n: ex for n, ex in v["anomalies"].items() if ex}


def meta(h: H, t, broker=1, leader=1, epoch=5, isr=(1, 2, 3), offline=(), replicas=(1, 2, 3)) -> H:
    racks = {str(b): f"r{b}" for b in (1, 2, 3)}
    return h.op("observer", "metadata", {"broker": broker, "topic": "t", "partition": 0},
                {"error": "NONE", "leader": leader, "leader_epoch": epoch, "isr": list(isr),
                 "replicas": list(replicas), "offline": list(offline), "racks": racks}, t)


def fault(h: H, invoked, done, kind, targets, phase) -> H:
    value = {"fault": kind, "targets": list(targets), "phase": phase}
    return h.add("nemesis", "invoke", "fault", value, invoked).add("nemesis", "ok", "fault", value, done)


# --- the shared histories -------------------------------------------------------------------


@pytest.mark.parametrize("case, answer", [
    ("preferred-replica-violation-02", 17),  # offline in the leader's own metadata, killed
    ("preferred-replica-violation-03", 9),  # not a replica of the epoch the leader accepted
    ("preferred-replica-violation-04", 15),  # the killed leader of epoch 6, displaced in epoch 7
    ("preferred-replica-violation-05", 13),  # a broker no answer knows, in a two-partition fetch
])
@pytest.mark.parametrize("profile", PROFILES)
def test_shared_history_is_flagged_at_its_indices(case, answer, profile):
    folder = SHARED / case
    if not folder.exists():
        pytest.skip(f"{folder} not on this machine")
    expected = json.loads((folder / "expected.json").read_text())
    records = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    v = check_records(records, profile=profile)
    got = {n: ex for n, ex in v["anomalies"].items() if ex}
    assert set(got) == {NAME} and not set(got) & set(expected["must_not_flag"])
    [example] = got[NAME]
    invokes = {r["index"] for r in records if r["type"] == "invoke"}
    assert answer in example["indices"] and answer in why_indices(expected["why"])
    assert set(example["indices"]) - invokes == {answer}  # the answer the why names, with its invoke
    assert example["allowed"] == ([2] if case.endswith("05") else [-1])


# --- offline in the answering broker's own metadata, its node down ---------------------------


def offline_own(down_at=S // 2, asked=10 * S, stop=12 * S, kind="kill", later=None, other_broker=False) -> H:
    """Broker 3's node goes down (`kind` completes at `down_at`, stop invoked at `stop`); the
    leader 1's own answer asked at `asked` shows it offline and out of the ISR of epoch 5 (or
    broker 2's, `other_broker`), `later`: an answer of broker 1 at that time showing it back.
    At `asked` + 0.5 s broker 1 names 3 to a client in rack r3; no answer follows."""
    h = fault(H(), down_at - S // 2, down_at, kind, [3], "start")
    meta(h, asked, broker=2 if other_broker else 1, isr=(1, 2), offline=(3,))
    if later is not None:
        meta(h, later)
    h.fetch(asked + S // 2, 0, [], broker=1, pref=3, rack="r3", epoch=5)
    return fault(h, stop, stop + S // 2, kind, [3], "stop")


FETCH_DONE = 10 * S + S // 2 + 1_000_000  # offline_own's fetch completes (H.op's dt)


@pytest.mark.parametrize("profile", PROFILES)
def test_offline_in_its_own_metadata_while_down_is_not_selectable(profile):
    [example] = found(offline_own(), profile)[NAME]
    assert "broker 1's metadata showed 3 offline before the answer, while 3's node was down" in example["message"]
    for kind in ("pause", "restart", "wipe", "truncate"):
        assert NAME in found(offline_own(kind=kind), profile), kind


@pytest.mark.parametrize("profile", PROFILES)
def test_the_node_is_down_from_a_second_before_the_answer(profile):
    """A heartbeat sent just before going down may still unfence it: the second before counts."""
    assert NAME in found(offline_own(down_at=10 * S - S), profile)  # just inside
    assert NAME not in found(offline_own(down_at=10 * S - S + 1), profile)  # just outside


@pytest.mark.parametrize("profile", PROFILES)
def test_the_node_is_down_until_the_fetch_completed(profile):
    assert NAME in found(offline_own(stop=FETCH_DONE), profile)  # stop invoked as the answer came
    assert NAME not in found(offline_own(stop=FETCH_DONE - 1), profile)  # restarting: may be unfenced


@pytest.mark.parametrize("profile", PROFILES)
def test_the_offline_answer_is_the_answering_brokers_last_one(profile):
    # its last answer before the fetch shows 3 back: that cache is the one the answer used
    assert NAME not in found(offline_own(later=10 * S + S // 4), profile)
    # another broker's cache may be a replay ahead of the leader's
    assert NAME not in found(offline_own(other_broker=True), profile)
    # offline without a fault keeping the node down (cut off from the controller, not stopped)
    assert NAME not in found(offline_own(kind="partition"), profile)


# --- the killed leader of the previous epoch ------------------------------------------------


def displaced(led=(4, 3), replicas=(3, 1, 2), cle=5, other=None, own_before=False, stop=11 * S,
              seen_in=False) -> H:
    """Broker 2's answer at 0 shows (epoch, leader) `led`; broker 3's node is killed at 0.2 s and
    stopped at `stop`; broker 2's answers at 9 s and 9.005 s show epoch 5 under leader 1 with 3
    out and offline (`seen_in`: the one at 9 s shows 3 in the ISR); at 9.003 s broker 1 (no
    metadata of its own) names 3 to a client in rack r3, accepting `cle`. `other`: a
    partition fault on node 2 completing its stop at that time; `own_before`: a pause of node 3
    started and stopped before the kill."""
    h = meta(H(), 0, broker=2, leader=led[1], epoch=led[0], isr=(3, 1, 2), replicas=replicas)
    if other is not None:
        fault(fault(h, other - 3 * S, other - 2 * S, "partition", [2], "start"), other - S // 2, other,
              "partition", [2], "stop")
    if own_before:
        fault(fault(h, S // 20, S // 20 + 1, "pause", [3], "start"), S // 10, S // 10 + 1, "pause", [3], "stop")
    fault(h, S // 5, S // 5 + 500_000, "kill", [3], "start")
    meta(h, 9 * S, broker=2, isr=(1, 2, 3) if seen_in else (1, 2), offline=() if seen_in else (3,), replicas=replicas)
    h.fetch(9 * S + 3_000_000, 0, [], broker=1, pref=3, rack="r3", epoch=cle)
    meta(h, 9 * S + 5_000_000, broker=2, isr=(1, 2), offline=(3,), replicas=replicas)
    return fault(h, stop, stop + S // 2, "kill", [3], "stop")


@pytest.mark.parametrize("profile", PROFILES)
def test_the_killed_leader_of_the_epoch_before_is_out_of_the_new_leaders_isr(profile):
    [example] = found(displaced(), profile)[NAME]
    assert "3 led epoch 4 and its node went down before epoch 5 moved leadership to 1" in example["message"]
    assert example["allowed"] == [-1]


@pytest.mark.parametrize("profile", PROFILES)
def test_only_an_election_that_took_leadership_off_it(profile):
    # a preferred election to the first replica keeps the old leader in the ISR
    assert NAME not in found(displaced(replicas=(1, 3, 2)), profile)
    # an epoch in between, or another leader before, or no accepted epoch: nothing known of the election
    assert NAME not in found(displaced(led=(3, 3)), profile)
    assert NAME not in found(displaced(led=(4, 2)), profile)
    assert NAME not in found(displaced(cle=-1), profile)
    # an answer showing it in the new epoch's ISR before the fetch: it was in it
    assert NAME not in found(displaced(seen_in=True), profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_no_other_fault_since_a_replay_before_the_old_leaders_answer(profile):
    """A fault may have displaced it alive (it then rejoins before being killed): none may run
    from a second before the answer naming it leader (asked at 0) to the fetch."""
    assert NAME in found(displaced(other=-S - 1), profile)  # over just before: just inside
    assert NAME not in found(displaced(other=-S), profile)  # still running then: just outside
    assert NAME not in found(displaced(own_before=True), profile)  # its own node paused and back


@pytest.mark.parametrize("profile", PROFILES)
def test_the_displaced_node_stays_down_until_the_fetch_completed(profile):
    done = 9 * S + 4_000_000
    assert NAME in found(displaced(stop=done), profile)
    assert NAME not in found(displaced(stop=done - 1), profile)


# --- no replica of the epoch the broker accepted --------------------------------------------


def stranger(cle=5, reassign=None) -> H:
    """Broker 2's answers of epoch 5 at 0 and 3 s list replicas 1-3; at 1 s broker 1 (no
    metadata of its own) names broker 7 to a client in rack r7, accepting `cle`. `reassign`:
    (start invoked, stop completed) of a reassign fault."""
    h = meta(meta(H(), 0, broker=2), 3 * S, broker=2)
    if reassign is not None:
        start, end = reassign
        fault(fault(h, start, start + 1, "reassign", [1, 2], "start"), end - 1, end, "reassign", [1, 2], "stop")
    return h.fetch(S, 0, [], broker=1, pref=7, rack="r7", epoch=cle)


@pytest.mark.parametrize("profile", PROFILES)
def test_no_replica_of_the_epoch_the_broker_accepted(profile):
    [example] = found(stranger(), profile)[NAME]
    assert "no metadata answer in epoch 5 lists 7 among the replicas [1, 2, 3]" in example["message"]
    assert NAME not in found(stranger(cle=-1), profile)  # the epoch it answered in is not known


@pytest.mark.parametrize("profile", PROFILES)
def test_no_reassignment_from_a_replay_before_the_epochs_first_answer_to_the_fetch(profile):
    done = S + 1_000_000
    assert NAME in found(stranger(reassign=(done + 1, 5 * S)), profile)  # asked after the answer
    assert NAME not in found(stranger(reassign=(done, 5 * S)), profile)  # may have added 7 first
    assert NAME in found(stranger(reassign=(-5 * S, -S - 1)), profile)  # over a replay before
    assert NAME not in found(stranger(reassign=(-5 * S, -S)), profile)
