"""The KRaft metadata log, read after a run: every partition's leader, ISR and ELR as the controller decided them.

Polled metadata has gaps (an ISR may grow between two answers and the next election then
looks ineligible), so the election rule (checks/rules/election_rules.py, KIP-966) reads the
controller's own log instead: every `PartitionRecord` and `PartitionChangeRecord` in the order
the quorum committed them. The records are appended to the history as `partition_change`
(and the feature levels as `metadata_feature`, so a run shows whether ELR was on), after the
workload and before the cluster goes down (docs/history.md).

The log is a Kafka log of record batches (kafka-python's `MemoryRecords` reads them); each
data record's value is an `ApiMessageAndVersion` frame: frame version 1, api key, version,
then the message in the flexible encoding (compact arrays, tagged fields). Only the four
record types the rule needs are decoded (metadata/src/main/resources/common/metadata/*.json:
TopicRecord 2, PartitionRecord 3 v0-2, PartitionChangeRecord 5 v0-2, RemoveTopicRecord 9,
FeatureLevelRecord 12); others are skipped, and a version newer than these is counted and skipped,
never guessed at.
"""
from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

PROCESS = "metadata-log"  # the history's process for these records
LOG_DIR = "__cluster_metadata-0"
TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC, FEATURE_LEVEL = 2, 3, 5, 9, 12
MAX_VERSION = {TOPIC: 0, PARTITION: 2, PARTITION_CHANGE: 2, REMOVE_TOPIC: 0, FEATURE_LEVEL: 0}
NO_CHANGE = -2  # PartitionChangeRecord.Leader: "-2 if the leader didn't change"


class _Reader:
    """The flexible (KIP-482) encoding, as far as these records use it."""

    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def int8(self) -> int:
        self.pos += 1
        return struct.unpack_from(">b", self.data, self.pos - 1)[0]

    def int16(self) -> int:
        self.pos += 2
        return struct.unpack_from(">h", self.data, self.pos - 2)[0]

    def int32(self) -> int:
        self.pos += 4
        return struct.unpack_from(">i", self.data, self.pos - 4)[0]

    def uuid(self) -> str:
        """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded."""
        self.pos += 16
        return base64.urlsafe_b64encode(self.data[self.pos - 16:self.pos]).decode().rstrip("=")

    def string(self) -> str | None:
        n = self.uvarint() - 1
        if n < 0:
            return None
        self.pos += n
        return self.data[self.pos - n:self.pos].decode()

    def int32s(self) -> list[int] | None:
        n = self.uvarint() - 1
        return None if n < 0 else [self.int32() for _ in range(n)]

    def uuids(self) -> list[str] | None:
        n = self.uvarint() - 1
        return None if n < 0 else [self.uuid() for _ in range(n)]

    def tagged(self) -> dict[int, "_Reader"]:
        """The tagged fields: tag -> a reader over that field's bytes."""
        out = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = _Reader(self.data[self.pos:self.pos + size])
            self.pos += size
        return out


def _partition(r: _Reader, version: int) -> dict:
    """PartitionRecord: a partition's whole state (creation, or a snapshot)."""
    out = {"partition": r.int32(), "topic_id": r.uuid(), "replicas": r.int32s(), "isr": r.int32s()}
    out["removing"], out["adding"] = r.int32s() or [], r.int32s() or []  # a reassignment in progress (KIP-455)
    out["leader"], out["leader_epoch"], out["partition_epoch"] = r.int32(), r.int32(), r.int32()
    if version >= 1:
        r.uuids()  # directories
    tags = r.tagged()
    out["recovery"] = tags[0].int8() if 0 in tags else 0
    out["elr"] = (tags[1].int32s() if 1 in tags else None) or []
    out["last_known_elr"] = (tags[2].int32s() if 2 in tags else None) or []
    return out


def _partition_change(r: _Reader, version: int) -> dict:
    """PartitionChangeRecord: only what changed (absent, or null: unchanged; leader -2: unchanged)."""
    out = {"partition": r.int32(), "topic_id": r.uuid()}
    tags = r.tagged()
    if 0 in tags:
        out["isr"] = tags[0].int32s()
    if 1 in tags and (leader := tags[1].int32()) != NO_CHANGE:
        out["leader"] = leader
    if 2 in tags:
        out["replicas"] = tags[2].int32s()
    if 3 in tags:
        out["removing"] = tags[3].int32s()
    if 4 in tags:
        out["adding"] = tags[4].int32s()
    if 5 in tags and (recovery := tags[5].int8()) >= 0:
        out["recovery"] = recovery
    if 6 in tags:
        out["elr"] = tags[6].int32s()
    if 7 in tags:
        out["last_known_elr"] = tags[7].int32s()
    return {k: v for k, v in out.items() if v is not None}


@dataclass
class Decoded:
    """What a metadata log held, in log order: history values for `partition_change` and `metadata_feature`."""

    changes: list[dict] = field(default_factory=list)
    features: list[dict] = field(default_factory=list)
    skipped_versions: dict[str, int] = field(default_factory=dict)  # "apikey:version" -> count (newer than known)


def decode(segments: list[bytes]) -> Decoded:
    """The partition records and feature levels of a metadata log's segments (oldest first).

    Topic ids are named from the log's own TopicRecords; a partition of a topic the log never
    names (its TopicRecord was compacted into a snapshot) keeps its id as the topic."""
    from kafka.record import MemoryRecords
    out, names = Decoded(), {}
    for data in segments:
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            if batch.is_control_batch:
                continue
            for rec in batch:
                if rec.value is None:
                    continue
                r = _Reader(bytes(rec.value))
                if r.uvarint() != 1:
                    continue
                api_key, version = r.uvarint(), r.uvarint()
                if api_key not in MAX_VERSION:
                    continue
                if version > MAX_VERSION[api_key]:
                    key = f"{api_key}:{version}"
                    out.skipped_versions[key] = out.skipped_versions.get(key, 0) + 1
                    continue
                at = {"offset": rec.offset, "log_time_ms": rec.timestamp}
                if api_key == TOPIC:
                    name, topic_id = r.string(), r.uuid()
                    names[topic_id] = name
                elif api_key == REMOVE_TOPIC:
                    names.pop(r.uuid(), None)
                elif api_key == FEATURE_LEVEL:
                    out.features.append({"feature": r.string(), "level": r.int16(), **at})
                else:
                    value = _partition(r, version) if api_key == PARTITION else _partition_change(r, version)
                    value["topic"] = names.get(value["topic_id"], value["topic_id"])
                    value["kind"] = "create" if api_key == PARTITION else "change"
                    out.changes.append({**value, **at})
    return out


def read_segments(node) -> list[bytes]:
    """The node's metadata log segments, oldest first, read through its file verbs (here or over SSH)."""
    directory = node.metadata_dir / LOG_DIR
    return [node.files.read_bytes(directory / name) or b""
            for name in sorted(node.files.file_sizes(directory, ".log"))]


def longest_log(nodes) -> list[bytes]:
    """The segments of the controller with the most metadata log (every voter's log holds the
    committed prefix; the longest has the most of it)."""
    controllers = [n for n in nodes if n.spec.is_controller]
    best: list[bytes] = []
    for node in controllers:
        segments = read_segments(node)
        if sum(map(len, segments)) > sum(map(len, best)):
            best = segments
    return best


def record(history, nodes, topics=None) -> Decoded:
    """Append the controller's partition records (of `topics` only, when given: a selftest window's)
    and feature levels to the history; what was decoded."""
    decoded = decode(longest_log(nodes))
    for value in decoded.features:
        history.append(PROCESS, "ok", "metadata_feature", value)
    for value in decoded.changes:
        if topics is None or value["topic"] in topics:
            history.append(PROCESS, "ok", "partition_change", value)
    return decoded
