"""KIP-1166 propagation: `hwm-propagation-delay` from `metadata_propagation` probes."""
from __future__ import annotations

from typing import Iterable, Sequence

from reference_model import kip1166

from checks.rules.base import Anomaly


class PropagationRule:
    """A metadata change seen by one broker must reach every other one within
    `bound_ms` (KIP-1166: no FETCH is parked while a replica's HWM lags the leader's).
    Probes overlapping an active fault prove nothing and are skipped."""

    anomalies = ("hwm-propagation-delay",)

    def __init__(self, bound_ms: int = 500):
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
            if r.get("f") != "metadata_propagation" or r.get("type") != "ok" or not seen:
                continue
            end = r.get("time", 0)
            start = end - max(seen.values())
            if any(s <= end and start <= e for s, e in windows):
                continue
            if not kip1166.propagation_within_bound(seen, self.bound_ns):
                spread = (max(seen.values()) - min(seen.values())) / 1e6
                out.append(Anomaly("hwm-propagation-delay", (r["index"],),
                                   f"change {v.get('change')!r} took {spread:.0f} ms to reach every broker "
                                   f"(bound {self.bound_ns / 1e6:.0f} ms)",
                                   details={"seen_by": seen, "spread_ms": spread}))
        return out
