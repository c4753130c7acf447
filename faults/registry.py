"""Every fault kind by name; an unknown name is a one-line error listing the known ones.

`all` in a fault list means the default mix: every kind except the opt-in ones."""
from __future__ import annotations

from kipcheck.faults.clock import CLOCK_KINDS
from kipcheck.faults.disk import DISK_KINDS
from kipcheck.faults.election import ELECTION_KINDS
from kipcheck.faults.errors import FaultError
from kipcheck.faults.logdir import LOGDIR_KINDS
from kipcheck.faults.membership import MEMBERSHIP_KINDS
from kipcheck.faults.partition import PARTITION_KINDS
from kipcheck.faults.process import PROCESS_KINDS
from kipcheck.faults.quorum import QUORUM_KINDS
from kipcheck.faults.toxics import TOXIC_KINDS

# Order matters for heal-all: network first (restarted nodes must reach their peers), processes before admin calls.
# Failed log directories are restored before stopped nodes start (a node must not start, or be
# reformatted, with a file where its directory belongs).
# Voters are added back once every node runs again.
KINDS = {k.name: k for k in (*PARTITION_KINDS, *TOXIC_KINDS, *CLOCK_KINDS, *LOGDIR_KINDS, *PROCESS_KINDS, *DISK_KINDS,
                             *MEMBERSHIP_KINDS, *QUORUM_KINDS, *ELECTION_KINDS)}
# never in `all`: wipe-metadata tests KRaft's tolerance of a forgotten vote; voter-removal formats
# the whole cluster another way (a dynamic quorum, Kafka 3.9+); broker-decommission and
# reassign-while-down need a fourth broker
OPT_IN = frozenset({"wipe-metadata", "voter-removal", "broker-decommission", "reassign-while-down"})
DEFAULT_MIX = tuple(n for n in KINDS if n not in OPT_IN)


def kind(name: str):
    try:
        return KINDS[name]
    except KeyError:
        raise FaultError(f"unknown fault {name!r}; known faults: {', '.join(sorted(KINDS))} (or 'all')") from None


def parse_kinds(text: str) -> list[str]:
    names = []
    for n in (n.strip() for n in text.split(",")):
        if n == "all":
            names.extend(DEFAULT_MIX)
        elif n:
            kind(n)
            names.append(n)
    return list(dict.fromkeys(names))


def require_kinds(text: str) -> list[str]:
    """parse_kinds for a user's --faults: one that names no kind ('' from an empty shell variable, ',')
    would be a chaos run without chaos, which only 'none' asks for on purpose; so it is refused."""
    names = parse_kinds(text)
    if not names:
        raise FaultError(f"--faults {text!r} names no fault kind: give kinds such as partition,kill, 'all', or 'none'")
    return names


def cluster_options(names) -> dict:
    """The ClusterOptions fields these kinds need (`FaultKind.cluster_options`, e.g. log_dirs=2,
    fake_clocks=True, proxied_clients=True for client link faults, proxied_links=True for links between nodes)."""
    out = {"proxied_clients": False, "proxied_links": False}
    for n in names:
        for key, value in getattr(kind(n), "cluster_options", {}).items():
            out[key] = max(out.get(key, value), value)
    return out


def min_brokers(names) -> int:
    """The fewest brokers these kinds can run on (`FaultKind.min_brokers`; 1 when none says)."""
    return max([getattr(kind(n), "min_brokers", 1) for n in names], default=1)


def healers():
    """Each family's heal-all once, in KINDS order."""
    return list(dict.fromkeys(k.heal_all for k in KINDS.values()))
