"""Rolling upgrade (and downgrade) under fire: `kipcheck run --upgrade-from A --upgrade-to B`.

The cluster starts on A; beside the workload, the prober, the observer and the nemesis, an
`Upgrader` thread rolls the nodes to B one at a time — controlled shutdown (SIGTERM), the
node's distribution swapped for B's, started again, then waits until every broker is
registered and the workload topic has a full ISR — and at the end finalizes B's
metadata.version. Each step is its own `upgrade` records in the history (process
"upgrade", docs/history.md), so the checker and the report see when the cluster was mixed.

Every node carries its own distribution (`KafkaNode.dist`), so a fault that restarts a node
(kill's heal, heal-all at the end) restarts it on the version it has: nothing is downgraded
behind the upgrade's back. `KafkaNode.lock` keeps a fault's stop or start from interleaving
with a step's stop-swap-start.

What Kafka supports (docs/releases.md, "Rolling upgrades"):
- upgrade: roll every node to B at A's metadata.version, then raise metadata.version to the
  newest B supports (`Admin.updateFeatures`, what `kafka-features.sh upgrade --metadata`
  sends; QuorumController -> FeatureControlManager.updateFeatures). Once raised, A cannot
  read the metadata log: there is no way back.
- downgrade: only the software, only while the finalized metadata.version is one the older
  release supports. kipcheck formats the cluster on A at B's release (`StorageTool format
  --release-version`, the state of a cluster whose upgrade to A was never finalized) and
  rolls to B without finalizing. A metadata.version downgrade itself is refused by Kafka
  whenever a level in between changed the metadata format (4.3.1's
  FeatureControlManager.updateMetadataVersion: MetadataVersion.checkIfMetadataChanged ->
  "Refusing to perform the requested downgrade because it might delete metadata
  information", or with UNSAFE_DOWNGRADE "Unsafe metadata downgrade is not supported in
  this version"; KIP-1155 is not adopted), so kipcheck
  never asks for one.
"""
from __future__ import annotations

import threading
import time

from kipcheck.harness.backends import releases
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.runlog import internal_error, one_line

PROCESS = "upgrade"  # the history's process for every upgrade record
F = "upgrade"
FEATURE = "metadata.version"
FINALIZE_TIMEOUT = 60.0  # the controller refuses the bump until every broker registered B's range


def direction(old: str, new: str) -> str:
    """"upgrade" or "downgrade" between two release versions; a one-line error for what
    cannot be rolled (the same version, a pre-KRaft release)."""
    a, b = releases.parse(old), releases.parse(new)
    if a is None or b is None:
        raise HarnessError(f"--upgrade-from and --upgrade-to take Kafka versions X.Y.Z, got {old!r} and {new!r}")
    for v in (old, new):
        if not releases.is_kraft(v):
            raise HarnessError(f"Kafka {v} predates production KRaft: rolling upgrades run between "
                               f"{'.'.join(map(str, releases.FIRST_KRAFT))}.0 and newer releases")
    if a == b:
        raise HarnessError(f"--upgrade-from and --upgrade-to are both {old}: nothing to roll")
    return "upgrade" if a < b else "downgrade"


def older(old: str, new: str) -> str:
    """The older of the two releases (what both ends of a mixed cluster have)."""
    return min(old, new, key=releases.parse)


def format_release(old: str, new: str) -> str | None:
    """The release whose metadata.version the cluster is formatted at: a downgrade keeps
    B's ("3.9"), so B's binaries can read the metadata log; an upgrade starts at A's newest (None)."""
    if direction(old, new) == "downgrade":
        return "{}.{}".format(*releases.parse(new)[:2])
    return None


class Upgrader(threading.Thread):
    """Rolls every node of `cluster` to `target` (a KafkaDistribution), recording each step.

    Starts `start_after` seconds in, leaves `gap` seconds between steps, and stops between
    steps when `abort` is set (a run that fails, is interrupted or overran; heal-all then
    restarts whatever is down on the version it has). The end of the workload's duration
    does not stop it: the run waits for the last step (harness.session.UPGRADE_OVERRUN)."""

    def __init__(self, ctx, target, history, start_after: float = 5.0,
                 gap: float = 2.0, finalize: bool = True, step_timeout: float = 180.0):
        super().__init__(name="upgrade", daemon=True)
        self.ctx, self.target, self.history = ctx, target, history
        self.abort = self.stop_event = threading.Event()
        self.start_after, self.gap, self.finalize, self.step_timeout = start_after, gap, finalize, step_timeout
        self.error: BaseException | None = None
        self.steps: list[dict] = []  # config.json's upgrade.steps
        self.placed: dict = {}  # node id -> the target distribution on its machine (Cluster.distribution_for)
        self.finalized: dict | None = None
        self.done = threading.Event()

    def order(self) -> list[int]:
        """Dedicated controllers first (no broker ever runs a newer release than the quorum
        that feeds it metadata), then the brokers, each by node id."""
        nodes = self.ctx.cluster.nodes
        return ([n.spec.node_id for n in nodes if not n.spec.is_broker]
                + [n.spec.node_id for n in nodes if n.spec.is_broker])

    @property
    def completed(self) -> bool:
        versions = self.ctx.cluster.versions()
        rolled = all(v == self.target.version for v in versions.values())
        return rolled and (self.finalized is not None or not self.finalize)

    def run(self):
        try:
            if self.stop_event.wait(self.start_after):
                return
            order = self.order()
            # the target as each node will run it (on a remote host: its classpath copied there first),
            # before the first step, so no copy lengthens a step's mixed window
            self.placed = {n: self.ctx.cluster.distribution_for(self.ctx.cluster.node(n), self.target) for n in order}
            for k, node_id in enumerate(order, start=1):
                if k > 1 and self.stop_event.wait(self.gap):
                    return
                if not self.roll(node_id, k, len(order)):
                    return
            if self.finalize and not self.stop_event.is_set():
                self.bump_metadata_version()
        except BaseException as e:  # ours: the history keeps the steps; the run reports it
            self.error = e
        finally:
            self.done.set()

    def roll(self, node_id: int, k: int, of: int) -> bool:
        """One step: stop the node cleanly, swap its distribution, start it, wait healthy.
        False (recorded as `info`) when it failed: the upgrade stops there."""
        from kipcheck.faults.process import START_TIMEOUT, wait_healthy
        node = self.ctx.cluster.node(node_id)
        begin = time.monotonic()
        whole = self._wait_whole()
        if not whole and self.stop_event.is_set():  # the run is ending: leave the node as it is
            return False
        # seconds into the step when the node was down, listening again (then: healthy); the
        # wait for a whole cluster comes first, before the step's invoke (the mixed window's start)
        phases = {"waited": round(time.monotonic() - begin, 1), **({} if whole else {"unhealthy": True})}
        begin = time.monotonic()
        op = self.history.invoke(PROCESS, F, {"step": "roll", "node": node_id, "from": node.dist.version,
                                              "to": self.target.version, "order": k, "of": of, **phases})
        try:
            with node.lock:
                node.stop_node(clean_shutdown=True, timeout=30)
                phases["stopped"] = round(time.monotonic() - begin, 1)
                node.dist = self.placed[node_id]
                node.start_node()
            node.wait_listening(START_TIMEOUT)
            phases["listening"] = round(time.monotonic() - begin, 1)
            wait_healthy(self.ctx, self.step_timeout)
        except Exception as e:
            why = one_line(e) if isinstance(e, HarnessError) else internal_error("upgrade", f"rolling node {node_id}", e)
            op.info(error=why, versions=_versions(self.ctx.cluster))
            self.steps.append({"step": "roll", "node": node_id, "error": why})
            return False
        seconds = round(time.monotonic() - begin, 1)
        op.ok(versions=_versions(self.ctx.cluster), seconds=seconds, phases=phases)
        self.steps.append({"step": "roll", "node": node_id, "to": self.target.version, "seconds": seconds,
                           "phases": phases})
        return True

    def _wait_whole(self) -> bool:
        """Before a step, wait (up to `step_timeout`) until every node runs, every broker is
        registered and the workload topic has a full ISR, as an operator's rolling procedure
        does (no node is taken down while another is down or behind). A fault that starts
        during the step still hits the mixed cluster: that is the "under fire" part. Without
        this wait a kill during a step left two of three nodes down for longer than the
        producers' delivery timeout (30 s), and librdkafka's epoch bump after it wrote sends
        twice (`duplicate`, librdkafka #4953; docs/releases.md). True when whole."""
        from kipcheck.faults.process import wait_healthy
        deadline = time.monotonic() + self.step_timeout
        while not all(n.alive() for n in self.ctx.cluster.nodes) and time.monotonic() < deadline:
            if self.stop_event.wait(0.5):
                return False
        try:
            wait_healthy(self.ctx, max(1.0, deadline - time.monotonic()))
        except HarnessError:
            return False
        return all(n.alive() for n in self.ctx.cluster.nodes)

    def bump_metadata_version(self) -> None:
        """Raise metadata.version to the newest level the cluster's brokers all support."""
        before = describe_metadata_version(self.ctx.cluster.bootstrap_servers())
        op = self.history.invoke(PROCESS, F, {"step": "finalize", "feature": FEATURE,
                                              "from_level": before["finalized"], "to_level": before["supported_max"]})
        try:
            after = finalize(self.ctx.cluster.bootstrap_servers(), before["supported_max"], self.stop_event)
        except HarnessError as e:
            op.info(error=str(e))
            self.steps.append({"step": "finalize", "error": str(e)})
            return
        op.ok(finalized=after["finalized"], features=after.get("features", {}))
        self.finalized = {"feature": FEATURE, "from_level": before["finalized"], "to_level": after["finalized"]}
        self.steps.append({"step": "finalize", **self.finalized})


def _versions(cluster) -> dict[str, str]:
    return {str(k): v for k, v in sorted(cluster.versions().items())}


def _admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient
    return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), client_id="kipcheck-upgrade",
                            request_timeout_ms=15000)


def describe_metadata_version(bootstrap: str) -> dict:
    """{"finalized": level, "supported_max": level} of metadata.version, from DescribeFeatures
    (ApiVersions' FinalizedFeatures / SupportedFeatures, KIP-584) of the broker that answers."""
    admin = _admin(bootstrap)
    try:
        d = admin.describe_features()
    finally:
        admin.close()
    # kafka-python 3.x: {feature: {"supported": (min, max), "finalized": (min, max), ...}}
    finalized = d.get(FEATURE, {}).get("finalized")
    supported = d.get(FEATURE, {}).get("supported")
    if finalized is None or supported is None:
        raise HarnessError(f"the cluster reports no {FEATURE} (describe_features: {d})")
    return {"finalized": finalized[1], "supported_max": supported[1],
            "features": {name: v["finalized"][1] for name, v in sorted(d.items()) if v.get("finalized")}}


def finalize(bootstrap: str, level: int, stop: threading.Event | None = None) -> dict:
    """UpdateFeatures metadata.version -> `level` (an upgrade), retried while the controller
    refuses it (a broker still registered with A's range); the finalized level after."""
    deadline, last = time.monotonic() + FINALIZE_TIMEOUT, ""
    while time.monotonic() < deadline:
        admin = _admin(bootstrap)
        try:
            result = admin.update_features({FEATURE: level})
        except Exception as e:  # a timeout or a lost connection: ask again
            result = {FEATURE: one_line(e)}
        finally:
            admin.close()
        now = describe_metadata_version(bootstrap)
        if now["finalized"] == level:
            return now
        last = str(result.get(FEATURE))
        if stop is not None and stop.wait(2.0):
            break
        elif stop is None:
            time.sleep(2.0)
    raise HarnessError(f"{FEATURE} was not raised to level {level}: {last[:200]}")
