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


def proven_lag_ns(seen_by_ns: dict, unseen_until_ns: dict | None = None) -> int:
    """How long one broker provably stayed behind another after a metadata change.

    With exact first-seen times (a scenario) that is their spread. From a probe, a
    broker's first-seen time is only an upper bound (polling adds delay), so the proof is
    the latest moment broker X still answered *without* the change, minus the moment a
    different broker Y was seen *with* it."""
    if unseen_until_ns is None:
        times = list(seen_by_ns.values())
        return max(times) - min(times) if times else 0
    lags = [unseen - seen for x, unseen in unseen_until_ns.items() if unseen is not None
            for y, seen in seen_by_ns.items() if y != x and seen is not None]
    return max(lags, default=0)


def propagation_within_bound(seen_by_ns: dict, bound_ns: int, unseen_until_ns: dict | None = None) -> bool:
    """KIP-1166 "Motivation": a metadata change visible to one broker must reach the
    others without waiting out a parked FETCH: the proven lag between brokers <= bound."""
    return proven_lag_ns(seen_by_ns, unseen_until_ns) <= bound_ns
