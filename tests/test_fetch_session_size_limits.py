"""An incremental response that leaves out a partition with committed data at its fetch
offset, judged by the size limits as Kafka reads them (KIP-227 "Handling Partition Size
Limits", `ReplicaManager.readFromLog`): a partition read after another that returned bytes gets
min(partition limit, what the earlier reads left of the response limit) and comes back empty
when its first batch is larger. The prober records the limits it asked (invoke
`max_bytes`, `partition_max_bytes`), what each read charged (`bytes`) and the size of the first
batch it returned (`first_batch_bytes`): the rule is held on each bound, flagged on its edge
and accepted one byte past it."""
import pytest

from kipcheck.checks.engine_local import check_records
from tests.support.raw_protocol import H, S

NAME = "fetch-session-violation"
PROFILES = ("kip", "kafka-4.3")
LIMIT, BUDGET = 16384, 1 << 20
HEAD_BYTES = 5000  # what t/0's read charged in the incremental response


def entry(p, offset, hwm, recs=(), bytes_=None, first=None, omitted=False):
    e = {"topic": "t", "partition": p, "fetch_offset": offset, "error": "NONE"}
    if omitted:
        return {**e, "omitted": True}
    e.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=0, preferred_read_replica=-1,
             records=[[o, f"v{p}-{o}"] for o in recs])
    if recs and bytes_ is not None:
        e.update(bytes=bytes_, first_batch_bytes=first)
    return e


def session(first_batch=1000, budget=BUDGET, limit=LIMIT, created=True, isolation=None, record_sizes=True,
            named=None, metadata_after=True):
    """Broker 1 (leader of t/0 and t/1, epoch 5 by its metadata before and after) opens session
    42 at fetch offsets 10 and 20: both return records (t/1's first batch `first_batch` bytes).
    The next incremental request changes nothing; its response returns t/0 again (charging
    HEAD_BYTES) and leaves out t/1, whose session HWM 25 is above its fetch offset 20. `named`:
    the leader epoch the full request names for each partition (None: none named);
    `metadata_after`: the metadata answers after the session that bracket the epoch."""
    h = H()
    if created:
        for p in (0, 1):
            h.add("metadata-log", "ok", "partition_change", {"kind": "create", "topic": "t", "partition": p,
                                                             "replicas": [1, 2, 3], "leader": 1, "isr": [1, 2, 3],
                                                             "leader_epoch": 5}, 0)
    for p in (0, 1):
        h.meta(S // 4, p=p)
    sizes = (lambda b, f: (b, f)) if record_sizes else (lambda b, f: (None, None))
    limits = {"max_bytes": budget, "partition_max_bytes": limit, **({"isolation_level": isolation} if isolation else {})}

    def fetch(t, epoch, rid, entries, sent):
        inv = {"broker": 1, "replica_id": -1, "rack": "r1", "session_id": 42 if epoch else 0, "session_epoch": epoch,
               "version": 18, **limits, "partitions": sent}
        h.op(6, "fetch", inv, {"top_error": "NONE", "response_session_id": rid, "partitions": entries}, t)

    both = [{"topic": "t", "partition": p, "fetch_offset": o, **({} if named is None else {"current_leader_epoch": named})}
            for p, o in ((0, 10), (1, 20))]
    fetch(S // 2, 0, 42, [entry(0, 10, 15, range(10, 15), *sizes(900, 400)),
                          entry(1, 20, 25, range(20, 25), *sizes(first_batch + 100, first_batch))], both)
    fetch(S, 1, 42, [entry(0, 10, 15, range(10, 15), *sizes(HEAD_BYTES, 400)), entry(1, 20, 25, omitted=True)], [])
    for p in (0, 1):
        if metadata_after:
            h.meta(2 * S, p=p)
    return h.records


def flagged(records, profile) -> bool:
    return bool(check_records(records, profile=profile)["anomalies"].get(NAME))


@pytest.mark.parametrize("profile", PROFILES)
def test_room_left_for_its_first_batch_is_flagged(profile):
    assert flagged(session(), profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_response_limit_at_its_edge(profile):
    """What the earlier read left is exactly the first batch: read, so flagged; a byte less: may be empty."""
    assert flagged(session(first_batch=1000, budget=HEAD_BYTES + 1000), profile)
    assert not flagged(session(first_batch=1000, budget=HEAD_BYTES + 999), profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_the_partition_limit_at_its_edge(profile):
    """(A first batch above the limit read second, as the full fetch here says, is no answer Kafka
    gives; the rule is held to the bound, not to the history's own consistency.)"""
    assert flagged(session(first_batch=LIMIT), profile)
    assert not flagged(session(first_batch=LIMIT + 1), profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_without_recorded_sizes_or_another_proof_nothing_is_said(profile):
    """A history without sizes: t/1's only read at 20 was the full fetch's second (without
    minOneMessage), which proves its first batch within the limit, and t/0 is the head of both
    reads (minOneMessage): its charge is bounded by nothing, so the response may have been full."""
    assert not flagged(session(record_sizes=False), profile)


@pytest.mark.parametrize("profile", PROFILES)
def test_only_a_partition_read_from_the_local_log_up_to_the_hwm(profile):
    assert not flagged(session(created=False), profile)  # no metadata log: remote storage not ruled out
    assert not flagged(session(isolation="read_committed"), profile)  # read up to the LSO, not the HWM


def rotation(rotate: bool):
    """t/0 returns records in every response; t/1 is caught up (fetch offset 25 = its HWM) until
    the last request moves it back to 20, where nothing proves its first batch's size. With
    `rotate`, an incremental response before it returned t/0's records, which moved t/0 behind
    t/1 in the session's order (KIP-227 "Handling Partition Size Limits"): t/1 is then read first,
    ignoring the size limits."""
    h = H()
    for p in (0, 1):
        h.add("metadata-log", "ok", "partition_change", {"kind": "create", "topic": "t", "partition": p,
                                                         "replicas": [1, 2, 3], "leader": 1, "isr": [1, 2, 3],
                                                         "leader_epoch": 5}, 0)
        h.meta(S // 4, p=p)

    def fetch(t, epoch, entries, sent):
        inv = {"broker": 1, "replica_id": -1, "rack": "r1", "session_id": 42 if epoch else 0, "session_epoch": epoch,
               "version": 18, "max_bytes": BUDGET, "partition_max_bytes": LIMIT, "partitions": sent}
        h.op(6, "fetch", inv, {"top_error": "NONE", "response_session_id": 42, "partitions": entries}, t)

    t0 = entry(0, 10, 15, range(10, 15), 900, 400)
    fetch(S // 2, 0, [t0, entry(1, 25, 25)], [{"topic": "t", "partition": p, "fetch_offset": o} for p, o in ((0, 10), (1, 25))])
    epoch = 1
    if rotate:
        fetch(S, epoch, [t0, entry(1, 25, 25, omitted=True)], [])
        epoch += 1
    fetch(2 * S, epoch, [t0, entry(1, 20, 25, omitted=True)], [{"topic": "t", "partition": 1, "fetch_offset": 20}])
    for p in (0, 1):
        h.meta(3 * S, p=p)
    return h.records


def test_a_partition_the_rotation_put_first_is_read_ignoring_the_limits():
    """Under kafka-4.3 (the HWM never above the LEO: the data at 20 is there); `kip` lets a
    follower's HWM pass its LEO, so an offset never read proves nothing there."""
    found = check_records(rotation(True), profile="kafka-4.3")["anomalies"].get(NAME)
    assert found and "first in the session's read order" in found[0]["message"]
    assert "rotated after answer" in found[0]["message"]
    assert not flagged(rotation(False), "kafka-4.3")  # read after t/0's bytes; its first batch unknown


@pytest.mark.parametrize("profile", PROFILES)
def test_the_epoch_the_session_holds_proves_the_omitted_read(profile):
    """Without metadata after the session nothing brackets the leader epoch, unless the session
    holds one for the partition: Kafka checks it on every read of a session partition, sent or
    not (`Partition.checkCurrentLeaderEpoch`), and an omitted partition carried no error."""
    assert not flagged(session(metadata_after=False), profile)
    assert not flagged(session(metadata_after=False, named=-1), profile)
    assert flagged(session(metadata_after=False, named=5), profile)
