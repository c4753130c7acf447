"""Disk faults: wipe a replica's log directory, truncate a segment's tail, wipe a controller's metadata log.

Each kills the node (kill -9, as a crash would), damages its disk, and leaves it down
for the fault's window; the heal restarts it. A wiped directory is reformatted with the
cluster's own id (KafkaNode.clean_node), so the node rejoins and re-replicates.
These faults first wait for a full ISR: destroying the only in-sync copy would be a loss
caused by the harness, not by Kafka.
"""
from __future__ import annotations

from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.process import heal_processes, start_stopped
from kipcheck.faults.targets import partition_of, resolve_node, wait_full_isr


class _DiskFault:
    name = ""
    needs_proxies = False
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
        return {"wiped": str(node.data_dir)}


class WipeMetadata(_DiskFault):
    """Opt-in: also delete the node's metadata log (the KRaft quorum's copy on a controller)."""

    name = "wipe-metadata"

    def damage(self, ctx, node, spec):
        if not node.spec.is_controller:
            raise FaultError(f"node {node.spec.node_id} is not a controller")
        node.clean_node(metadata=True)
        return {"wiped": [str(node.data_dir), str(node.metadata_dir)]}


class Truncate(_DiskFault):
    """Cut `bytes` (default 4096) off the end of the partition's last log segment, as a torn write would.

    On restart the node's log recovery drops the torn batch and the follower fetches it again."""

    name = "truncate"

    def damage(self, ctx, node, spec):
        topic, partition = partition_of(spec, ctx)
        return node.truncate_segment(topic, partition, int(spec.params.get("bytes", 4096)))


DISK_KINDS = (Wipe(), Truncate(), WipeMetadata())
