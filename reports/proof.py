"""Anomalies and known deviations with their proofs: the history records each example names,
shown among the records around them, with the fault windows around them, and for a known
deviation the Kafka class and method that cause it (reference_model/profiles.py EVIDENCE).

Each example gets a "show on the timeline" button (reports/viewer.js zooms to the proof
and rings its records).
"""
from __future__ import annotations

import html
import json

from kipcheck.reference_model import profiles
from kipcheck.rundir.broker_logs import FIELD as BROKER_LOGS

#: examples shown with their proof per anomaly name (the verdict keeps up to 50, all counted)
PROOFS_SHOWN = 10
#: records shown before and after each proof record, in history order
CONTEXT = 3
#: fault windows within this many seconds of a proof are shown beside it
FAULT_MARGIN_S = 10.0

esc = html.escape


class RecordLookup:
    """History records by index; a history's indices are its positions, checked on use."""

    def __init__(self, records: list[dict]):
        self.records = records

    def get(self, index: int) -> dict | None:
        if 0 <= index < len(self.records) and self.records[index]["index"] == index:
            return self.records[index]
        return next((r for r in self.records if r["index"] == index), None)


def _record_row(r: dict, proof: set[int]) -> str:
    value = json.dumps(r["value"], separators=(",", ":"), default=str)
    value = value if len(value) <= 240 else value[:240] + "…"
    cls = " class='proof'" if r["index"] in proof else ""
    return (f"<tr{cls} data-index='{r['index']}'><td>{r['index']}</td><td>{r['time'] / 1e9:.3f}</td>"
            f"<td>{esc(str(r['process']))}</td><td>{esc(r['type'])}</td><td>{esc(r['f'])}</td>"
            f"<td><code>{esc(value)}</code></td></tr>")


def _context(indices: list[int], lookup: RecordLookup) -> str:
    """The proof records among their neighbours (±CONTEXT in history order), gaps marked."""
    wanted = sorted({j for i in indices for j in range(max(i - CONTEXT, 0), i + CONTEXT + 1)})
    rows, previous = [], None
    for j in wanted:
        r = lookup.get(j)
        if r is None:
            continue
        if previous is not None and j != previous + 1:
            rows.append("<tr class='gap'><td colspan=6>…</td></tr>")
        rows.append(_record_row(r, set(indices)))
        previous = j
    if not rows:
        return "<p>the proof's records are not in this history</p>"
    return ("<table class='records'><tr><th>index</th><th>time (s)</th><th>process</th><th>type</th><th>f</th>"
            "<th>value</th></tr>" + "".join(rows) + "</table>")


def _faults_near(times: list[float], windows) -> str:
    """Fault windows overlapping [first proof − margin, last proof + margin]; those active
    at a proof record's time are marked."""
    if not times:
        return ""
    lo, hi = min(times) - FAULT_MARGIN_S, max(times) + FAULT_MARGIN_S
    near = [(a, b, label) for a, b, label in windows if a <= hi and b >= lo]
    if not near:
        return f"<p class='faults'>no fault window within {FAULT_MARGIN_S:g} s of the proof</p>"
    items = "".join(
        f"<li{' class=active' if any(a <= t <= b for t in times) else ''}>{esc(label)}: {a:.1f}–{b:.1f} s"
        f"{' (active during the proof)' if any(a <= t <= b for t in times) else ''}</li>" for a, b, label in near)
    return f"<p class='faults'>Fault windows around the proof:</p><ul class='faults'>{items}</ul>"


def _example(name: str, n: int, ex: dict, lookup: RecordLookup, windows, known: bool) -> str:
    indices = [int(i) for i in ex.get("indices", [])]
    times = [r["time"] / 1e9 for i in indices if (r := lookup.get(i)) is not None]
    details = {k: v for k, v in ex.items() if k not in ("indices", "message", BROKER_LOGS)}
    anchor = f"{'known-' if known else ''}{name}-{n}"
    return (f"<div class='example' id='{esc(anchor)}' data-anomaly='{esc(name)}' data-indices='{json.dumps(indices)}'>"
            f"<p><b>{esc(name)}</b> #{n + 1}: {esc(str(ex.get('message', '')))} "
            f"<button class='show' data-indices='{json.dumps(indices)}'>show on the timeline</button></p>"
            f"<p>proof: history indices {esc(str(indices))}</p>"
            + (f"<p>accepted as: {', '.join(f'<code>{esc(d)}</code>' for d in ex['deviations'])}</p>"
               if known and ex.get("deviations") else "")
            + (f"<details><summary>details</summary><pre>{esc(json.dumps(details, indent=1, default=str))}</pre></details>"
               if details else "")
            + _context(indices, lookup) + _faults_near(times, windows) + broker_logs_html(ex.get(BROKER_LOGS)) + "</div>")


def broker_logs_html(block) -> str:
    """The brokers' log lines around the proof (verdict field `broker_logs`, rundir/broker_logs.py),
    in a collapsible block, open when one is a WARN or an ERROR."""
    if not isinstance(block, dict):
        return ""
    lines = [line for line in block.get("lines") or () if isinstance(line, dict)]
    parts = ", ".join(esc(str(p)) for p in block.get("partitions") or ()) or "no partition: WARN and ERROR only"
    window = block.get("window_s") or ["?", "?"]
    mapping = block.get("mapping") or {}
    head = (f"broker log lines: {len(lines)} of {block.get('matched', len(lines))} naming {parts} "
            f"within {esc(str(window[0]))}–{esc(str(window[-1]))} s")
    if not lines:
        return f"<p class='broker-logs none'>{head}: none</p>"
    loud = any(line.get("level") in ("WARN", "ERROR", "FATAL") for line in lines)
    rows = "".join(
        f"<tr class='level-{esc(str(line.get('level')))}'><td>{esc(str(line.get('node')))}</td>"
        f"<td>{esc(str(line.get('time')))}</td><td>{esc(str(line.get('history_s')))}"
        f"{' (clock ' + esc(str(line['clock_skew_s'])) + ' s)' if 'clock_skew_s' in line else ''}</td>"
        f"<td>{esc(str(line.get('level')))}</td><td><pre>{esc(str(line.get('text')))}</pre></td></tr>" for line in lines)
    return (f"<details class='broker-logs'{' open' if loud else ''}><summary>{head}</summary>"
            f"<p>log time to history time through wall − history = {esc(str(mapping.get('wall_minus_history_ms')))} ms "
            f"({esc(str(mapping.get('source', '?')))})</p>"
            "<table class='broker-logs'><tr><th>node</th><th>log time</th><th>history (s)</th><th>level</th>"
            f"<th>line</th></tr>{rows}</table></details>")


def _evidence(name: str, verdict: dict) -> str:
    """The deviations that accepted the known `name`s (the verdict counts each,
    `counts.by_deviation`), with the Kafka class and method that cause them and their bound."""
    by_deviation = (verdict.get("counts") or {}).get("by_deviation") or {}
    devs = [(d, row[name]) for d, row in by_deviation.items() if name in row and d in profiles.EVIDENCE]
    if not devs:
        return ""
    items = "".join(f"<li><code>{esc(d)}</code> ({n}): {esc(profiles.EVIDENCE[d])}<br><i>bound:</i> "
                    f"{esc(profiles.BOUNDS[d])}</li>" for d, n in devs)
    return (f"<p>Accepted by profile <code>{esc(str(verdict.get('profile')))}</code> as:</p>"
            f"<ul class='evidence'>{items}</ul>")


def proofs_html(verdict: dict | None, records: list[dict], windows, known: bool = False) -> str:
    """The anomalies (or, `known`, the deviations the profile accepts), each example with its proof."""
    verdict = verdict or {}
    section = verdict.get("known" if known else "anomalies", {})
    counts = verdict.get("counts", {}).get("known" if known else "anomalies", {})
    lookup = RecordLookup(records)
    parts = []
    for name, examples in section.items():
        if not examples:
            continue
        total = counts.get(name, len(examples))
        shown = examples[:PROOFS_SHOWN]
        more = (f" (the first {len(shown)} shown; the {len(examples)} the verdict keeps are marked on the timeline)"
                if total > len(shown) else "")
        parts.append(f"<section class='anomaly' id='{'known-' if known else 'anomaly-'}{esc(name)}'>"
                     f"<h3>{esc(name)}: {total}{more}</h3>"
                     + (_evidence(name, verdict) if known else "")
                     + "".join(_example(name, n, ex, lookup, windows, known) for n, ex in enumerate(shown))
                     + "</section>")
    return "".join(parts) or "<p>none</p>"
