"""A failed log directory (JBOD): one of a broker's two `log.dirs` becomes unusable under the running broker.

The nodes run as root, and root ignores permissions (CAP_DAC_OVERRIDE), so `chmod 000` would
fail nothing. Instead the directory is moved aside and a plain file takes its name: every
file Kafka then creates or renames in it fails (ENOTDIR), as on a dead disk's mount point.
Kafka notices at its next such operation (the replication-offset checkpoint, every 5 s, or a
segment roll), marks the directory offline (KIP-858: it tells the controller in its
heartbeat) and keeps serving from its other directory; the controller must move leadership
of the failed directory's partitions to in-sync replicas elsewhere, and no acknowledged
write may be lost. The heal stops the broker, puts the directory back and starts it.
"""
from __future__ import annotations

from pathlib import PurePath

from kipcheck.effects import LOSES_STATE, TRUNCATES
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.process import start, wait_healthy
from kipcheck.faults.targets import partition_of, resolve_node, wait_full_isr

ASIDE = ".failed"  # the moved-aside directory: <dir>.failed


def _aside(d: PurePath) -> PurePath:
    return d.with_name(d.name + ASIDE)


def _restore(node) -> bool:
    """Stop the node if one of its log directories is failed and put every one back; whether any was.
    Through the node's file verbs, so a remote host's (ssh backend) directory is restored there."""
    files = node.files
    failed = [d for d in node.data_dirs if files.is_dir(_aside(d))]
    if not failed:
        return False
    if node.alive():
        node.stop_node(clean_shutdown=True, timeout=10)  # a broker with a failed directory may not finish one
    for d in failed:
        if not files.is_dir(d):
            files.remove(d)  # the plain file standing in its place
        files.rename(_aside(d), d)
    return True


def heal_log_dirs(ctx: FaultContext) -> None:
    """Restore and restart every node with a failed log directory, then wait for a healthy cluster
    (unless another node is still down: the process healer, which runs next, starts it and waits)."""
    changed = False
    for node in ctx.cluster.nodes:
        if _restore(node):
            start(node)
            changed = True
    if changed and all(n.alive() for n in ctx.cluster.nodes):
        wait_healthy(ctx)


class LogDirFailure:
    """Fail the log directory that holds the spec's partition on the target node (default: its leader)."""

    name = "log-dir-failure"
    # the broker stops serving the directory's replicas; they come back from disk at the heal
    effects = frozenset({LOSES_STATE, TRUNCATES})
    cluster_options = {"log_dirs": 2}
    heal_all = staticmethod(heal_log_dirs)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        wait_full_isr(ctx)  # the failed directory's replicas must have in-sync copies elsewhere
        victim = resolve_node(ctx, spec, "leader")
        node = ctx.cluster.node(victim)
        if len(node.data_dirs) < 2:
            raise FaultError(f"node {victim} has one log directory: log-dir-failure needs a cluster "
                             "with two (ClusterOptions(log_dirs=2))")
        topic, partition = partition_of(spec, ctx)
        files = node.files
        failed = next((d for d in node.data_dirs if files.is_dir(d / f"{topic}-{partition}")), None)
        if failed is None:
            raise FaultError(f"node {victim} holds no replica of {topic}-{partition}")
        files.rename(failed, _aside(failed))
        files.write_text(failed, "kipcheck: this log directory failed (faults/logdir.py); the heal restores it\n")
        return {"targets": [victim], "failed_dir": str(failed),
                "partitions_in_dir": files.list_dir(_aside(failed), dirs_only=True)}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        for t in injected["targets"]:
            node = ctx.cluster.node(t)
            _restore(node)
            if not node.alive():
                start(node)


LOGDIR_KINDS = (LogDirFailure(),)
