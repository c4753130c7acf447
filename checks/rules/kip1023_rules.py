"""KIP-1023 offsets judged from ListOffsets answers: `tiered-offset-violation`.

The inequalities Lz >= Ly >= Lx and Ly >= Ry (plus earliest-pending-upload = Ry + 1
and log start <= local log start) relate values that ListOffsets returns one per
request. The lower side of each pair never decreases on one broker within one leader
epoch, so if a request answered after another completed shows the upper side below the
lower side seen before, the inequality was broken at that later moment.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from reference_model import kip1023

from checks.rules.base import Anomaly
from checks.rules.observe import EpochIndex, Op, answered, as_int

#: (lower kind, upper kind, slack): lower(t1) <= lower(t2) <= upper(t2) + slack
PAIRS = (
    ("log_start", "local_log_start", 0),  # Rx/log start <= Lx
    ("local_log_start", "lso", 0),  # Ly >= Lx
    ("last_tiered", "lso", 0),  # Ly >= Ry
    ("lso", "leo", 0),  # Lz >= Ly
    ("hwm", "leo", 0),
    ("last_tiered", "pending_upload", -1),  # EPUO = Ry + 1
    ("pending_upload", "lso", 1),  # Ly >= Ry = EPUO - 1
)


def offset_kind(v: dict) -> str | None:
    """Which KIP-1023 quantity a ListOffsets answer is ("List Offsets API")."""
    ts = as_int(v.get("timestamp"))
    if ts == kip1023.LATEST:
        if as_int(v.get("replica_id"), -1) >= 0:
            return "leo"
        return "lso" if v.get("isolation_level") == "read_committed" else "hwm"
    return {
        kip1023.EARLIEST: "log_start",
        kip1023.EARLIEST_LOCAL: "local_log_start",
        kip1023.LAST_TIERED: "last_tiered",
        kip1023.EARLIEST_PENDING_UPLOAD: "pending_upload",
    }.get(ts)


class TieredOffsetRule:
    anomalies = ("tiered-offset-violation",)

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        if record.get("f") in ("list_offsets", "metadata"):
            yield f"tiered:{v.get('broker')}:{v.get('topic')}/{v.get('partition')}"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        epochs = EpochIndex(answered(records, ["metadata"]))
        obs: list[tuple[Op, str, int, int]] = []
        for op in answered(records, ["list_offsets"]):
            v = op.value
            kind, offset = offset_kind(v), as_int(v.get("offset"), -1)
            if kind is None or v.get("error", "NONE") != "NONE" or offset < 0:
                continue
            epoch = epochs.epoch_during(v.get("broker"), v.get("topic"), v.get("partition"), op.invoked, op.completed)
            if epoch is not None:
                obs.append((op, kind, epoch, offset))
        out = []
        for lo_kind, hi_kind, slack in PAIRS:
            for a in (o for o in obs if o[1] == lo_kind):
                for b in (o for o in obs if o[1] == hi_kind and o[2] == a[2] and o[0].invoked > a[0].completed):
                    if b[3] + slack < a[3]:
                        out.append(Anomaly(
                            "tiered-offset-violation", tuple(sorted(set(a[0].indices + b[0].indices))),
                            f"{hi_kind} {b[3]} answered after {lo_kind} was already {a[3]} "
                            f"(leader epoch {a[2]}): KIP-1023 requires {hi_kind} >= {lo_kind}"
                            + (f" {'+' if -slack > 0 else '-'} {abs(slack)}" if slack else ""),
                            details={"lower": lo_kind, "upper": hi_kind, "lower_value": a[3], "upper_value": b[3]}))
        return out
