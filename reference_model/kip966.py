"""KIP-966 (Eligible Leader Replicas) and the KRaft election rule it extends: who may lead a partition.

Pure rules, one per function; the checker (checks/rules/election_rules.py) replays the
controller's own metadata log (harness/metadata_log.py: every PartitionRecord and
PartitionChangeRecord, in commit order) through `PartitionState` and asks `may_lead` of
every leader change.

What Kafka does, read in its source (metadata `PartitionChangeBuilder.electLeader`,
`isValidNewLeader`, `tryElection`): a clean election picks a replica of the target ISR, or,
when the ISR is empty, one of the ELR (the ELR member then becomes the whole ISR); an
unclean election (`unclean.leader.election.enable`, an `elect-unclean` request, or the
"last known leader" recovery) sets the ISR to the new leader alone and marks the partition
RECOVERING (LeaderRecoveryState 1). Without ELR (`eligible.leader.replicas.version` 0, or a
release before 4.0) the ELR is always empty and the rule is the plain one: leaders come
from the ISR.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

NO_LEADER = -1
RECOVERING = 1  # PartitionRecord/PartitionChangeRecord LeaderRecoveryState: elected uncleanly, still recovering


@dataclass(frozen=True)
class PartitionState:
    """One partition as the controller last committed it."""

    leader: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    recovery: int = 0


def created(leader: int, isr, elr=(), recovery: int = 0) -> PartitionState:
    """A PartitionRecord: the partition's whole state (at creation, or restated in full)."""
    return PartitionState(leader, tuple(isr), tuple(elr or ()), recovery)


def changed(state: PartitionState, leader: int | None = None, isr=None, elr=None,
            recovery: int | None = None) -> PartitionState:
    """A PartitionChangeRecord applied: a field it leaves out (None) keeps its value."""
    return replace(state, leader=state.leader if leader is None else leader,
                   isr=state.isr if isr is None else tuple(isr), elr=state.elr if elr is None else tuple(elr),
                   recovery=state.recovery if recovery is None else recovery)


def may_lead(before: PartitionState, after: PartitionState) -> bool:
    """KIP-966 "Leader election" (and KIP-704's unclean recovery state): a new leader is a member
    of the ISR or of the ELR the partition had before the change, or the change is an unclean
    election, which Kafka marks: the ISR becomes the new leader alone and the partition is
    RECOVERING. No leader (-1) and an unchanged leader are always allowed.

    "Before" is the committed state, not Kafka's target ISR of the same change: that target is
    the committed ISR minus fenced or removed replicas (a shrink never adds a candidate), and an
    ELR election is allowed from the committed ELR, so the rule accepts no fewer leaders than
    Kafka may elect."""
    if after.leader == before.leader or after.leader == NO_LEADER:
        return True
    if after.leader in before.isr or after.leader in before.elr:
        return True
    return after.recovery == RECOVERING and after.isr == (after.leader,)
