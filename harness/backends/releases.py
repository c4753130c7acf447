"""What each Kafka KRaft release has, from its version: the one place the harness asks.

`FEATURES` maps a feature to the first release line that shipped it. Each entry was read
in that release's own artifacts from Maven Central (the generated message classes'
`HIGHEST_SUPPORTED_VERSION` in kafka-clients, `javap -constants`) or its source, as the
comment says; docs/releases.md has the table and what a run on each line measured.
Node configuration (harness.backends.node, harness.backends.kafka_dist), tiered setup (harness.backends.tiered),
the run (harness.run: config.json `features`, which observations are made) and the
pytest matrix (harness.pytest_plugin `--kafka-matrix all-kraft`) all read it. The
prober also asks each broker's ApiVersions (harness.clients.wire.BrokerConnection), so a
broker that lacks a request version is never sent it, whatever this table says.
"""
from __future__ import annotations

import re

#: KRaft became production-ready in 3.3 (KIP-833); nothing older is supported here.
FIRST_KRAFT = (3, 3)

#: The release `kipcheck run`, `cluster up`, `selftest` and the test suite start when no
#: `--kafka-version` is given: the newest release whose profile has been read
#: (reference_model.profiles) and which the suite has passed on. Pinned, so the same command
#: gives the same answer on any day; taking a newer release is a deliberate change of this line
#: (docs/releases.md, "Taking a new release"). `--kafka-version latest` asks Maven Central.
DEFAULT_VERSION = "4.3.1"

#: The newest patch of each minor line on Maven Central (maven-metadata.xml of
#: org.apache.kafka:kafka_2.13, read 2026-11-23; 4.4.0 the newest 4.4 patch on
#: 2026-11-24). 4.4.0 publishes its binary jars (kafka-tools-api too, by now) but no source
#: jars; its profile was read in the bytecode (`kipcheck profile read 4.4.0`). (4.2.2 and 4.4.0
#: publish no test jars; --tiered needs none: harness.backends.tiered brings its own storage.)
NEWEST_PATCH = {
    "3.3": "3.3.2", "3.4": "3.4.1", "3.5": "3.5.2", "3.6": "3.6.2", "3.7": "3.7.2", "3.8": "3.8.1",
    "3.9": "3.9.2", "4.0": "4.0.2", "4.1": "4.1.2", "4.2": "4.2.2", "4.3": "4.3.1",
    "4.4": "4.4.0",
}

#: feature -> (first release line, why). Versions of requests are kafka-clients'
#: `ListOffsetsRequestData` / `FetchRequestData.HIGHEST_SUPPORTED_VERSION` per release.
FEATURES: dict[str, tuple[tuple[int, int], str]] = {
    # ListOffsets v7 (3.3.2: highest 7): timestamp -3, max timestamp (KIP-734)
    "list-offsets-max-timestamp": ((3, 0), "ListOffsets v7, timestamp -3 (KIP-734)"),
    # ListOffsets v8 (3.4.1: highest 7; 3.5.2: 8): timestamp -4, earliest local offset (KIP-405)
    "list-offsets-earliest-local": ((3, 5), "ListOffsets v8, timestamp -4 (KIP-405)"),
    # KIP-405 early access in 3.6 (release notes): remote.log.storage.system.enable and the
    # RemoteLogManager that calls a RemoteStorageManager; kipcheck's own (harness.backends.tiered)
    # implements the interface every release from 3.6 has (tests/test_releases.py)
    "tiered-storage": ((3, 6), "remote log storage (KIP-405)"),
    # ListOffsets v9 (3.8.1: highest 8; 3.9.2: 9): timestamp -5, latest tiered offset (KIP-1005)
    "list-offsets-latest-tiered": ((3, 9), "ListOffsets v9, timestamp -5 (KIP-1005)"),
    # KIP-848's consumer group protocol, GA in 4.0 (its release notes; ConsumerGroupHeartbeat)
    "consumer-group-protocol": ((4, 0), "the consumer group protocol (KIP-848, GA in 4.0)"),
    # Fetch v18 with the replica's HighWatermark (4.0.2: highest 17; 4.1.2: 18), and
    # org.apache.kafka.raft.KafkaRaftClient.isHighWatermarkUpdated (absent in 4.0.2's kafka-raft
    # jar, present in 4.1.2's); a live 4.1.2 broker answers Fetch v18
    "kip-1166": ((4, 1), "Fetch v18 carries the fetcher's HWM; KRaft stops parking fetches behind it"),
    # ListOffsets v11, timestamp -6 earliest pending upload (4.1.2: highest 10; 4.2.0: 11)
    "list-offsets-pending-upload": ((4, 2), "ListOffsets v11, timestamp -6 (KIP-1023's request side)"),
    # KIP-1023 itself: an empty follower starts at the last tiered offset, with
    # follower.fetch.last.tiered.offset.enable; kafka.server.AbstractFetcherThread has no
    # shouldFetchFromLastTieredOffset in 4.2.1 and has it in 4.3.1 (reference_model.profiles)
    "kip-1023": ((4, 3), "followers start at the last tiered offset (follower.fetch.last.tiered.offset.enable)"),
    # KIP-966's feature flag eligible.leader.replicas.version (`--elr on|off` sets it at format):
    # org.apache.kafka.server.common.EligibleLeaderReplicasVersion is in 4.0.2's kafka-server-common
    # jar, not in 3.9.2's
    "eligible-leader-replicas": ((4, 0), "eligible leader replicas (KIP-966), eligible.leader.replicas.version"),
    # KIP-853 dynamic controller quorums: StorageTool --initial-controllers / --no-initial-controllers,
    # controller.quorum.bootstrap.servers and Admin.addRaftVoter/removeRaftVoter ship in 3.9 (4.3.1's
    # StorageTool and kafka-clients have them: tests/integration/test_quorum.py)
    "dynamic-quorum": ((3, 9), "dynamic controller quorum (KIP-853): voters added and removed at run time"),
    # KIP-932 share groups, GA in 4.2: org.apache.kafka.server.common.ShareVersion's LATEST_PRODUCTION
    # is SV_1 (bootstrapped at IBP_4_2_IV0) in 4.3.1's kafka-server-common, so a cluster formatted at
    # the release's newest metadata.version has share.version 1 (4.0 had them early access behind
    # group.share.enable, 4.1 as a preview behind share.version, not production)
    "share-groups": ((4, 2), "share groups (KIP-932, GA in 4.2: share.version 1 by default)"),
    # kipcheck's own choice, not a Kafka feature: Kafka's poms declare slf4j-api 1.7.36 up to
    # 4.0 (and a log4j 1 binding, slf4j-log4j12 / reload4j, which kipcheck leaves out); kipcheck
    # binds SLF4J to log4j2 for every release, with the SLF4J 2 binding from 3.7 (as before
    # this table; brokers of 3.7 .. 4.3 log with it), the SLF4J 1.7 binding before.
    "slf4j2": ((3, 7), "kipcheck binds SLF4J 2 to log4j2 (log4j-slf4j2-impl)"),
}

#: features a user of the checker cares about (KIP behaviour), reported in config.json
REPORTED = ("tiered-storage", "list-offsets-latest-tiered", "list-offsets-pending-upload", "kip-1166", "kip-1023",
            "consumer-group-protocol", "share-groups")
NOT_IN_RELEASE = "not in this release"


def parse(version: str | None) -> tuple[int, int, int] | None:
    """"3.9.2" -> (3, 9, 2); None for an unknown version (an external cluster)."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def has(version: str | None, feature: str) -> bool:
    """Whether `version` has `feature`; an unknown version is taken to have everything."""
    v = parse(version)
    return v is None or v[:2] >= FEATURES[feature][0]


def features(version: str | None) -> dict[str, bool]:
    """feature -> present in `version`, for every feature in the table."""
    return {name: has(version, name) for name in FEATURES}


def report(version: str | None) -> dict[str, str]:
    """config.json's `features`: each KIP-level feature "present" or "not in this release"."""
    return {name: "present" if has(version, name) else NOT_IN_RELEASE for name in REPORTED}


def is_kraft(version: str) -> bool:
    v = parse(version)
    return v is not None and v[:2] >= FIRST_KRAFT


def all_kraft() -> list[str]:
    """The newest patch of every KRaft minor line, oldest first."""
    return sorted(NEWEST_PATCH.values(), key=parse)


def slf4j_binding(version: str) -> tuple[str, str]:
    """(log4j2 SLF4J binding artifact, slf4j-api version) for this release's SLF4J generation.

    Every release logs through SLF4J; kipcheck binds it to log4j2 (one config format for
    all). A direct slf4j-api pin stops Maven's nearest-wins from picking a 1.7 api from a
    transitive dependency (the binding would be silently ignored: no broker logs)."""
    return ("log4j-slf4j2-impl", "2.0.17") if has(version, "slf4j2") else ("log4j-slf4j-impl", "1.7.36")
