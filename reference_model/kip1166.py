"""KIP-1166: High-watermark in KRaft FETCH requests."""
from __future__ import annotations

from .state import MAX_INT64

UNKNOWN = "unknown"
KNOWN = "known"
NOT_SUPPORTED = "not-supported"


def remote_hwm_meaning(value: int) -> str:
    """KIP-1166 "Fetch / Request": -1 = the remote replica does not know the HWM;
    max int64 (the default) = it does not send the field; else its known HWM."""
    if value == -1:
        return UNKNOWN
    if value == MAX_INT64:
        return NOT_SUPPORTED
    if 0 <= value < MAX_INT64:
        return KNOWN
    raise ValueError(f"not a valid HighWatermark field value: {value}")


def should_park(response_empty: bool, remote_hwm: int, leader_hwm: int) -> bool:
    """KIP-1166 "Handling / KRaft": park the FETCH only when the response is empty and
    the remote replica's HWM >= the leader's HWM. -1 (unknown) never parks once the
    leader knows a HWM; max int64 (field absent) parks as before the KIP."""
    return response_empty and remote_hwm >= leader_hwm


def complete_on_hwm_change(parked_remote_hwms: tuple[int, ...], new_leader_hwm: int) -> tuple[bool, ...]:
    """KIP-1166 "Handling / KRaft": when the leader's HWM changes it may complete the
    parked FETCHes; those whose remote HWM is now behind must be completed."""
    return tuple(h < new_leader_hwm for h in parked_remote_hwms)


def field_considered(fetcher: str) -> bool:
    """KIP-1166 "Replica Fetcher and Kafka Consumers": only KRaft replicas' HWM counts;
    the broker ignores the field from consumers and the replica fetcher."""
    return fetcher == "kraft"


def propagation_within_bound(seen_by_ns: dict, bound_ns: int) -> bool:
    """KIP-1166 "Motivation": a metadata change visible to one broker must reach the
    others without waiting out a parked FETCH: the spread of first-seen times <= bound."""
    times = list(seen_by_ns.values())
    return not times or max(times) - min(times) <= bound_ns
