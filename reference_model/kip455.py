"""KIP-455 (replica reassignment): when the controller may end a reassignment.

Pure rules, one per function; the checker (checks/rules/reassignment_rules.py) replays each
partition's records of the controllers' metadata log (`partition_change`) through `created` /
`changed` and asks `completion_allowed` of every record that ends a reassignment.

While a partition moves, its replicas are the union of the original and the target set:
`adding` are the target replicas not in the original, `removing` the original ones not in the
target. A reassignment ends one of two ways: it completes (the replicas become the target,
`removing` leave) or it is cancelled (the replicas go back to the original, `adding` leave).
Only a completion has a condition: every target replica must be in the ISR, else the partition
is left with a replica set whose ISR is short of it although the removed replicas were in sync.
Kafka 3.3-3.7 completed once the *adding* replicas were in the ISR (KAFKA-15665;
`PartitionReassignmentReplicas.maybeCompleteReassignment`, fixed in 3.8.0 to ask for all of
the target replicas); the release profiles of those lines know it as
`reassignment-completes-on-adding`.
"""
from __future__ import annotations

from dataclasses import dataclass

from kipcheck.reference_model import profiles
from kipcheck.reference_model.profiles import Profile


@dataclass(frozen=True)
class Assignment:
    """A partition's replica set as the controller last wrote it."""

    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()


def created(replicas, isr, adding=(), removing=()) -> Assignment:
    """A PartitionRecord: the whole state."""
    return Assignment(tuple(replicas or ()), tuple(isr or ()), tuple(adding or ()), tuple(removing or ()))


def changed(before: Assignment, replicas=None, isr=None, adding=None, removing=None) -> Assignment:
    """A PartitionChangeRecord: None keeps a field as it was."""
    return Assignment(before.replicas if replicas is None else tuple(replicas),
                      before.isr if isr is None else tuple(isr),
                      before.adding if adding is None else tuple(adding),
                      before.removing if removing is None else tuple(removing))


def in_progress(state: Assignment) -> bool:
    """A reassignment is in progress while replicas are being added or removed."""
    return bool(state.adding or state.removing)


def target(state: Assignment) -> tuple[int, ...]:
    """The replicas a reassignment in progress moves to: all but those being removed."""
    return tuple(r for r in state.replicas if r not in state.removing)


def completes(before: Assignment, after: Assignment) -> bool:
    """Whether `after` ends the reassignment `before` had in progress by moving to its target (a
    cancellation goes back to the original, which differs from the target while one is in progress:
    the target lacks the removing replicas, the original the adding ones)."""
    return in_progress(before) and not in_progress(after) and set(after.replicas) == set(target(before))


def completion_allowed(before: Assignment, after: Assignment, profile: Profile | str = "kip") -> bool:
    """KIP-455 "Proposed Changes: the reassignment is complete once every target replica is in the
    ISR, and only then are the removing replicas taken out": a record that completes a reassignment
    must leave an ISR that holds every replica of the new set.

    `reassignment-completes-on-adding` (Kafka 3.3-3.7, KAFKA-15665): the adding replicas in the
    ISR were enough."""
    if not completes(before, after):
        return True
    on_adding = profiles.get(profile).allows(profiles.REASSIGNMENT_COMPLETES_ON_ADDING)
    needed = set(before.adding) if on_adding else set(after.replicas)
    return needed <= set(after.isr)
