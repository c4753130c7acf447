"""Each model-backed anomaly: a hand-made history that must be flagged, and a
near-identical valid one that must pass."""
from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from kipcheck.checks.rules.session_rules import FetchSessionRule
from kipcheck.checks.rules.kip1023_rules import TieredOffsetRule
from kipcheck.checks.rules.model_rules import MODEL_RULES
from tests.support.histories import fetch, history, names, run


def test_uncommitted_read():
    assert names(run(ConsumerFetchRule(), history(fetch(8, records=[8, 9, 10])))) == ["uncommitted-read"]
    assert names(run(ConsumerFetchRule(), history(fetch(8, records=[8, 9])))) == []


def test_records_above_a_stale_reported_hwm_are_known_under_kafka_unless_a_later_hwm_contradicts_them():
    # Kafka samples the response HWM before the read (Partition.readRecords): seen live
    h = history(fetch(8, records=[8, 9, 10], current_leader_epoch=1), fetch(11, hwm=11, current_leader_epoch=1))
    assert names(run(ConsumerFetchRule(), h, "kafka-4.3")) == []
    assert names(run(ConsumerFetchRule(), h, "kafka-4.3"), known=True) == ["uncommitted-read"]
    below = history(fetch(8, records=[8, 9, 10], current_leader_epoch=1), fetch(11, hwm=10, current_leader_epoch=1))
    assert names(run(ConsumerFetchRule(), below, "kafka-4.3")) == ["uncommitted-read"]


def test_wrong_fetch_error_case1_known_under_kafka():
    h = history(fetch(12, hwm=10))  # NONE above the HWM
    assert names(run(ConsumerFetchRule(), h, "kip")) == ["wrong-fetch-error"]
    assert names(run(ConsumerFetchRule(), h, "kafka-4.3")) == [] and names(run(ConsumerFetchRule(), h, "kafka-4.3"), True) == ["wrong-fetch-error"]
    assert names(run(ConsumerFetchRule(), history(fetch(10, hwm=10)))) == []  # at the end of the log


def test_wrong_fetch_error_below_log_start_and_out_of_range_in_range():
    assert names(run(ConsumerFetchRule(), history(fetch(2, start=3)), "kafka-4.3")) == ["wrong-fetch-error"]
    assert names(run(ConsumerFetchRule(), history(fetch(3, start=3)), "kafka-4.3")) == []
    oor = history(fetch(5, error="OFFSET_OUT_OF_RANGE", hwm=10, start=0))
    assert names(run(ConsumerFetchRule(), oor)) == ["wrong-fetch-error"]
    assert names(run(ConsumerFetchRule(), history(fetch(11, error="OFFSET_OUT_OF_RANGE", hwm=10, start=0)))) == []
    bare = history(fetch(11, error="OFFSET_OUT_OF_RANGE", hwm=-1, start=-1))
    assert names(run(ConsumerFetchRule(), bare, "kip")) == ["wrong-fetch-error"]
    assert names(run(ConsumerFetchRule(), bare, "kafka-4.3"), True) == ["wrong-fetch-error"]


def test_hwm_regression():
    bad = history(fetch(0, hwm=10, current_leader_epoch=3), fetch(0, hwm=9, current_leader_epoch=3))
    assert names(run(HighWatermarkRule(), bad)) == ["hwm-regression"]
    assert names(run(HighWatermarkRule(), history(fetch(0, hwm=10, current_leader_epoch=3), fetch(0, hwm=10, current_leader_epoch=3)))) == []
    assert names(run(HighWatermarkRule(), history(fetch(0, hwm=10, current_leader_epoch=3), fetch(0, hwm=9, current_leader_epoch=4)))) == []
    assert names(run(HighWatermarkRule(), history(fetch(0, hwm=10), fetch(0, hwm=9)))) == []  # epoch unknown
    kill = ("nemesis", "fault", {"fault": "kill", "targets": [2], "phase": "start"}, None)
    assert names(run(HighWatermarkRule(), history(fetch(0, hwm=10, current_leader_epoch=3), kill,
                                                  fetch(0, hwm=9, current_leader_epoch=3)))) == []


def test_hwm_regression_epoch_from_metadata_brackets():
    meta = (9, "metadata", {"broker": 2, "topic": "t", "partition": 0}, {"leader": 2, "leader_epoch": 5, "isr": [1, 2], "replicas": [1, 2]})
    assert names(run(HighWatermarkRule(), history(meta, fetch(0, hwm=10), fetch(0, hwm=9), meta))) == ["hwm-regression"]
    assert names(run(HighWatermarkRule(), history(meta, fetch(0, hwm=10), fetch(0, hwm=9)))) == []


def test_follower_hwm_going_back_is_known_under_kafka_only_on_a_follower():
    # seen live: after an election the follower copied the new leader's lagging HWM
    def meta(leader, epoch=5):
        return (9, "metadata", {"broker": 2, "topic": "t", "partition": 0},
                {"leader": leader, "leader_epoch": epoch, "isr": [1, 2], "replicas": [1, 2]})
    follower = history(meta(1, 4), meta(1), fetch(0, hwm=10), fetch(0, hwm=9), meta(1))
    assert names(run(HighWatermarkRule(), follower, "kip")) == ["hwm-regression"]
    assert names(run(HighWatermarkRule(), follower, "kafka-4.3")) == []
    assert names(run(HighWatermarkRule(), follower, "kafka-4.3"), known=True) == ["hwm-regression"]
    no_election = history(meta(1), fetch(0, hwm=10), fetch(0, hwm=9), meta(1))
    assert names(run(HighWatermarkRule(), no_election, "kafka-4.3")) == ["hwm-regression"]
    leader = history(meta(2, 4), meta(2), fetch(0, hwm=10), fetch(0, hwm=9), meta(2))  # broker 2 leads: never allowed
    assert names(run(HighWatermarkRule(), leader, "kafka-4.3")) == ["hwm-regression"]


def test_offsets_for_leader_epoch_above_hwm():
    ofle = (3, "offsets_for_leader_epoch", {"broker": 2, "replica_id": -1, "topic": "t", "partition": 0, "leader_epoch": 3,
                                            "current_leader_epoch": 3}, {"error": "NONE", "end_offset": 12, "leader_epoch": 3})
    h = history(ofle, fetch(0, hwm=10, current_leader_epoch=3))
    assert names(run(HighWatermarkRule(), h, "kip")) == ["wrong-fetch-error"]
    assert names(run(HighWatermarkRule(), h, "kafka-4.3"), True) == ["wrong-fetch-error"]
    assert names(run(HighWatermarkRule(), history(ofle, fetch(0, hwm=12, current_leader_epoch=3)))) == []


def sfetch(sid, epoch, rid, top="NONE", parts=None, forgotten=()):
    parts = parts if parts is not None else [{"topic": "t", "partition": 0, "fetch_offset": 0, "error": "NONE",
                                              "high_watermark": 10, "log_start_offset": 0, "records": [[0, "a"]]}]
    inv = {"broker": 1, "replica_id": -1, "session_id": sid, "session_epoch": epoch, "version": 12,
           "partitions": [{k: p[k] for k in ("topic", "partition", "fetch_offset") if k in p} for p in parts],
           "forgotten": list(forgotten)}
    return (4, "fetch", inv, {"top_error": top, "response_session_id": rid, "partitions": parts})


OMIT = [{"topic": "t", "partition": 0, "omitted": True}]
EMPTY = [{"topic": "t", "partition": 0, "fetch_offset": 10, "error": "NONE", "high_watermark": 10, "log_start_offset": 0, "records": []}]


def test_fetch_session_epochs_and_errors():
    ok = history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 42, parts=OMIT), sfetch(42, 2, 42, parts=OMIT))
    assert names(run(FetchSessionRule(), ok)) == []
    assert names(run(FetchSessionRule(), history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 42, parts=OMIT), sfetch(42, 1, 42, parts=OMIT)))) == ["fetch-session-violation"]
    inval = history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 42, parts=OMIT), sfetch(42, 1, 0, top="INVALID_FETCH_SESSION_EPOCH", parts=OMIT))
    assert names(run(FetchSessionRule(), inval)) == []
    assert names(run(FetchSessionRule(), history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 0, top="INVALID_FETCH_SESSION_EPOCH", parts=OMIT)))) == ["fetch-session-violation"]
    assert names(run(FetchSessionRule(), history(sfetch(0, -1, 42)))) == ["fetch-session-violation"]
    assert names(run(FetchSessionRule(), history(sfetch(0, -1, 0)))) == []
    gone = history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 0, top="FETCH_SESSION_ID_NOT_FOUND", parts=OMIT), sfetch(42, 2, 42, parts=OMIT))
    assert names(run(FetchSessionRule(), gone)) == ["fetch-session-violation"]
    assert names(run(FetchSessionRule(), history(sfetch(0, 0, 42, parts=OMIT)))) == ["fetch-session-violation"]


def test_fetch_session_omitted_partition_with_available_data():
    # session sent HWM 10 and fetch offset 0 is below it: the next incremental response must carry t/0
    start = [{"topic": "t", "partition": 0, "fetch_offset": 0, "error": "NONE", "high_watermark": 10,
              "log_start_offset": 0, "records": [[0, "a"], [1, "b"]]}]
    bad = history(sfetch(0, 0, 42, parts=start), sfetch(42, 1, 42, parts=OMIT))
    assert names(run(FetchSessionRule(), bad)) == ["fetch-session-violation"]
    caught_up = [{**start[0], "fetch_offset": 10, "records": []}]
    assert names(run(FetchSessionRule(), history(sfetch(0, 0, 42, parts=caught_up), sfetch(42, 1, 42, parts=OMIT)))) == []


def test_fetch_session_empty_close_known_under_kafka():
    h = history(sfetch(0, 0, 42, parts=EMPTY), sfetch(42, 1, 0, parts=[], forgotten=[["t", 0]]))
    assert names(run(FetchSessionRule(), h, "kip")) == ["fetch-session-violation"]
    assert names(run(FetchSessionRule(), h, "kafka-4.3"), True) == ["fetch-session-violation"]


def lo(ts, offset, iso="read_uncommitted"):
    return (5, "list_offsets", {"broker": 1, "replica_id": -1, "isolation_level": iso, "topic": "t", "partition": 0, "timestamp": ts},
            {"error": "NONE", "offset": offset, "leader_epoch": 5})


M1 = (9, "metadata", {"broker": 1, "topic": "t", "partition": 0}, {"leader": 1, "leader_epoch": 5, "isr": [1], "replicas": [1]})


def test_tiered_offsets():
    assert names(run(TieredOffsetRule(), history(M1, lo(-5, 80), lo(-1, 79, "read_committed"), M1))) == ["tiered-offset-violation"]
    assert names(run(TieredOffsetRule(), history(M1, lo(-5, 80), lo(-1, 80, "read_committed"), M1))) == []
    assert names(run(TieredOffsetRule(), history(M1, lo(-5, 80), lo(-6, 80), M1))) == ["tiered-offset-violation"]
    assert names(run(TieredOffsetRule(), history(M1, lo(-5, 80), lo(-6, 81), M1))) == []
    assert names(run(TieredOffsetRule(), history(M1, lo(-1, 79, "read_committed"), lo(-5, 80), M1))) == []  # order matters


def test_model_rules_exported():
    produced = {n for r in MODEL_RULES for n in r.anomalies}
    assert produced == {"uncommitted-read", "hwm-regression", "wrong-fetch-error", "preferred-replica-violation",
                        "fetch-session-violation", "tiered-offset-violation", "hwm-propagation-delay",
                        "ineligible-leader", "premature-reassignment-completion", "append-time-violation",
                        "time-offset-violation", "group-ownership-violation", "slow-rebalance", "committed-offset-regression",
                        "resume-skip", "share-double-acquire", "share-accepted-redelivered",
                        "share-delivery-limit-exceeded", "share-record-lost", "share-session-violation"}
