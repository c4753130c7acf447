"""The per-KIP conformance table in HTML: a run's table (report/index.html) and the release
summary's tables side by side (a campaign's summary.html). The tables themselves come from
checks.conformance; this only draws them."""
from __future__ import annotations

import html

from kipcheck.checks.conformance import CONFORMANCE, FAILS, HOLDS, KNOWN, NOT_ASKED, NOT_IN_RELEASE, UNDECIDED

COLORS = {HOLDS: "#2a9d3f", FAILS: "#d62728", KNOWN: "#e69f00", NOT_ASKED: "#888", UNDECIDED: "#6c8ebf",
          NOT_IN_RELEASE: "#bbb"}


def _badge(row: dict | None) -> str:
    if row is None:
        return "<td>no verdict</td>"
    status = row["status"]
    return (f'<td title="{html.escape(row["why"])}"><span style="background:{COLORS[status]};color:#fff;padding:2px 8px;border-radius:4px">'
            f'{html.escape(status)}</span></td>')


def conformance_html(verdict: dict | None) -> str:
    """One row per judged KIP rule: its status and why."""
    table = (verdict or {}).get(CONFORMANCE)
    if not table:
        return "<p>no conformance table (verdict missing or from an older kipcheck)</p>"
    rows = "".join(f"<tr><td>{html.escape(kip)}</td><td><code>{html.escape(rule)}</code></td>"
                   f"<td>{html.escape(row['section'])}</td>{_badge(row)}<td>{html.escape(row['why'])}</td></tr>"
                   for kip, rules in table.items() for rule, row in rules.items())
    return f"<table><tr><th>KIP</th><th>rule</th><th>section</th><th>status</th><th>why</th></tr>{rows}</table>"


def release_summary_html(summary: dict) -> str:
    """checks.conformance.release_summary as a grid: KIP rules down, releases across."""
    releases = summary["releases"]
    head = "".join(f"<th>{html.escape(r)} ({summary['runs'][r]})</th>" for r in releases)
    rows = "".join(f"<tr><td>{html.escape(kip)}</td><td><code>{html.escape(rule)}</code></td>"
                   + "".join(_badge(cells.get(r)) for r in releases) + "</tr>"
                   for kip, rules in summary["rules"].items() for rule, cells in rules.items())
    return f"<table><tr><th>KIP</th><th>rule</th>{head}</tr>{rows}</table>"
