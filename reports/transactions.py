"""The report's transactions section: how many committed, aborted or stayed unknown, each
transaction's span (begin to end) per transactional id, and the last stable offset against
the high watermark over time, as the fetch answers showed them (docs/report.md)."""
from __future__ import annotations

import html

from kipcheck.checks.rules.observe import partitions_of
from kipcheck.reference_model.transactions import ABORTED, COMMITTED, UNKNOWN, transaction_outcome

COLOURS = {COMMITTED: "#2a9d3f", ABORTED: "#d62728", UNKNOWN: "#999"}


def transactions(records: list[dict]) -> dict[str, dict]:
    """txn -> {"tid", "begin", "end" (s), "outcome", "partitions"}, from the history alone."""
    out: dict[str, dict] = {}
    for r in records:
        if r["f"] not in ("txn-begin", "txn-commit", "txn-abort"):
            continue
        v = r["value"]
        t = out.setdefault(v.get("txn"), {"tid": v.get("transactional_id"), "begin": r["time"] / 1e9, "end": None,
                                          "commit": [], "abort": [], "partitions": []})
        if r["type"] == "invoke":
            continue
        if r["f"] != "txn-begin":
            t["commit" if r["f"] == "txn-commit" else "abort"].append(r["type"])
            t["end"] = r["time"] / 1e9
            t["partitions"] = v.get("partitions") or t["partitions"]
    for t in out.values():
        t["outcome"] = transaction_outcome(tuple(t.pop("commit")), tuple(t.pop("abort")))
    return out


def lso_series(records: list[dict]) -> dict[str, list[tuple[float, int, int]]]:
    """"topic/partition" -> [(s, LSO, HWM)] of every fetch answer without an error."""
    out: dict[str, list] = {}
    for r in records:
        if r["f"] != "fetch" or r["type"] != "ok":
            continue
        v = r["value"]
        for e in partitions_of(v):
            lso, hwm = e.get("last_stable_offset"), e.get("high_watermark")
            if e.get("error") == "NONE" and isinstance(lso, int) and isinstance(hwm, int) and lso >= 0:
                out.setdefault(f"{e.get('topic')}/{e.get('partition')}", []).append((r["time"] / 1e9, lso, hwm))
    return out


def transactions_html(records: list[dict], end: float, width: int = 1200) -> str:
    txns = transactions(records)
    if not txns:
        return ""
    counts = {k: sum(1 for t in txns.values() if t["outcome"] == k) for k in (COMMITTED, ABORTED, UNKNOWN)}
    end = max(end, 1e-9)
    x = lambda s: 120 + (width - 130) * s / end  # noqa: E731 - the one scale of both charts
    tids = sorted({t["tid"] for t in txns.values()}, key=str)
    rows = []
    for i, tid in enumerate(tids):
        y = 10 + i * 16
        rows.append(f'<text x="2" y="{y + 10}" font-size="11">{html.escape(str(tid))}</text>')
        for name, t in txns.items():
            if t["tid"] == tid:
                stop = t["end"] if t["end"] is not None else end
                rows.append(f'<rect x="{x(t["begin"]):.1f}" y="{y}" width="{max(1.0, x(stop) - x(t["begin"])):.1f}" '
                            f'height="12" fill="{COLOURS[t["outcome"]]}"><title>{html.escape(str(name))}: '
                            f'{t["outcome"]}, {t["begin"]:.2f}-{stop:.2f} s, {len(t["partitions"])} partitions'
                            f'</title></rect>')
    spans = f'<svg width="{width}" height="{20 + 16 * len(tids)}">{"".join(rows)}</svg>'
    charts = []
    for tp, points in sorted(lso_series(records).items())[:3]:
        top = max(h for _, _, h in points) or 1
        y = lambda o: 110 - 100 * o / top  # noqa: E731
        line = lambda k: " ".join(f"{x(p[0]):.1f},{y(p[k]):.1f}" for p in sorted(points))  # noqa: E731
        charts.append(f'<p>{html.escape(tp)}: LSO (blue) and HWM (grey) in the fetch answers, 0-{top}</p>'
                      f'<svg width="{width}" height="115"><polyline fill="none" stroke="#bbb" points="{line(2)}"/>'
                      f'<polyline fill="none" stroke="#1f77b4" points="{line(1)}"/></svg>')
    return (f"<h2>Transactions</h2><p>{len(txns)} transactions: <b>{counts[COMMITTED]} committed</b>, "
            f"<b>{counts[ABORTED]} aborted</b>, <b>{counts[UNKNOWN]} unknown</b> (an end that did not answer, or "
            f"none). Spans per transactional id, begin to end (green committed, red aborted, grey unknown):</p>"
            + spans + "".join(charts))
