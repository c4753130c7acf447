"""KIP-932's share-group messages for the raw prober: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge.

kafka-python has no classes for them; these are built by its own schema loader from the
JSON schemas in `share_schemas` (written after Kafka 4.3.1's), so they encode and decode
like every other message `wire.BrokerConnection.request` sends.
"""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

SCHEMAS = "kipcheck.harness.clients.share_schemas"

#: AcknowledgeTypes (KIP-932 "ShareFetch API"; ShareFetchRequest.json): 0 is a gap in the log
ACKNOWLEDGE_TYPES = {"GAP": 0, "ACCEPT": 1, "RELEASE": 2, "REJECT": 3}


class ShareGroupHeartbeatRequest(ApiMessage, load_json=SCHEMAS): pass


class ShareGroupHeartbeatResponse(ApiMessage, load_json=SCHEMAS): pass


class ShareFetchRequest(ApiMessage, load_json=SCHEMAS): pass


class ShareFetchResponse(ApiMessage, load_json=SCHEMAS): pass


class ShareAcknowledgeRequest(ApiMessage, load_json=SCHEMAS): pass


class ShareAcknowledgeResponse(ApiMessage, load_json=SCHEMAS): pass


__all__ = ["ShareGroupHeartbeatRequest", "ShareGroupHeartbeatResponse", "ShareFetchRequest", "ShareFetchResponse",
           "ShareAcknowledgeRequest", "ShareAcknowledgeResponse", "ACKNOWLEDGE_TYPES"]
