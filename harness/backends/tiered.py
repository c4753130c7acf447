"""Tiered storage (KIP-405) for a test cluster, so KIP-1023's tiered offsets exist.

Remote storage is Kafka's own `LocalTieredStorage` (from the kafka-storage test jar that
harness.backends.kafka_dist puts on the classpath): a directory every broker shares, which is
enough because all nodes of a native cluster share one filesystem. Segments roll every
couple of seconds and local retention is short, so a partition soon has offsets that
live only in remote storage (log start < local log start <= last tiered offset + 1).
"""
from __future__ import annotations

from pathlib import Path

from harness.backends import releases
from harness.errors import HarnessError

LOCAL_TIERED_STORAGE = "org.apache.kafka.server.log.remote.storage.LocalTieredStorage"
#: KIP-1023: an empty follower starts replicating after the last tiered offset (Kafka >= 4.3)
FOLLOWER_FROM_TIERED = "follower.fetch.last.tiered.offset.enable"


def broker_config(storage_dir: Path, kafka_version: str) -> dict[str, str]:
    """server.properties entries that turn on remote storage with quick upload and cleanup."""
    if not releases.has(kafka_version, "tiered-storage"):
        raise HarnessError(f"Kafka {kafka_version} has no tiered storage (KIP-405 ships from 3.6): drop --tiered")
    config = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": LOCAL_TIERED_STORAGE,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(storage_dir),
        "rsm.config.delete.on.close": "false",
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "remote.log.metadata.manager.listener.name": "INTERNAL",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        # upload rolled segments and apply local retention within about a second
        "remote.log.manager.task.interval.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.segment.delete.delay.ms": "1000",
    }
    if releases.has(kafka_version, "kip-1023"):
        config[FOLLOWER_FROM_TIERED] = "true"
    return config


def topic_config(segment_ms: int = 2000, local_retention_ms: int = 1000) -> dict[str, str]:
    """Topic configs for a tiered topic: short segments, short local retention, all data kept remotely."""
    return {
        "remote.storage.enable": "true",
        "segment.ms": str(segment_ms),
        "local.retention.ms": str(local_retention_ms),
        "retention.ms": "-1",
    }

