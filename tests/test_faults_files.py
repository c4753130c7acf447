"""The file side of the bitflip and truncate faults, on segments in Kafka's own record-batch format,
and the small pure parts of the clock and log-dir kinds."""
from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kipcheck.faults import disk
from kipcheck.faults.base import FaultSpec
from kipcheck.faults.clock import offset_text
from kipcheck.faults.errors import FaultError
from kipcheck.faults.registry import DEFAULT_MIX, cluster_options
from kipcheck.harness.backends.network import Host
from kipcheck.harness.clients.values import text

CTX = SimpleNamespace(topic="t")  # a FaultContext's workload topic, all these faults read of it
HERE = Host("n1", "127.0.0.1", None)  # the native runner: the node's files on this machine


def _batch(base_offset: int, values: list[bytes]) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, v in enumerate(values):
        b.append(i, timestamp=1000 + i, key=None, value=v, headers=[])
    data = bytearray(b.build())
    struct.pack_into(">q", data, 0, base_offset)
    return bytes(data)


def _partition(tmp_path: Path, segments: dict[int, int], recovery_point: int | None = None) -> SimpleNamespace:
    """A node directory as Kafka lays it out: t-0/<base>.log segments of `count` batches each, a checkpoint."""
    data = tmp_path / "data"
    (data / "t-0").mkdir(parents=True)
    for base, count in segments.items():
        log = b"".join(_batch(base + i, [b"value-%d" % (base + i)]) for i in range(count))
        (data / "t-0" / f"{base:020d}.log").write_bytes(log)
        (data / "t-0" / f"{base:020d}.index").write_bytes(bytes(80))
    if recovery_point is not None:
        (data / "recovery-point-offset-checkpoint").write_text(f"0\n2\nother 0 5\nt 0 {recovery_point}\n")
    return SimpleNamespace(data_dir=data, data_dirs=[data], spec=SimpleNamespace(node_id=1), files=HERE)


def _crc_ok(path: Path) -> list[bool]:
    records, out = MemoryRecords(path.read_bytes()), []
    while (batch := records.next_batch()) is not None:
        out.append(batch.validate_crc())
    return out


def test_the_crc_covered_region_starts_at_the_attributes():
    assert disk.CRC_COVERED_FROM == DefaultRecordBatch.ATTRIBUTES_OFFSET


@pytest.mark.parametrize("segment", ["active", "closed"])
def test_bitflips_land_where_the_batch_crc_catches_them(tmp_path, segment):
    node = _partition(tmp_path, {0: 20, 20: 20})
    spec = FaultSpec("bitflip", 0, 0, {"topic": "t", "partition": 0, "segment": segment, "flips": 5, "seed": 1})
    out = disk.BitFlip().damage(CTX, node, spec)
    assert out["segment_role"] == segment and out["recovery_point"] == 0
    damaged = node.data_dir / "t-0" / out["damaged"]
    assert damaged.name == ("00000000000000000020.log" if segment == "active" else "00000000000000000000.log")
    assert not all(_crc_ok(damaged))
    assert len(_crc_ok(damaged)) == 20  # batch boundaries (baseOffset, length) untouched
    other = next(p for p in (node.data_dir / "t-0").glob("*.log") if p != damaged)
    assert all(_crc_ok(other))


def test_same_seed_same_flips(tmp_path):
    a, b = _partition(tmp_path / "a", {0: 10}), _partition(tmp_path / "b", {0: 10})
    spec = FaultSpec("bitflip", 0, 0, {"topic": "t", "flips": 8, "seed": 42})
    assert disk.BitFlip().damage(CTX, a, spec) == disk.BitFlip().damage(CTX, b, spec)
    assert (a.data_dir / "t-0" / "00000000000000000000.log").read_bytes() == \
        (b.data_dir / "t-0" / "00000000000000000000.log").read_bytes()


def test_only_segments_above_the_recovery_point_are_touched(tmp_path):
    """Kafka trusts (does not re-read) segments below the checkpointed recovery point: no flips there."""
    node = _partition(tmp_path, {0: 10, 10: 10, 20: 10}, recovery_point=15)
    assert [p.name for p in disk.recovered_segments(node, "t", 0)[0]] == \
        ["00000000000000000010.log", "00000000000000000020.log"]
    spec = FaultSpec("bitflip", 0, 0, {"topic": "t", "segment": "closed", "index": 5, "seed": 3})
    assert disk.BitFlip().damage(CTX, node, spec)["damaged"] == "00000000000000000010.log"
    assert all(_crc_ok(node.data_dir / "t-0" / "00000000000000000000.log"))


def test_the_partition_is_found_in_any_log_directory(tmp_path):
    node = _partition(tmp_path, {0: 10}, recovery_point=0)
    node.data_dirs = [tmp_path / "empty", node.data_dir]
    node.data_dir = node.data_dirs[0]
    out = disk.Truncate().damage(CTX, node, FaultSpec("truncate", 0, 0, {"topic": "t", "bytes": 10}))
    assert out["size_before"] - out["size_after"] == 10


def test_closed_falls_back_to_the_active_segment_when_none_is_recovered(tmp_path):
    node = _partition(tmp_path, {0: 10, 10: 10}, recovery_point=12)
    spec = FaultSpec("truncate", 0, 0, {"topic": "t", "segment": "closed", "bytes": 30})
    out = disk.Truncate().damage(CTX, node, spec)
    assert out["segment_role"] == "active" and out["size_before"] - out["size_after"] == 30


def test_index_flips_change_the_index_only(tmp_path):
    node = _partition(tmp_path, {0: 10})
    log = (node.data_dir / "t-0" / "00000000000000000000.log").read_bytes()
    out = disk.BitFlip().damage(CTX, node, FaultSpec("bitflip", 0, 0, {"topic": "t", "file": "index", "flips": 3}))
    assert out["damaged"].endswith(".index")
    assert (node.data_dir / "t-0" / "00000000000000000000.index").read_bytes() != bytes(80)
    assert (node.data_dir / "t-0" / "00000000000000000000.log").read_bytes() == log


def test_no_segment_is_a_fault_error(tmp_path):
    node = SimpleNamespace(data_dir=tmp_path, data_dirs=[tmp_path], spec=SimpleNamespace(node_id=1), files=HERE)
    with pytest.raises(FaultError, match="no segment"):
        disk.BitFlip().damage(CTX, node, FaultSpec("bitflip", 0, 0, {"topic": "t"}))


def test_a_corrupted_value_is_recorded_as_a_different_value():
    """A flipped byte must reach the history as a value no send wrote (inconsistent-offset), not an exception."""
    assert text(b"0-17") == "0-17"
    assert text(b"0-\xb7") not in (None, "0-7", "0-17") and text(b"0-\xb7") != text(b"0-\xb8")
    assert text(None) is None


def test_a_record_served_with_a_flipped_bit_is_an_inconsistent_offset():
    """End to end on the bytes: a batch whose value byte flipped (the client checks no CRC), decoded as
    the prober decodes fetches, read at the offset a send was acknowledged at: the checker flags it."""
    from kipcheck.checks.engine_local import check_records
    from kipcheck.harness.clients.wire import decode_fetched
    batch = bytearray(_batch(0, [b"0-1", b"0-2"]))
    batch[batch.rindex(b"0-2") + 2] ^= 0x80  # "2" (0x32) becomes 0xb2: not UTF-8 on its own
    (o1, v1), (o2, v2) = decode_fetched(bytes(batch))[0]
    assert (o1, v1) == (0, "0-1") and o2 == 1 and v2 not in ("0-2", None)

    def rec(i, proc, type_, f, value):
        return {"index": i, "time": i * 10, "process": proc, "type": type_, "f": f, "value": value}
    sends = [rec(2 * i + k, 0, t, "send", {"topic": "t", "partition": 0, "value": v, **({"offset": i} if k else {})})
             for i, v in enumerate(["0-1", "0-2"]) for k, t in enumerate(["invoke", "ok"])]
    poll = [rec(4, 9, "invoke", "poll", {"topic": "t"}),
            rec(5, 9, "ok", "poll", {"records": [["t", 0, o1, v1], ["t", 0, o2, v2]]})]
    found = check_records(sends + poll)["anomalies"]["inconsistent-offset"]
    assert len(found) == 1 and found[0]["offset"] == 1
    assert check_records(sends + [poll[0], rec(5, 9, "ok", "poll", {"records": [["t", 0, 0, "0-1"], ["t", 0, 1, "0-2"]]})]
                         )["valid"] is True


def test_the_first_batch_size_is_read_from_its_header():
    """What the prober records of a fetched record set for KIP-227's size limits: the first
    batch's whole size, whatever follows it (another batch, or a batch cut short by the limit)."""
    from kipcheck.harness.clients.wire import decode_fetched, first_batch_bytes
    first, second = _batch(0, [b"0-1", b"0-2"]), _batch(2, [b"0-3" * 50])
    assert first_batch_bytes(first + second) == len(first) != len(second)
    assert first_batch_bytes(first + second[:20]) == len(first)
    assert [o for o, _ in decode_fetched(first + second[:20])[0]] == [0, 1]  # the cut batch is no record
    assert first_batch_bytes(b"") is None and first_batch_bytes(first[:11]) is None


def test_offset_text_is_libfaketimes_relative_offset():
    assert offset_text(60) == "+60" and offset_text(-300) == "-300" and offset_text(0) == "+0"


def test_cluster_options_come_from_the_kinds():
    assert cluster_options(["kill"]) == {"proxied_clients": False, "proxied_links": False}
    assert cluster_options(["clock-skew", "log-dir-failure", "latency"]) == {
        "proxied_clients": True, "proxied_links": False, "fake_clocks": True, "log_dirs": 2}
    assert cluster_options(["replication-latency", "controller-latency"]) == {"proxied_clients": False, "proxied_links": True}
    assert {"bitflip", "clock-skew", "clock-strobe", "log-dir-failure"} <= set(DEFAULT_MIX)


def test_a_dynamic_quorum_formats_controllers_with_their_first_voters_and_brokers_with_none():
    from kipcheck.harness.backends.quorum import DynamicQuorum
    q = DynamicQuorum({2: "dirB", 1: "dirA"}, {2: "198.18.0.12:9093", 1: "198.18.0.11:9093"})
    assert q.bootstrap == "198.18.0.11:9093,198.18.0.12:9093"
    assert q.format_args(True) == ("--initial-controllers", "1@198.18.0.11:9093:dirA,2@198.18.0.12:9093:dirB")
    assert q.format_args(False) == ("--no-initial-controllers",)
    assert "voter-removal" not in DEFAULT_MIX and cluster_options(["voter-removal"])["dynamic_quorum"] is True
