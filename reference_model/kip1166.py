"""KIP-1166: High-watermark in KRaft FETCH requests."""
from __future__ import annotations

from . import profiles
from .profiles import Profile
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


# -- the propagation statistic ---------------------------------------------------------
#: KIP-1166 "Motivation": "500ms is the maximum amount of time that the KRaft leader will
#: park FETCH requests if there are no records after the FetchOffset".
KIP_MAX_PARK_MS = 500
#: Fewer judged changes than this decide nothing: a quartile of a handful of delays on a
#: loaded machine is noise (a parking broker's upper quartile falls under the bound with
#: probability P(Bin(n, 1/2) >= 3n/4): 2.1 % at n = 20, 0.3 % at n = 30).
MIN_CHANGES = 20

WITHIN = "within"          # a KIP-1166 broker: no parked FETCH delays a committed change
PARKED_ONCE = "parked-once"  # what a pre-KIP-1166 broker does: one FETCH parked per change
BEYOND = "beyond"          # not explained even by one parked FETCH per change
UNDECIDED = "undecided"    # too few changes to judge


def parking_window_ms(fetch_max_wait_ms: int = KIP_MAX_PARK_MS, max_idle_interval_ms: int = 0) -> int:
    """How long one parked FETCH can hold a committed change back: until its max wait
    (KIP-1166 "Motivation") or until the next append to the metadata log, which
    completes every parked FETCH whatever the HWM (the active controller appends a no-op
    record every `metadata.max.idle.interval.ms`; 0 turns that off)."""
    if max_idle_interval_ms and 0 < max_idle_interval_ms < fetch_max_wait_ms:
        return int(max_idle_interval_ms)
    return int(fetch_max_wait_ms)


def post_commit_lag_ns(seen_by_ns: dict, unseen_until_ns: dict, acknowledged_ns: int | None) -> int:
    """How long, at least, some broker still answered *without* a change after it was
    committed: the latest moment a broker was asked and answered without it, minus the
    earliest moment by which the change was surely committed: the Admin call's answer
    (the controller answers once the records are committed) or the first answer of any
    broker that showed it (a broker's metadata image holds committed records only).
    All times are from the change's start. 0 when no broker provably lagged."""
    proofs = [t for t in (acknowledged_ns, *seen_by_ns.values()) if t is not None]
    if not proofs:
        return 0
    committed_by = min(proofs)
    lags = [t - committed_by for t in unseen_until_ns.values() if t is not None]
    return max(0, max(lags, default=0))


def median_ns(values: list[int]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of no values")
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def upper_quartile_ns(values: list[int]) -> int:
    """The smallest value that at least three quarters of `values` do not exceed."""
    if not values:
        raise ValueError("quartile of no values")
    return sorted(values)[-(-3 * len(values) // 4) - 1]


def kip_bound_ns(window_ms: int) -> int:
    """KIP-1166 "Handling / KRaft": an empty FETCH whose HWM lags the leader's is answered
    at once, and a parked one completes when the leader's HWM moves, so a broker learns a
    committed change one round trip (plus its own apply) after the commit. Without that,
    a broker's FETCH stays parked until the next append or its max wait: the rest of the
    parking window W, uniform over [0, W] (changes are not in phase with the no-op timer),
    so half its changes lag more than W/2. The bound is on the *upper quartile* of the
    post-commit lags: <= W/2 (250 ms). A parking broker meets it only if three quarters of
    its changes fall in the lower half of the window (P(Bin(n, 1/2) >= 3n/4)); a KIP-1166
    broker fails it only if more than a quarter of its changes take over W/2 to apply, and
    load shifts all its lags up together (measured at a load of 40 on 2 cores: median 82,
    upper quartile 105 ms), which a median at W/4 would not absorb."""
    return window_ms * 1_000_000 // 2


def parked_once_bound_ns(window_ms: int) -> int:
    """The most a pre-KIP-1166 broker can do: each change waits out at most one parked
    FETCH (W) plus what a KIP-1166 broker may take (W/2); an upper quartile beyond W + W/2
    is not explained by parking."""
    return window_ms * 1_000_000 + kip_bound_ns(window_ms)


def propagation_statistic(lags_ns: list[int], window_ms: int) -> str:
    """KIP-1166 "Handling / KRaft", over a run: judge the post-commit lags of its metadata
    changes (one per change, the slowest broker's; `post_commit_lag_ns`) by their upper quartile: WITHIN the KIP-1166
    bound, PARKED_ONCE (what a broker without KIP-1166 does), BEYOND both, or UNDECIDED
    with fewer than MIN_CHANGES changes."""
    if len(lags_ns) < MIN_CHANGES:
        return UNDECIDED
    q = upper_quartile_ns(lags_ns)
    if q <= kip_bound_ns(window_ms):
        return WITHIN
    return PARKED_ONCE if q <= parked_once_bound_ns(window_ms) else BEYOND


def propagation_accepted(outcome: str, profile: Profile | str = "kip") -> bool:
    """Whether `profile` accepts a `propagation_statistic` outcome: the KIP only WITHIN (or
    too few changes to tell); a release without KIP-1166 (`kraft-fetch-parks-without-hwm`)
    also PARKED_ONCE; nothing accepts BEYOND."""
    if outcome in (WITHIN, UNDECIDED):
        return True
    return outcome == PARKED_ONCE and profiles.get(profile).allows(profiles.KRAFT_FETCH_PARKS_WITHOUT_HWM)
