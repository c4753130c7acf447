"""KIP-1166 propagation: `hwm-propagation-delay` from `metadata_propagation` probes."""
from __future__ import annotations

from typing import Iterable, Sequence

from reference_model import kip1166

from checks.rules.base import Anomaly


class PropagationRule:
    """A metadata change seen by one broker must reach every other one within
    `bound_ms` (KIP-1166: no FETCH is parked while a replica's HWM lags the leader's).
    Probes overlapping an active fault prove nothing and are skipped, and so do probes
    without `unseen_until`: first-seen times alone bound the lag from above only.

    The default bound is twice KRaft's fetch max wait (500 ms): a broker that waits out
    one parked FETCH (the pre-KIP-1166 behaviour) and one more round trip stays under
    it; a lag beyond it is not explained by parking once."""

    anomalies = ("hwm-propagation-delay",)

    def __init__(self, bound_ms: int = 1000):
        self.bound_ns = bound_ms * 1_000_000

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in ("metadata_propagation", "fault"):
            yield "kip1166-propagation"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        windows, open_faults = [], {}
        for r in records:
            if r.get("f") != "fault":
                continue
            v = r.get("value") or {}
            k = (v.get("fault"), repr(v.get("targets")))
            if v.get("phase") == "start":
                open_faults.setdefault(k, r.get("time", 0))
            elif v.get("phase") == "stop" and k in open_faults:
                windows.append((open_faults.pop(k), r.get("time", 0)))
        windows += [(t, float("inf")) for t in open_faults.values()]
        out = []
        for r in records:
            v = r.get("value") or {}
            seen = {b: int(t) for b, t in (v.get("seen_by") or {}).items() if t is not None}
            unseen = {b: int(t) for b, t in (v.get("unseen_until") or {}).items() if t is not None}
            if r.get("f") != "metadata_propagation" or r.get("type") != "ok" or not seen or not unseen:
                continue
            end = r.get("time", 0)
            start = end - max(seen.values())
            if any(s <= end and start <= e for s, e in windows):
                continue
            if not kip1166.propagation_within_bound(seen, self.bound_ns, unseen):
                lag = kip1166.proven_lag_ns(seen, unseen) / 1e6
                out.append(Anomaly("hwm-propagation-delay", (r["index"],),
                                   f"change {v.get('change')!r}: a broker still answered without it {lag:.0f} ms "
                                   f"after another showed it (bound {self.bound_ns / 1e6:.0f} ms)",
                                   details={"seen_by": seen, "unseen_until": unseen, "proven_lag_ms": lag}))
        return out
