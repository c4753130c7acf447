"""KIP-966 (Eligible Leader Replicas) and the KRaft election rule it extends: who may lead a partition.

Pure rules, one per function; the checker (checks/rules/election_rules.py) replays the
controller's own metadata log (harness/metadata_log.py: every PartitionRecord and
PartitionChangeRecord, in commit order) through `PartitionState` and asks `may_lead` of
every leader change.

What Kafka does, read in the 4.3.1 sources (kafka-metadata `PartitionChangeBuilder.electAnyLeader`,
`isValidNewLeader`, `canElectLastKnownLeader`, `tryElection`; `ReplicationControlManager` asks
for an unclean election only where `unclean.leader.election.enable` holds for the topic or
an ElectLeaders UNCLEAN request names it): a clean election picks a replica of the target ISR,
or, when the ISR is empty, one of the ELR (the ELR member then becomes the whole ISR); an
unclean election, or with ELR on the "last known leader" recovery (ISR and ELR empty, the
one-member LastKnownElr alive; `useLastKnownLeaderInBalancedRecovery` is never turned off),
sets the ISR to the new leader alone and marks the partition RECOVERING (LeaderRecoveryState
1). Without ELR (`eligible.leader.replicas.version` 0, or a release before 4.0) the ELR is
always empty and the rule is the plain one: leaders come from the ISR.
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
    last_known_elr: tuple[int, ...] = ()


def created(leader: int, isr, elr=(), recovery: int = 0, last_known_elr=()) -> PartitionState:
    """A PartitionRecord: the partition's whole state (at creation, or restated in full)."""
    return PartitionState(leader, tuple(isr), tuple(elr or ()), recovery, tuple(last_known_elr or ()))


def changed(state: PartitionState, leader: int | None = None, isr=None, elr=None,
            recovery: int | None = None, last_known_elr=None) -> PartitionState:
    """A PartitionChangeRecord applied: a field it leaves out (None) keeps its value."""
    def keep(new, old):
        return old if new is None else tuple(new)
    return replace(state, leader=state.leader if leader is None else leader, isr=keep(isr, state.isr),
                   elr=keep(elr, state.elr), recovery=state.recovery if recovery is None else recovery,
                   last_known_elr=keep(last_known_elr, state.last_known_elr))


def may_lead(before: PartitionState, after: PartitionState, unclean_permitted: bool = False,
             new_replicas=None) -> bool:
    """KIP-966 "Leader election" (and KIP-704's unclean recovery state): a new leader is a member
    of the ISR or of the ELR the partition had before the change. Otherwise only an unclean
    election, which Kafka marks (the ISR becomes the new leader alone, the partition RECOVERING),
    and only where one may happen: `unclean_permitted` (unclean.leader.election.enable, or an
    ElectLeaders UNCLEAN request), or the last known leader recovery of ELR (the partition's
    LastKnownElr is that one broker). No leader (-1) and an unchanged leader are always allowed.

    Kafka elects from the change's target ISR, which is the committed ISR less fenced or removed
    replicas, except in one change: the leader's AlterPartition that adds the last replica a
    reassignment waits for, where the reassignment completes in the same record, and a leader
    it removes is replaced by one of the new ISR (4.3.1 `PartitionChangeBuilder.build`:
    `completeReassignmentIfNeeded` before `tryElection`). So where the change sets the replicas
    (`new_replicas`, the record's own; None when it leaves them) without the old leader, a leader
    the same change added to the ISR is one Kafka may elect (seen when a decommissioned broker's
    replicas moved back: ISR [4, 1, 2] became [1, 2, 3], replicas [3, 1, 2], 3 leading)."""
    if after.leader == before.leader or after.leader == NO_LEADER:
        return True
    if after.leader in before.isr or after.leader in before.elr:
        return True
    completes_reassignment = new_replicas is not None and before.leader not in tuple(new_replicas)
    if completes_reassignment and after.leader in after.isr and after.recovery != RECOVERING:
        return True  # joined the ISR in this very change, which removed the old leader: elected from the new ISR
    marked_unclean = after.recovery == RECOVERING and after.isr == (after.leader,)
    return marked_unclean and (unclean_permitted or before.last_known_elr == (after.leader,))
