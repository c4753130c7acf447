"""Controller quorum changes (KIP-853): a voter removed from the quorum for the window, added back at the heal.

Needs a cluster formatted with a dynamic quorum (`ClusterOptions(dynamic_quorum=True)`, Kafka
3.9+), which `kipcheck run` starts when the schedule holds `voter-removal`. The removed
controller keeps running as an observer; the heal adds it back (AddRaftVoter) once it has
caught up, which the leader checks, so the heal asks again until the voters are whole.
A quorum of three loses its spare for the window: one more controller lost stops it.
"""
from __future__ import annotations

import time

from kipcheck.effects import CHANGES_MEMBERSHIP
from kipcheck.errors import KipcheckError
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError

#: how long a heal (and heal-all) asks for a removed voter to be added back
RESTORE_TIMEOUT_S = 90.0


def _controllers(ctx: FaultContext) -> list[int]:
    return sorted(n.spec.node_id for n in ctx.cluster.nodes if n.spec.is_controller)


def _voters(ctx: FaultContext) -> dict[int, str]:
    voters = ctx.cluster.controller_voters()
    if voters is None:
        raise FaultError("voter changes need a cluster formatted with a dynamic quorum (KIP-853, Kafka 3.9+)")
    return voters


def restore_voters(ctx: FaultContext, timeout: float = RESTORE_TIMEOUT_S) -> list[int]:
    """Add back every controller that is not a voter (a heal, and heal-all); the ids added.
    Nothing to do on a cluster without a dynamic quorum."""
    if ctx.cluster.controller_voters() is None:
        return []
    deadline, added, last = time.monotonic() + timeout, [], "no answer"
    while True:
        missing = [c for c in _controllers(ctx) if c not in _voters(ctx)]
        if not missing:
            return added
        for c in missing:
            try:  # refused while the observer has not caught up with the leader: asked again
                ctx.cluster.add_voter(c)
                added.append(c)
            except KipcheckError as e:
                last = str(e)
        if time.monotonic() > deadline:
            raise FaultError(f"controllers {missing} not voters again within {timeout:.0f} s ({last})")
        time.sleep(1.0)


class VoterRemoval:
    """RemoveRaftVoter of one controller (`target` "controller" with an `index` into the controllers by
    id, or a node id), AddRaftVoter at the heal."""

    name = "voter-removal"
    effects = frozenset({CHANGES_MEMBERSHIP})
    cluster_options = {"dynamic_quorum": True}
    heal_all = staticmethod(restore_voters)

    def inject(self, ctx: FaultContext, spec: FaultSpec) -> dict:
        before = _voters(ctx)
        if len(before) < 3:
            raise FaultError(f"the quorum has {len(before)} voters: removing one would leave no spare")
        target = spec.params.get("target", "controller")
        ids = sorted(before)
        victim = int(target) if str(target).isdigit() else ids[int(spec.params.get("index", 0)) % len(ids)]
        if victim not in before:
            raise FaultError(f"node {victim} is not a voter (voters: {ids})")
        ctx.cluster.remove_voter(victim)
        return {"targets": [victim], "voters_before": ids, "voters_after": sorted(_voters(ctx))}

    def heal(self, ctx: FaultContext, spec: FaultSpec, injected: dict) -> None:
        restore_voters(ctx)


QUORUM_KINDS = (VoterRemoval(),)
