"""KIP-1166 propagation: `hwm-propagation-delay` from `metadata_propagation` probes."""
from __future__ import annotations

from typing import Iterable, Sequence

from kipcheck.reference_model import kip1166

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.observe import known_as, verdict

#: After a fault heals, a node reconnects and catches up (KRaft retries a lost FETCH after
#: controller.quorum.request.timeout.ms, 2 s, plus backoff): a probe that starts this soon
#: after the heal of a fault on a node it measures still counts as touched by it.
SETTLE_NS = 5_000_000_000


class PropagationRule(BaseRule):
    """The run's metadata changes, judged together (`kip1166.propagation_statistic`): the
    upper quartile, over changes, of how long some broker still answered without a
    committed change must stay within the KIP-1166 bound; a profile without KIP-1166
    (`kraft-fetch-parks-without-hwm`) accepts up to one parked FETCH per change.

    A probe counts unless a fault touched a node it depends on (a broker it measures, a
    controller, or an unknown target) between its start and its end plus `SETTLE_NS`.
    The parking window comes from the probes' `fetch_max_wait_ms` and
    `max_idle_interval_ms` (the KIP's 500 ms when absent)."""

    anomalies = ("hwm-propagation-delay",)
    fs = frozenset(("metadata_propagation", "fault"))

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in ("metadata_propagation", "fault"):
            yield "kip1166-propagation"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        probes, window_ms = counted_probes(records)
        if not probes:
            return []
        lags = [lag for _, lag, _ in probes]
        outcome = kip1166.propagation_statistic(lags, window_ms)
        kind = verdict(lambda p: kip1166.propagation_accepted(outcome, p), profile)
        if kind is None:
            return []
        quartile_ms = kip1166.upper_quartile_ns(lags) / 1e6
        median_ms = kip1166.median_ns(lags) / 1e6
        kip_ms, parked_ms = kip1166.kip_bound_ns(window_ms) / 1e6, kip1166.parked_once_bound_ns(window_ms) / 1e6
        within_parking = outcome == kip1166.PARKED_ONCE
        slowest = sorted(probes, key=lambda p: -p[1])[:10]
        return [Anomaly("hwm-propagation-delay", tuple(sorted(i for i, _, _ in slowest)),
                        f"upper quartile of the post-commit propagation lag {quartile_ms:.0f} ms over {len(lags)} "
                        f"metadata changes "
                        f"exceeds the KIP-1166 bound {kip_ms:.0f} ms (parking window {window_ms} ms); "
                        + ("within one parked KRaft FETCH per change" if within_parking else
                           f"beyond even one parked KRaft FETCH per change ({parked_ms:.0f} ms)"),
                        known=(kind == "known"),
                        details={"upper_quartile_ms": round(quartile_ms, 1), "median_ms": round(median_ms, 1),
                                 "bound_ms": kip_ms, "parked_once_ms": parked_ms,
                                 "window_ms": window_ms, "changes": len(lags),
                                 "slowest_ms": [round(lag / 1e6, 1) for _, lag, _ in slowest],
                                 **known_as(kind), RULE: "kip1166.propagation_statistic"})]


def counted_probes(records: Sequence[dict]) -> tuple[list[tuple[int, int, dict]], int]:
    """The probes `PropagationRule` counts, as (index, post-commit lag ns, value), and the
    parking window (ms) of the cluster they measured."""
    windows = fault_windows(records)
    probes, started = [], {}
    for r in records:
        if r.get("f") != "metadata_propagation":
            continue
        if r.get("type") == "invoke":
            started[r.get("process")] = r.get("time", 0)
            continue
        begin = started.pop(r.get("process"), None)
        v = r.get("value") or {}
        if r.get("type") != "ok" or begin is None or v.get("acknowledged") is None:
            continue
        if touched(windows, begin, r.get("time", 0), depends_on(v)):
            continue
        seen = {b: int(t) for b, t in (v.get("seen_by") or {}).items() if t is not None}
        unseen = {b: int(t) for b, t in (v.get("unseen_until") or {}).items() if t is not None}
        probes.append((r["index"], kip1166.post_commit_lag_ns(seen, unseen, int(v["acknowledged"])), v))
    first = probes[0][2] if probes else {}
    return probes, kip1166.parking_window_ms(int(first.get("fetch_max_wait_ms", kip1166.KIP_MAX_PARK_MS)),
                                             int(first.get("max_idle_interval_ms", 0)))


def propagation_summary(records: Sequence[dict]) -> dict:
    """The run's KIP-1166 figures, whatever the verdict: counted changes, median and upper
    quartile of their post-commit lags (ms), the bound and the outcome."""
    probes, window_ms = counted_probes(records)
    lags = [lag for _, lag, _ in probes]
    return {"changes": len(lags), "window_ms": window_ms, "bound_ms": kip1166.kip_bound_ns(window_ms) / 1e6,
            "median_ms": round(kip1166.median_ns(lags) / 1e6, 1) if lags else None,
            "upper_quartile_ms": round(kip1166.upper_quartile_ns(lags) / 1e6, 1) if lags else None,
            "outcome": kip1166.propagation_statistic(lags, window_ms)}


def depends_on(value: dict) -> set[str] | None:
    """The nodes a probe's measurement depends on (as strings); None: unknown (every node)."""
    if "controllers" not in value:
        return None
    return {str(n) for n in [*value.get("brokers", []), *value.get("controllers", [])]}


def fault_windows(records: Sequence[dict]) -> list[tuple[int, float, set[str] | None]]:
    """(start, end, targets) of every fault, from its start `invoke` to its stop completion
    plus `SETTLE_NS`. An inject that did not end `ok` (the nemesis heals its family and
    moves on) ends at its completion, targets unknown (None); so does heal-all, a stop
    with no start. A fault never stopped lasts to the end."""
    out, opened, stopping = [], {}, {}  # opened: fault name -> [[start time, targets], ...]
    for r in records:
        if r.get("f") != "fault":
            continue
        v, t, kind = r.get("value") or {}, r.get("time", 0), r.get("type")
        name, phase = v.get("fault"), v.get("phase")
        if phase == "start" and kind == "invoke":
            opened.setdefault(name, []).append([t, None])
        elif phase == "start" and opened.get(name):
            entry = opened[name][-1]
            if kind == "ok":
                entry[1] = targets(v)
            else:
                opened[name].pop()
                out.append((entry[0], t + SETTLE_NS, None))
        elif phase == "stop" and kind == "invoke":
            stopping[name] = t
        elif phase == "stop":
            pending = opened.get(name) or []
            match = next((e for e in pending if e[1] == targets(v)), pending[0] if pending else None)
            if match is not None:
                pending.remove(match)
                out.append((match[0], t + SETTLE_NS, match[1]))
            else:
                out.append((stopping.get(name, t), t + SETTLE_NS, None))
    out += [(e[0], float("inf"), e[1]) for pending in opened.values() for e in pending]
    return out


def targets(value: dict) -> set[str] | None:
    t = value.get("targets")
    return None if t is None else {str(x) for x in t}


def touched(windows, begin: int, end: int, nodes: set[str] | None) -> bool:
    """Whether a fault on one of `nodes` (None: any node) overlapped [begin, end]."""
    return any(s <= end and begin <= e and (nodes is None or t is None or t & nodes) for s, e, t in windows)
