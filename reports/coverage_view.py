"""The report's rule-coverage section: one bar per KIP rule the checker judges, scaled to
its observation count (log scale), red where a rule was never exercised, and the rules
that are part of others or not observable from outside a broker listed below."""
from __future__ import annotations

import html
import math


def coverage_html(verdict: dict | None) -> str:
    coverage = (verdict or {}).get("coverage") or {}
    if not coverage:
        return "<p>no coverage figures (verdict missing or from an older kipcheck)</p>"
    judged = [(rid, row) for rid, row in coverage.items() if row.get("observations") is not None]
    top = max([row["observations"] for _, row in judged] + [1])
    rows = []
    for rid, row in judged:
        n = row["observations"]
        width = 0 if n == 0 else max(2, round(300 * math.log1p(n) / math.log1p(top)))
        bar = (f'<div style="background:#2a9d3f;height:12px;width:{width}px"></div>' if n
               else '<span style="color:#d62728;font-weight:bold">never exercised</span>')
        rows.append(f"<tr><td><code>{html.escape(rid)}</code></td><td>{html.escape(row['kip'])} "
                    f"&ldquo;{html.escape(row['section'])}&rdquo;</td><td style=\"text-align:right\">{n}</td>"
                    f"<td>{bar}</td><td>{html.escape(row.get('counted', ''))}</td></tr>")
    others = ", ".join(f"<code>{html.escape(rid)}</code>" for rid, row in coverage.items()
                       if row.get("observations") is None)
    required = (verdict or {}).get("coverage_required")
    note = ""
    if required:
        short = required.get("short") or []
        note = (f"<p><b>--require-coverage {html.escape(required['spec'])}</b>: "
                + ("met" if not short else "short for " + ", ".join(html.escape(s) for s in short)) + "</p>")
    return (f"{note}<table><tr><th>rule</th><th>KIP section</th><th>observations</th><th></th>"
            f"<th>what counts</th></tr>{''.join(rows)}</table>"
            f"<p style=\"font-size:13px\">Not judged on their own: {others}</p>")
