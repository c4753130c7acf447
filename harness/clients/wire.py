"""A raw Kafka protocol connection to one broker (kafka-python 3.x message classes).

Client libraries hide what the probes must see: librdkafka has no KIP-227 sessions
under our control and rewrites errors into its own. This speaks the wire protocol
directly: size-prefixed frames on a plain socket, one request in flight, versions
negotiated with ApiVersions. Any socket error or timeout raises `WireError`, which the
callers record as an indeterminate (`info`) outcome.
"""
from __future__ import annotations

import itertools
import socket
import struct
import sys
import threading
import weakref

import kafka.errors
from kafka.protocol.api_header import ResponseClassRegistry
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.record import MemoryRecords
from kipcheck.harness.clients import values


class WireError(OSError):
    """The request may or may not have reached the broker (connection lost, timeout)."""


class UnsupportedVersion(Exception):
    """Broker and codec share no version of an API: nothing was sent."""


#: codes whose kafka-python name is older than Kafka's own (org.apache.kafka.common.protocol.Errors)
RENAMED = {0: "NONE", 6: "NOT_LEADER_OR_FOLLOWER"}


def error_name(code: int) -> str:
    """Kafka's name for an error code ("NONE" for 0), as the history records it."""
    if code in RENAMED:
        return RENAMED[code]
    return getattr(kafka.errors.for_code(code), "message", None) or f"UNKNOWN_ERROR_{code}"


#: a control record's type (its key: version int16, type int16; KIP-98 "Control messages")
MARKER_TYPES = {0: "ABORT", 1: "COMMIT"}


def decode_fetched(data) -> tuple[list[list], list[list], list[list]]:
    """The data records ([[offset, value], ...]), the transaction markers ([[offset, "COMMIT" |
    "ABORT"], ...]) and the transactional data batches ([[base offset, last offset, producer id],
    ...]) of a fetched record set. Markers are control batches, not data: consumers never return
    them, so they are kept apart (a response carrying only a marker still carried new data,
    KIP-227). The batches say which producer wrote a record, what the aborted-transaction list
    of a read_committed answer is about (KIP-98). Values as `values.text` writes them."""
    if not data:
        return [], [], []
    raw = bytes(data) if not isinstance(data, (bytes, bytearray)) else data
    out, markers, batches = [], [], []
    records = MemoryRecords(raw)
    while True:
        batch = records.next_batch()
        if batch is None:
            break
        control = getattr(batch, "is_control_batch", False)
        if not control and getattr(batch, "is_transactional", False):
            batches.append([batch.base_offset, batch.base_offset + batch.last_offset_delta, batch.producer_id])
        for r in batch:
            if control:
                key = r.key or b""
                markers.append([r.offset, MARKER_TYPES.get(int.from_bytes(key[2:4], "big") if len(key) >= 4 else -1,
                                                           "UNKNOWN")])
                continue
            out.append([r.offset, values.text(r.value)])
    return out, markers, batches


def first_batch_bytes(data) -> int | None:
    """The size of the first record batch of a fetched record set (its header's base offset,
    int64, then batch length, int32, counting what follows it); None: too short to say."""
    if data is None or len(data) < 12:
        return None
    return 12 + int.from_bytes(bytes(data[8:12]), "big", signed=True)


def newest_common(versions: dict[int, tuple[int, int]], message_class, lowest: int = 0) -> int | None:
    """The newest version of `message_class` that a broker (its ApiVersions answer) and the codec
    both speak, at least `lowest`; None when there is none."""
    broker = versions.get(message_class.API_KEY)
    if broker is None:
        return None
    top = min(message_class.max_version, broker[1])
    return top if top >= max(lowest, broker[0]) else None


#: kafka-python (3.0.12) compiles each message's codec lazily and not thread-safely:
#: `StructField.compiled_decode_from` swaps `self._data_class` while it generates code, so a
#: thread compiling at the same time can cache a codec bound to another class (seen: the
#: observer's per-broker watcher threads died with "weakly-referenced object no longer
#: exists" on their first DescribeConfigs). Encoding and decoding take this lock; the network
#: wait does not.
_CODEC_LOCK = threading.Lock()


class BrokerConnection:
    """One socket to one broker listener; `request` sends one message and returns its answer."""

    def __init__(self, address: str, client_id: str = "kipcheck-prober", timeout: float = 10.0):
        host, port = address.rsplit(":", 1)
        self.address, self.client_id, self.timeout = address, client_id, timeout
        self._correlation = itertools.count(1)
        try:
            self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        except OSError as e:
            raise WireError(f"cannot connect to {address}: {e}") from None
        self.versions: dict[int, tuple[int, int]] = {}
        self.versions = self._api_versions()

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def version_for(self, message_class, lowest: int = 0) -> int:
        """The newest version both the broker and the codec speak (at least `lowest`)."""
        top = newest_common(self.versions, message_class, lowest)
        if top is None:
            raise UnsupportedVersion(f"{message_class.__name__} >= v{lowest} is not supported by {self.address}")
        return top

    def request(self, message, version: int):
        """Send `message` at `version`; return the decoded response."""
        correlation_id = next(self._correlation)
        message.API_VERSION = version
        with _CODEC_LOCK:
            message.with_header(correlation_id=correlation_id, client_id=self.client_id)
            frame = message.encode(header=True, framed=True)
            response_class = response_class_of(type(message))
        try:
            self._sock.settimeout(self.timeout)
            self._sock.sendall(frame)
            size = struct.unpack(">i", self._read(4))[0]
            body = self._read(size)
        except OSError as e:
            self.close()
            raise WireError(f"{self.address}: {e or type(e).__name__}") from None
        with _CODEC_LOCK:
            response = response_class.decode(body, version=version, header=True)
        if response.header.correlation_id != correlation_id:
            self.close()
            raise WireError(f"{self.address}: correlation id {response.header.correlation_id}, "
                            f"expected {correlation_id}")
        return response

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        version = min(3, ApiVersionsRequest.max_version)
        response = self.request(ApiVersionsRequest(client_software_name="kipcheck",
                                                   client_software_version="1"), version)
        if response.error_code:
            raise WireError(f"{self.address}: ApiVersions answered {error_name(response.error_code)}")
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


def keep_primary_response_classes() -> None:
    """Work around kafka-python 3.0's response registry (see `response_class_of`) for the
    kafka-python clients in this process too (faults.election's KafkaAdminClient): register
    only primary response classes, which never die, never a short-lived `XResponse[v]`.
    `primary[v]` still answers every version. Idempotent."""
    registry = ResponseClassRegistry
    if getattr(registry, "_kipcheck_primary_only", False):
        return
    registry._kipcheck_original_register = registry.__dict__["register_response_class"]
    register = registry.register_response_class.__func__

    def register_primary(cls, response_class):
        if getattr(response_class, "_class_version", None) is None:
            register(cls, response_class)
    registry.register_response_class = classmethod(register_primary)
    registry._kipcheck_primary_only = True
    for key, response_class in list(registry._response_class_registry.items()):
        try:
            if response_class._class_version is not None:  # already a version class: its primary instead
                registry._response_class_registry[key] = weakref.proxy(response_class[None])
        except ReferenceError:  # already dead: nothing to recover it from but its module
            del registry._response_class_registry[key]


def response_class_of(request_class):
    """The primary response class of `request_class`, from the module that defines both.

    Not kafka-python's `RequestHeader.get_response_class()`: its registry holds a weak proxy
    to the *last versioned* response class created (`XResponse[v]` re-registers each new
    version class), and when two threads create the same version at once, one class is
    dropped from `XResponse._VERSIONS` while the registry may still point at it. The garbage
    collector frees it later (classes live in reference cycles), and every later lookup for
    that API raises `ReferenceError: weakly-referenced object no longer exists` — the
    prober and the observer decode the same responses concurrently, so a run could die of
    this tens of seconds in. The primary class is a module attribute and never goes away.
    """
    name = request_class.__name__.removesuffix("Request") + "Response"
    response_class = getattr(sys.modules[request_class.__module__], name, None)
    if response_class is None or response_class.API_KEY != request_class.API_KEY:
        raise TypeError(f"no response class beside {request_class.__name__}")
    return response_class


# --- cluster metadata, as one broker sees it --------------------------------------------

class PartitionState:
    __slots__ = ("topic", "partition", "error", "leader", "leader_epoch", "replicas", "isr", "offline")

    def __init__(self, topic, p):
        self.topic, self.partition = topic, p.partition_index
        self.error = error_name(p.error_code)
        self.leader, self.leader_epoch = p.leader_id, p.leader_epoch
        self.replicas, self.isr = list(p.replica_nodes), list(p.isr_nodes)
        self.offline = list(p.offline_replicas or [])


class MetadataView:
    """One broker's answer to Metadata: brokers with racks, and each topic's id and partitions."""

    def __init__(self, response):
        self.brokers = {b.node_id: (f"{b.host}:{b.port}", b.rack) for b in response.brokers}
        self.topic_ids = {t.name: t.topic_id for t in response.topics if not t.error_code}
        self.topic_errors = {t.name: error_name(t.error_code) for t in response.topics}
        self.partitions = {(t.name, p.partition_index): PartitionState(t.name, p)
                           for t in response.topics for p in t.partitions}

    @property
    def racks(self) -> dict[str, str | None]:
        return {str(b): rack for b, (_, rack) in sorted(self.brokers.items())}


def metadata(conn: BrokerConnection, topics: list[str] | None) -> MetadataView:
    """Ask `conn`'s broker for metadata of `topics` (None: every topic)."""
    from kafka.protocol.metadata.metadata import MetadataRequest
    version = conn.version_for(MetadataRequest, 1)
    wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False)
    return MetadataView(conn.request(request, version))


def describe_quorum(conn: BrokerConnection) -> dict | None:
    """The KRaft quorum as `conn`'s broker reports it (DescribeQuorum, forwarded to the active
    controller): {"leader", "epoch", "voters", "observers"} (ids sorted); None on an error answer."""
    from kafka.protocol.admin.cluster import DescribeQuorumRequest
    request = DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name="__cluster_metadata", partitions=[DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])])
    response = conn.request(request, conn.version_for(DescribeQuorumRequest))
    parts = [p for t in response.topics for p in t.partitions]
    if not parts or response.error_code or parts[0].error_code:
        return None
    p = parts[0]
    return {"leader": p.leader_id, "epoch": p.leader_epoch, "voters": sorted(v.replica_id for v in p.current_voters),
            "observers": sorted(o.replica_id for o in p.observers)}


def quorum_leader(conn: BrokerConnection) -> int:
    """The KRaft quorum's leader (the active controller) as `conn`'s broker knows it; -1: none."""
    quorum = describe_quorum(conn)
    return -1 if quorum is None else quorum["leader"]


keep_primary_response_classes()  # on import: before any prober, observer or fault runs
