"""Tiered storage (KIP-405) for a test cluster, so KIP-1023's tiered offsets exist.

Remote storage is kipcheck's own `kipcheck.rsm.FileRemoteStorageManager`
(harness/backends/remote_storage/, Java): a directory every broker shares holds each uploaded
segment and its indexes, which is enough because all nodes of a native cluster share one
filesystem (a container cluster bind-mounts it into every node). `storage_manager_jar()` builds
it with Maven into the kipcheck cache once per source change; `with_storage_manager(dist)` puts it
on the broker classpath. One jar serves every release from 3.6 on: the RemoteStorageManager
interface it implements is the same in all of them. Segments roll every couple of seconds and
local retention is short, so a partition soon has offsets that live only in remote storage
(log start < local log start <= last tiered offset + 1).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from kipcheck.harness.backends import maven_build, releases
from kipcheck.harness.errors import HarnessError

SOURCES = Path(__file__).resolve().parent / "remote_storage"
STORAGE_MANAGER = "kipcheck.rsm.FileRemoteStorageManager"
#: KIP-1023: an empty follower starts replicating after the last tiered offset (Kafka >= 4.3)
FOLLOWER_FROM_TIERED = "follower.fetch.last.tiered.offset.enable"


def storage_manager_jar() -> Path:
    """The remote storage manager's jar for the current sources: from the cache, or built by Maven once."""
    return maven_build.cached_jar(SOURCES, "remote-storage", "kipcheck's remote storage manager")


def with_storage_manager(dist):
    """`dist` (a KafkaDistribution) with the remote storage manager's jar on its classpath."""
    jar = storage_manager_jar()
    if jar in dist.classpath:
        return dist
    return dataclasses.replace(dist, classpath=(*dist.classpath, jar))


def broker_config(storage_dir: Path, kafka_version: str) -> dict[str, str]:
    """server.properties entries that turn on remote storage with quick upload and cleanup."""
    if not releases.has(kafka_version, "tiered-storage"):
        raise HarnessError(f"Kafka {kafka_version} has no tiered storage (KIP-405 ships from 3.6): drop --tiered")
    config = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": STORAGE_MANAGER,
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(storage_dir),
        "remote.log.metadata.manager.impl.prefix": "rlmm.config.",
        "remote.log.metadata.manager.listener.name": "INTERNAL",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "3",
        # upload rolled segments and apply local retention within about a second
        "remote.log.manager.task.interval.ms": "1000",
        "log.retention.check.interval.ms": "1000",
        "log.segment.delete.delay.ms": "1000",
    }
    if releases.parse(kafka_version)[:2] >= (3, 8):
        # the first local-retention pass 1 s after start, not 30 s (an internal config from 3.8,
        # KAFKA-16552): without it a 20 s run never sees a local log start above 0 (ListOffsets -4)
        config["log.initial.task.delay.ms"] = "1000"
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


if __name__ == "__main__":  # `python -m harness.backends.tiered`: build (or find) the jar (used by install.sh)
    maven_build.print_jar("remote storage manager", storage_manager_jar)
