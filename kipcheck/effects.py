"""What a fault does to a cluster, in the words a fault record carries (its value's `effects`).

Each fault kind declares its effects where it is written (`faults/*`, `FaultKind.effects`), the
nemesis writes them into every record of that fault, and the checker reads them from the
history (`of`), never from a list of kind names: a history re-checked later, or written by
another tool, is judged by what its faults did. A bottom module, like `kipcheck.errors`: the
faults write these words and the checks read them, and neither imports the other.
"""
from __future__ import annotations

#: the target's node is down (killed, stopped or frozen) from the start's completion until the
#: stop is invoked: it sends no heartbeat to the controller and no fetch to a leader meanwhile
STOPS_NODE = "stops-node"
#: the target may lose what a broker keeps in memory only (its HWM, fetch sessions, producer state
#: not yet snapshotted): a new life of that broker begins
LOSES_STATE = "loses-state"
#: the target's log may lose its tail (recovery drops a torn or corrupt tail, a cut, an unclean election)
TRUNCATES = "truncates"
#: acts on the target's own node only (its process or its disk): the controller and the other
#: brokers still reach each other, so their metadata answers say what the leaders replay
OWN_NODE = "own-node"
#: moves the target JVM's wall clock (libfaketime)
MOVES_CLOCK = "moves-clock"
#: changes partitions' replica sets (AlterPartitionReassignments)
MOVES_REPLICAS = "moves-replicas"
#: changes which brokers are registered or which controllers vote
CHANGES_MEMBERSHIP = "changes-membership"
#: elects partition leaders
ELECTS = "elects"
#: drops traffic between nodes, or between clients and nodes
CUTS_LINKS = "cuts-links"
#: delays, throttles or breaks connections without dropping them for good (Toxiproxy)
SLOWS_LINKS = "slows-links"

ALL = frozenset({STOPS_NODE, LOSES_STATE, TRUNCATES, OWN_NODE, MOVES_CLOCK, MOVES_REPLICAS, CHANGES_MEMBERSHIP,
                 ELECTS, CUTS_LINKS, SLOWS_LINKS})

_KILLED = frozenset({STOPS_NODE, LOSES_STATE, TRUNCATES, OWN_NODE})
_DISK = frozenset({LOSES_STATE, TRUNCATES})
_LINK = frozenset({SLOWS_LINKS})
#: Histories recorded before fault records carried `effects` (kipcheck before 2026-11-28): what
#: each kind did then, as the checker's kind lists said. Read only for a record without `effects`.
LEGACY = {
    "kill": _KILLED, "restart": _KILLED, "wipe": _KILLED, "truncate": _KILLED,
    "pause": frozenset({STOPS_NODE, OWN_NODE}),
    "rolling-restart": _DISK, "bitflip": _DISK, "wipe-metadata": _DISK, "log-dir-failure": _DISK,
    "elect": frozenset({ELECTS}), "elect-unclean": frozenset({ELECTS, TRUNCATES}),
    "reassign": frozenset({MOVES_REPLICAS}), "broker-decommission": frozenset({MOVES_REPLICAS, CHANGES_MEMBERSHIP}),
    "voter-removal": frozenset({CHANGES_MEMBERSHIP}),
    "clock-skew": frozenset({MOVES_CLOCK}), "clock-strobe": frozenset({MOVES_CLOCK}),
    **{k: frozenset({CUTS_LINKS}) for k in ("partition", "partition-majority", "partition-bridge", "partition-oneway")},
    **{k: _LINK for k in ("latency", "bandwidth", "slow-close", "timeout", "reset-peer", "slicer", "limit-data",
                          "replication-latency", "replication-bandwidth", "replication-reset", "controller-latency")},
    "heal-all": frozenset(),
}


def of(value: dict | None) -> frozenset[str]:
    """The effects a fault record's value says its fault has (a legacy record: its kind's, `LEGACY`)."""
    value = value if isinstance(value, dict) else {}
    declared = value.get("effects")
    if isinstance(declared, list):
        return frozenset(e for e in declared if isinstance(e, str))
    return LEGACY.get(value.get("fault"), frozenset())


def has(record: dict, effect: str) -> bool:
    """Whether `record` is a fault record whose fault has `effect`."""
    return record.get("f") == "fault" and effect in of(record.get("value"))
