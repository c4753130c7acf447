"""When the prober's settled round stops asking a partition ListOffsets -3 again (KIP-734)."""
from kipcheck.harness.clients.prober import _max_timestamp_decided


def _a(offset, error="NONE"):
    return {"offset": offset, "error": error}


def test_a_named_record_decides():
    assert _max_timestamp_decided({-1: _a(10), -2: _a(0), -3: _a(9)})


def test_a_withheld_answer_on_a_partition_with_records_is_asked_again():
    assert not _max_timestamp_decided({-1: _a(10), -2: _a(0), -3: _a(-1)})
    assert not _max_timestamp_decided({-1: _a(1), -2: _a(0), -3: _a(-1)})  # one record, still above the HWM


def test_an_empty_partition_decides_though_no_answer_names_a_record():
    assert _max_timestamp_decided({-1: _a(5), -2: _a(5), -3: _a(-1)})  # every record deleted: latest = earliest


def test_an_error_decides_nothing():
    assert not _max_timestamp_decided({-1: _a(10), -2: _a(0), -3: _a(9, "NOT_LEADER_OR_FOLLOWER")})
    assert not _max_timestamp_decided({-1: _a(5), -2: _a(5, "UNKNOWN_SERVER_ERROR"), -3: _a(-1)})
    assert not _max_timestamp_decided({-1: None, -2: None, -3: _a(-1)})


def test_a_release_that_cannot_be_asked_is_not_asked_again():
    assert _max_timestamp_decided({-1: _a(10), -2: _a(0), -3: None})  # not in its ApiVersions
    assert _max_timestamp_decided({-1: _a(10), -2: _a(0)})  # skipped
