"""The KIP-932 message codec (harness.clients.share_wire): every message round-trips at every
version Kafka 4.3.1 speaks, and one heartbeat's bytes match the flexible-version layout."""
import uuid

import pytest

from kipcheck.harness.clients import share_wire as sw
from kipcheck.harness.clients.wire import response_class_of

TOPIC = uuid.UUID("6a1f0d2e-3b4c-4d5e-8f70-112233445566")


def heartbeat_request():
    return sw.ShareGroupHeartbeatRequest(group_id="g", member_id=str(uuid.UUID(int=7)), member_epoch=0,
                                         rack_id=None, subscribed_topic_names=["t"])


def heartbeat_response():
    R = sw.ShareGroupHeartbeatResponse
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=3,
             heartbeat_interval_ms=5000, assignment=R.Assignment(topic_partitions=[
                 R.Assignment.TopicPartitions(topic_id=TOPIC, partitions=[0, 2])]))


def fetch_request():
    F = sw.ShareFetchRequest
    return F(group_id="g", member_id="m", share_session_epoch=1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
             max_records=50, batch_size=50, topics=[F.FetchTopic(topic_id=TOPIC, partitions=[
                 F.FetchTopic.FetchPartition(partition_index=0, acknowledgement_batches=[
                     F.FetchTopic.FetchPartition.AcknowledgementBatch(first_offset=3, last_offset=5,
                                                                      acknowledge_types=[1])])])],
             forgotten_topics_data=[F.ForgottenTopic(topic_id=TOPIC, partitions=[1])])


def fetch_response():
    R = sw.ShareFetchResponse
    P = R.ShareFetchableTopicResponse.PartitionData
    return R(throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=30000,
             responses=[R.ShareFetchableTopicResponse(topic_id=TOPIC, partitions=[P(
                 partition_index=0, error_code=0, error_message=None, acknowledge_error_code=0,
                 acknowledge_error_message=None, current_leader=P.LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
                 records=None,
                 acquired_records=[P.AcquiredRecords(first_offset=10, last_offset=19, delivery_count=2)])])],
             node_endpoints=[R.NodeEndpoint(node_id=1, host="localhost", port=9092, rack=None)])


def acknowledge_request():
    A = sw.ShareAcknowledgeRequest
    return A(group_id="g", member_id="m", share_session_epoch=2, topics=[A.AcknowledgeTopic(topic_id=TOPIC, partitions=[
        A.AcknowledgeTopic.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
            A.AcknowledgeTopic.AcknowledgePartition.AcknowledgementBatch(first_offset=10, last_offset=19,
                                                                         acknowledge_types=[1])])])])


def acknowledge_response():
    R = sw.ShareAcknowledgeResponse
    P = R.ShareAcknowledgeTopicResponse.PartitionData
    return R(throttle_time_ms=0, error_code=sw_code("INVALID_SHARE_SESSION_EPOCH"), error_message="wrong epoch",
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=TOPIC, partitions=[P(
                 partition_index=0, error_code=0, error_message=None,
                 current_leader=P.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))])], node_endpoints=[])


def sw_code(name):
    import kafka.errors
    return next(c for c, e in kafka.errors.kafka_errors.items() if getattr(e, "message", None) == name)


MESSAGES = [(heartbeat_request, (1,)), (heartbeat_response, (1,)), (fetch_request, (1, 2)),
            (fetch_response, (1, 2)), (acknowledge_request, (1, 2)), (acknowledge_response, (1, 2))]


@pytest.mark.parametrize("build,versions", MESSAGES, ids=[b.__name__ for b, _ in MESSAGES])
def test_every_message_round_trips_at_every_version_kafka_4_3_1_speaks(build, versions):
    message = build()
    assert message.max_version == max(versions)
    for version in versions:
        decoded = type(message).decode(message.encode(version=version), version=version)
        assert decoded == message, version


def test_the_api_keys_are_kip_932s_and_each_request_finds_its_response():
    assert (sw.ShareGroupHeartbeatRequest.API_KEY, sw.ShareFetchRequest.API_KEY,
            sw.ShareAcknowledgeRequest.API_KEY) == (76, 78, 79)
    for request in (sw.ShareGroupHeartbeatRequest, sw.ShareFetchRequest, sw.ShareAcknowledgeRequest):
        assert response_class_of(request).API_KEY == request.API_KEY


def test_a_heartbeat_encodes_to_the_flexible_layout_byte_for_byte():
    member = str(uuid.UUID(int=7))
    expected = (b"\x02g" + bytes([len(member) + 1]) + member.encode() + (0).to_bytes(4, "big")
                + b"\x00"  # rack: null compact string
                + b"\x02\x02t"  # one topic name, "t"
                + b"\x00")  # no tagged fields
    assert heartbeat_request().encode(version=1) == expected


def test_the_acquired_records_and_the_null_assignment_decode():
    decoded = sw.ShareFetchResponse.decode(fetch_response().encode(version=1), version=1)
    acquired = decoded.responses[0].partitions[0].acquired_records[0]
    assert (acquired.first_offset, acquired.last_offset, acquired.delivery_count) == (10, 19, 2)
    R = sw.ShareGroupHeartbeatResponse
    empty = R(throttle_time_ms=0, error_code=0, error_message=None, member_id="m", member_epoch=1,
              heartbeat_interval_ms=5000, assignment=None)
    assert R.decode(empty.encode(version=1), version=1).assignment is None


def test_the_prober_accepts_what_it_acquired_in_ascending_merged_ranges():
    from kipcheck.harness.clients.share_prober import accept_all
    answers = [{"topic": "t", "partition": 1, "acquired": [[20, 29, 1], [5, 9, 2]]},
               {"topic": "t", "partition": 1, "acquired": [[10, 12, 1], [30, 30, 1]]},
               {"topic": "t", "partition": 0, "acquired": []}, {"topic": "u", "partition": 0, "acquired": [[7, 7, 3]]}]
    assert accept_all(answers) == [["t", 1, 5, 12, "accept"], ["t", 1, 20, 30, "accept"], ["u", 0, 7, 7, "accept"]]
    assert accept_all([]) == []


def test_the_prober_asks_share_sessions_only_in_a_share_run_and_second(tmp_path):
    import threading
    from kipcheck.harness.clients.prober import Prober
    from kipcheck.harness.clients.share_prober import prober_group
    from kipcheck.rundir.writer import History
    history = History(tmp_path / "history.jsonl")
    try:
        stop = threading.Event()
        plain = [r.__name__ for r in Prober("localhost:1", ["t"], history, stop).rounds()]
        share = [r.__name__ for r in Prober("localhost:1", ["t"], history, stop, share_group="g").rounds()]
        skipped = [r.__name__ for r in Prober("localhost:1", ["t"], history, stop, share_group="g",
                                              skip=frozenset({"share_session"})).rounds()]
    finally:
        history.close()
    assert "share_session" not in plain and share[1] == "share_session" and skipped == plain
    assert share[:1] + share[2:] == plain
    assert prober_group("kipcheck-share-t-abc123") == "kipcheck-share-t-abc123-prober"


def test_the_prober_numbers_its_connections_and_keeps_one_per_broker_until_closed(tmp_path, monkeypatch):
    """A share session lives on the connection that opened it (ShareSessionCache's disconnect listener): the
    records name it by the prober's number, the same while it stays open, a new one once reopened."""
    import threading
    from types import SimpleNamespace
    from kipcheck.harness.clients import prober as prober_module
    from kipcheck.rundir.writer import History

    class FakeConnection:
        def __init__(self, address, timeout):
            self.address = address

        def close(self):
            pass

    monkeypatch.setattr(prober_module, "BrokerConnection", FakeConnection)
    history = History(tmp_path / "history.jsonl")
    try:
        p = prober_module.Prober("localhost:1", ["t"], history, threading.Event(), share_group="g")
        p._view = SimpleNamespace(brokers={1: ("a:1", None), 2: ("b:1", None)})
        first = [p.connection_number(1), p.connection_number(1), p.connection_number(2)]
        p.close()
        assert first == [1, 1, 2] and p.connection_number(1) == 3
    finally:
        history.close()
