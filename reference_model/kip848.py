"""KIP-848 (the consumer rebalance protocol): who may own a partition of a consumer group.

Pure rules, one per function; the checker (checks/rules/group_rules.py) follows each group's
members through their own rebalance callbacks (the history's `assign` with `rebalance`,
and `revoke`) and asks `handoff_allowed` of every partition given to a member while another
member of the group had it.

What the owner did is all the checker can prove: the coordinator's reasons are not in the
history. The owner either began revoking the partition before the other member was given it
(`RELEASED`), or its client had failed (`GONE`: closed or crashed, it heartbeats no more and the
coordinator frees its partitions after the session timeout), or it learned later that it had
lost the partition (`FENCED`: KIP-848 "Membership rules", a fenced member gives up all its
partitions at once and the consumer calls onPartitionsLost), or it went on owning the partition
and revoked it later as an ordinary revocation (`HELD`).

The classic protocol that librdkafka's subscribers also speak gives the same guarantee another
way (the eager protocol: every member revokes everything before it rejoins, and no member is
assigned before the rejoin completes), so the same rule judges both.
"""
from __future__ import annotations

#: what the previous owner did about the partition, as its own callbacks show
RELEASED = "released"  # its revocation began before the partition was given to another member
GONE = "gone"  # its client had closed or failed: it no longer heartbeats
FENCED = "fenced"  # it was fenced: it learned later that it lost the partition (onPartitionsLost)
HELD = "held"  # it still owned the partition and revoked it later as an ordinary revocation

OWNER_STATES = (RELEASED, GONE, FENCED, HELD)


def handoff_allowed(owner: str) -> bool:
    """KIP-848 "Reconciliation: a partition is revoked from its owner before it is assigned to
    another member": a partition owned by member A may be given to member B only after A has
    revoked it (A's heartbeat no longer lists it), or once A left the group or was fenced (the
    coordinator frees a partition when its owner leaves or is fenced; a fenced member gives up
    every partition and calls onPartitionsLost). `owner`: one of `OWNER_STATES`."""
    if owner not in OWNER_STATES:
        raise ValueError(f"unknown owner state {owner!r}; one of {OWNER_STATES}")
    return owner != HELD
