"""The harness survives its own bugs and a cluster's gaps (issue 11): the kafka-python
response-class race behind `prober failed: weakly-referenced object no longer exists`, what a
cluster's ApiVersions let a run ask, and the harness log that keeps tracebacks off the terminal."""
from __future__ import annotations

import gc
import logging
import sys
import threading
import weakref
from pathlib import Path

import pytest

from kipcheck.harness.clients.capabilities import api_gaps, replication_gaps
from kipcheck.harness.runlog import LOG_NAME, harness_log, internal_error
from kipcheck.harness.clients.wire import response_class_of


def _poison_registry(response_class, version: int, attempts: int = 300) -> bool:
    """Create `response_class[version]` from several threads at once until kafka-python's
    response registry is left holding a proxy to a class that was then collected."""
    from kafka.protocol.api_header import ResponseClassRegistry
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(attempts):
            response_class._VERSIONS.pop(version, None)  # as on first use in a fresh process
            barrier = threading.Barrier(4)

            def make():
                barrier.wait()
                response_class[version]
            threads = [threading.Thread(target=make) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            gc.collect()
            try:
                ResponseClassRegistry._response_class_registry[response_class.API_KEY].__name__
            except ReferenceError:
                return True
        return False
    finally:
        sys.setswitchinterval(old_interval)


def test_the_response_registry_race_is_real_and_wire_does_not_depend_on_it():
    from kafka.protocol.api_header import ResponseClassRegistry
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    version = 9
    patched = ResponseClassRegistry.__dict__["register_response_class"]
    ResponseClassRegistry.register_response_class = ResponseClassRegistry._kipcheck_original_register
    try:  # kafka-python as shipped
        assert _poison_registry(MetadataResponse, version), "the race did not reproduce in 300 attempts"
        request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
        request.API_VERSION = version
        request.with_header(correlation_id=7, client_id="t")
        with pytest.raises(ReferenceError):  # what the prober died of: kafka-python's own lookup
            request.header.get_response_class()
        # wire's lookup does not go through the registry
        assert response_class_of(MetadataRequest) is MetadataResponse
        answer = MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id="c", controller_id=1, topics=[])
        answer.API_VERSION = version
        answer.with_header(correlation_id=7)
        decoded = response_class_of(MetadataRequest).decode(answer.encode(header=True), version=version, header=True)
        assert decoded.header.correlation_id == 7 and decoded.cluster_id == "c"
    finally:  # leave kafka-python usable (and patched) for the rest of the session
        ResponseClassRegistry.register_response_class = patched
        ResponseClassRegistry._response_class_registry[MetadataResponse.API_KEY] = weakref.proxy(MetadataResponse)


def test_with_wire_imported_kafka_pythons_own_lookup_survives_the_race_too():
    """faults.election's KafkaAdminClient resolves responses through the registry."""
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    version = 8
    assert not _poison_registry(MetadataResponse, version, attempts=40)
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    request.API_VERSION = version
    request.with_header(correlation_id=1, client_id="t")
    assert request.header.get_response_class() is MetadataResponse[version]


def test_response_class_of_refuses_what_has_no_sibling_response():
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse
    with pytest.raises(TypeError):
        response_class_of(ApiVersionsResponse)  # a response has no "...ResponseResponse"


KAFKA_4 = {0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 19: (2, 7), 20: (1, 6), 23: (2, 4), 32: (1, 4),
           44: (0, 1), 18: (0, 4), 55: (0, 2), 65: (0, 0), 66: (0, 2), 69: (0, 1)}
TANSU = {0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 19: (0, 7), 20: (0, 6), 32: (0, 4), 44: (0, 1),
         18: (0, 4)}


def test_a_full_kafka_skips_nothing():
    assert api_gaps(KAFKA_4) == []
    assert replication_gaps([1, 2, 3], "rack-2") == []


def test_a_broker_without_an_api_or_version_skips_exactly_those_probes():
    gaps = {g.key: g.reason for g in api_gaps(TANSU, "127.0.0.1:1")}
    assert set(gaps) == {"prober.offsets_for_leader_epoch", "prober.list_offsets@-6", "observer.metadata_propagation",
                         "prober.transactions", "observer.group_describe"}
    assert gaps["observer.group_describe"] == "127.0.0.1:1 does not answer ConsumerGroupDescribe (API key 69)"
    assert gaps["prober.transactions"] == "127.0.0.1:1 does not answer ListTransactions (API key 66)"
    assert gaps["prober.offsets_for_leader_epoch"] == "127.0.0.1:1 does not answer OffsetForLeaderEpoch (API key 23)"
    assert "DescribeQuorum (API key 55): no KRaft metadata quorum" in gaps["observer.metadata_propagation"]
    assert "v0-v9" in gaps["prober.list_offsets@-6"] and "v11+" in gaps["prober.list_offsets@-6"]


def test_old_fetch_and_missing_admin_apis_are_named():
    old = {**KAFKA_4, 1: (0, 10)}
    old.pop(44)
    keys = {g.key for g in api_gaps(old)}
    assert {"prober.kip392_cases", "prober.fetch_session", "observer.metadata_propagation"} <= keys


def test_a_broker_without_a_kraft_quorum_is_not_asked_about_kip1166():
    """KIP-1166 is about brokers fetching the KRaft metadata log: a broker that answers every
    Admin call the probe makes but no DescribeQuorum has no quorum to ask about."""
    no_quorum = {k: v for k, v in KAFKA_4.items() if k != 55}
    assert [g.key for g in api_gaps(no_quorum)] == ["observer.metadata_propagation"]
    assert [g.key for g in api_gaps(KAFKA_4)] == []


def test_replication_gaps_name_why_no_follower_is_read():
    [single] = replication_gaps([7], None)
    assert single.key == "consumer.follower_fetching" and "replication factor 1" in single.reason
    [rackless] = replication_gaps([1, 2], None)
    assert "broker.rack" in rackless.reason


def test_internal_errors_go_to_the_harness_log_only(tmp_path, capfd):
    with harness_log(tmp_path):
        try:
            {}["missing"]
        except KeyError as e:
            line = internal_error("prober", "a round failed", e)

        def dies():
            raise RuntimeError("thread death")
        t = threading.Thread(target=dies, name="doomed")
        t.start()
        t.join()
    logging.getLogger("kipcheck").error("after the run: not in the file")
    out, err = capfd.readouterr()
    log = (tmp_path / LOG_NAME).read_text()
    assert line == "KeyError: 'missing'"
    assert "prober: a round failed" in log and "Traceback" in log and "{}[\"missing\"]" in log
    assert "thread doomed died" in log and "RuntimeError: thread death" in log
    assert "after the run" not in log
    assert "Traceback" not in out + err.replace("after the run: not in the file", "")


def test_a_bug_outside_a_run_is_one_line_and_a_traceback_file(tmp_path, monkeypatch, capfd):
    import re

    from kipcheck.rundir import history as checker_history
    from kipcheck.errors import EXIT_ERROR
    from kipcheck.harness.cli import main

    def boom(run):
        raise RuntimeError("provoked")
    monkeypatch.setattr(checker_history, "iter_history", boom)
    assert main(["history", "stats", str(tmp_path)]) == EXIT_ERROR
    out, err = capfd.readouterr()
    [line] = err.strip().splitlines()
    found = re.fullmatch(r"kipcheck: internal error: RuntimeError: provoked \(traceback in (\S+)\)", line)
    assert found, line
    saved = Path(found.group(1))
    try:
        assert "Traceback" in saved.read_text() and "def boom" not in out + err
    finally:
        saved.unlink()
