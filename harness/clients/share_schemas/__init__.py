"""KIP-932's share-group messages as JSON schemas, for kafka-python's schema loader.

kafka-python 3.0.12 builds every message class from a JSON schema (its `load_json`), but ships
none for ShareGroupHeartbeat (76), ShareFetch (78) or ShareAcknowledge (79). These are
written after the schemas in Kafka 4.3.1's clients jar (common/message/*.json), with only the
versions that release speaks (ShareGroupHeartbeat v1, ShareFetch and ShareAcknowledge v1-2;
v0 was 4.0's early access, gone since 4.1). harness.clients.share_wire loads them.
"""
