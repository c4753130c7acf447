"""Disk faults: wipe a replica's log directory, tear or bit-flip a segment, wipe a controller's metadata log.

Each kills the node (kill -9, as a crash would), damages its disk, and leaves it down
for the fault's window; the heal restarts it. A wiped directory is reformatted with the
cluster's own id (KafkaNode.clean_node), so the node rejoins and re-replicates.
These faults first wait for a full ISR: destroying the only in-sync copy would be a loss
caused by the harness, not by Kafka.
"""
from __future__ import annotations

import random
import struct
from pathlib import PurePath

from kipcheck.effects import LOSES_STATE, OWN_NODE, STOPS_NODE, TRUNCATES
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.process import heal_processes, start_stopped
from kipcheck.faults.targets import partition_of, resolve_node, wait_full_isr


class _DiskFault:
    name = ""
    # killed (-9) for the window, its disk damaged, started again at the heal
    effects = frozenset({STOPS_NODE, LOSES_STATE, TRUNCATES, OWN_NODE})
    default_target = "follower"
    heal_all = staticmethod(heal_processes)

    def damage(self, ctx: FaultContext, node, spec: FaultSpec) -> dict:
        raise NotImplementedError

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        wait_full_isr(ctx)
        victim = resolve_node(ctx, spec, self.default_target)
        node = ctx.cluster.node(victim)
        node.stop_node(clean_shutdown=False)
        return {"targets": [victim], **self.damage(ctx, node, spec)}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        start_stopped(ctx, injected["targets"])


class Wipe(_DiskFault):
    """Delete the node's whole log directory (every partition replica on it) and reformat it."""

    name = "wipe"

    def damage(self, ctx, node, spec):
        node.clean_node(metadata=False)
        return {"wiped": [str(d) for d in node.data_dirs] if len(node.data_dirs) > 1 else str(node.data_dir)}


class WipeMetadata(_DiskFault):
    """Opt-in: also delete the node's metadata log (the KRaft quorum's copy on a controller)."""

    name = "wipe-metadata"

    def damage(self, ctx, node, spec):
        if not node.spec.is_controller:
            raise FaultError(f"node {node.spec.node_id} is not a controller")
        node.clean_node(metadata=True)
        return {"wiped": [str(node.data_dir), str(node.metadata_dir)]}


BATCH_HEADER = 12  # baseOffset (8) + length (4): a batch is 12 + length bytes
CRC_COVERED_FROM = 21  # the batch CRC-32C covers attributes (byte 21) to the batch's end


def partition_dir(node, topic: str, partition: int) -> PurePath:
    """The log directory holding the node's replica of the partition (JBOD: any of `data_dirs`)."""
    name = f"{topic}-{partition}"
    return next((d for d in node.data_dirs if node.files.is_dir(d / name)), node.data_dirs[0])


def recovery_point(files, log_dir: PurePath, topic: str, partition: int) -> int:
    """The partition's offset in the log directory's `recovery-point-offset-checkpoint` (0: none).

    After an unclean shutdown Kafka's log recovery re-reads (CRC, offsets, and rebuilds the
    indexes of) every segment from the one holding this offset on; data below it is trusted."""
    text = files.read_text(log_dir / "recovery-point-offset-checkpoint")
    for line in (text or "").splitlines()[2:]:
        t, p, offset = line.rsplit(" ", 2)
        if t == topic and int(p) == partition:
            return int(offset)
    return 0


def recovered_segments(node, topic: str, partition: int) -> tuple[list[PurePath], int]:
    """The partition's segments log recovery will re-read after a kill (oldest first), and the recovery point."""
    log_dir = partition_dir(node, topic, partition)
    replica = log_dir / f"{topic}-{partition}"
    segments = [replica / name for name in sorted(node.files.file_sizes(replica, ".log"))]
    if not segments:
        raise FaultError(f"node {node.spec.node_id} has no segment of {topic}-{partition}")
    point = recovery_point(node.files, log_dir, topic, partition)
    floor = max((i for i, s in enumerate(segments) if int(s.stem) <= point), default=0)
    return segments[floor:], point


def pick_segment(node, spec: FaultSpec, ctx: FaultContext) -> tuple[PurePath, str, int]:
    """The segment a `segment: active|closed` param names, among those recovery re-reads:
    the last one, or a closed one (falling back to the active when none is closed); and the role it had."""
    segments, point = recovered_segments(node, *partition_of(spec, ctx))
    if spec.params.get("segment", "active") == "closed" and len(segments) > 1:
        closed = segments[:-1]
        return closed[int(spec.params.get("index", 0)) % len(closed)], "closed", point
    return segments[-1], "active", point


def batch_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every complete record batch in a segment's bytes."""
    spans, pos = [], 0
    while pos + BATCH_HEADER <= len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        end = pos + BATCH_HEADER + length
        if length <= 0 or end > len(data):
            break
        spans.append((pos, end))
        pos = end
    return spans


class Truncate(_DiskFault):
    """Cut `bytes` (default 4096) off the end of a segment log recovery re-reads, as a torn write would.

    `segment`: `active` (the last) or `closed` (an older one still above the recovery point).
    On restart log recovery drops the torn batch (and every later segment) and the
    follower fetches the rest again."""

    name = "truncate"

    def damage(self, ctx, node, spec):
        segment, role, point = pick_segment(node, spec, ctx)
        size = node.files.file_sizes(segment.parent, segment.name)[segment.name]
        cut = min(size, int(spec.params.get("bytes", 4096)))
        node.files.truncate(segment, size - cut)
        return {"segment": segment.name, "segment_role": role, "recovery_point": point,
                "size_before": size, "size_after": size - cut}


class BitFlip(_DiskFault):
    """Flip `flips` random bits (Jepsen's bitflip) in a segment log recovery re-reads, or in its offset index.

    `file: log` flips bits only where a batch's CRC-32C covers them (attributes to the end of
    the batch): Kafka must find the batch invalid, truncate the log there and refetch from the
    leader, and never serve the flipped record. Bits outside the CRC (baseOffset,
    partitionLeaderEpoch) and below the recovery point are trusted by Kafka's design and
    left alone. `file: index` flips bits of the segment's offset index, which recovery
    rebuilds. Positions come from `seed`, so a schedule replays the same flips."""

    name = "bitflip"

    def damage(self, ctx, node, spec):
        segment, role, point = pick_segment(node, spec, ctx)
        rng = random.Random(int(spec.params.get("seed", 0)))
        flips = max(1, int(spec.params.get("flips", 8)))
        target = segment.with_suffix(".index") if spec.params.get("file", "log") == "index" else segment
        data = bytearray(node.files.read_bytes(target) or b"")
        if target is segment:
            spans = [(s + CRC_COVERED_FROM, e) for s, e in batch_spans(data) if e - s > CRC_COVERED_FROM]
        else:
            spans = [(0, len(data))] if data else []
        if not spans:
            raise FaultError(f"node {node.spec.node_id}: {target.name} has nothing to flip")
        positions = []
        for _ in range(flips):
            lo, hi = rng.choice(spans)
            pos = rng.randrange(lo, hi)
            data[pos] ^= 1 << rng.randrange(8)
            positions.append(pos)
        node.files.write_bytes(target, bytes(data))
        # not "file": the history merges this into the spec's params, whose `file` says log or index
        return {"damaged": target.name, "segment_role": role, "recovery_point": point, "positions": sorted(positions)}


DISK_KINDS = (Wipe(), Truncate(), BitFlip(), WipeMetadata())
