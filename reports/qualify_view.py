"""qualify.html: a qualification at a glance. Regressions first, each with its proof, the brokers'
log lines (reports.proof's block) and the command that reproduces its run; then a bar per anomaly
family, the release beside the baseline, and what was not run or dropped to fit the budget. The
per-KIP tables side by side are the campaign summary's (summary.html, linked)."""
from __future__ import annotations

import html
from pathlib import Path

from kipcheck.reports.proof import broker_logs_html

esc = html.escape
RELEASE, BASELINE = "#d62728", "#1f77b4"


def _bars(families: dict[str, dict[str, int]], version: str, baseline: str) -> str:
    """One row per family: two horizontal bars (release, baseline), to one linear scale."""
    if not families:
        return "<p>No anomaly on either release.</p>"
    top = max(max(c.values()) for c in families.values()) or 1
    rows = []
    for name, counts in families.items():
        bars = "".join(
            f"<div class='bar' style='width:{max(2, 300 * counts.get(v, 0) / top):.0f}px;background:{color}' "
            f"title='{esc(v)}: {counts.get(v, 0)}'></div><span class='n'>{counts.get(v, 0)}</span><br>"
            for v, color in ((version, RELEASE), (baseline, BASELINE)))
        rows.append(f"<tr><td>{esc(name)}</td><td>{bars}</td></tr>")
    legend = (f"<span class='key' style='background:{RELEASE}'></span>{esc(version)} "
              f"<span class='key' style='background:{BASELINE}'></span>{esc(baseline)}")
    return f"<p>{legend}</p><table class='families'>{''.join(rows)}</table>"


def _regression(g: dict) -> str:
    ex = g.get("example") or {}
    return (f"<div class='regression'><h3>{esc(g['anomaly'])}: {g['count']} in {g['runs']} run(s)</h3>"
            f"<p>{esc(str(ex.get('message', '')))}</p>"
            f"<p>proof: history indices {esc(str(ex.get('indices')))} of <code>{esc(str(g['run_dir']))}</code></p>"
            f"{broker_logs_html(ex.get('broker_logs'))}"
            f"<p>reproduce: <code>{esc(g['reproduce'])}</code></p></div>")


def write_qualify_html(directory: Path, result: dict) -> Path:
    version, baseline = result["version"], result["baseline"]
    regressions = "".join(_regression(g) for g in result["regressions"]) or \
        "<p class='ok'>No regression: every anomaly family on the release is on the baseline too.</p>"
    shared = (f"<p>On both releases (not regressions): {esc(', '.join(result['shared']))}.</p>"
              if result["shared"] else "")
    lists = "".join(f"<h2>{title}</h2><ul>{''.join(f'<li>{esc(i)}</li>' for i in items)}</ul>"
                    for title, items in (("Not run", result["skipped"]), ("Dropped to fit the budget", result["dropped"]))
                    if items)
    bars = _bars(result.get("families") or {}, version, baseline)
    plan = "".join(f"<tr><td>{esc(s['step'])}</td><td>{esc(s['faults'])}</td><td>{esc(s['reaches'])}</td></tr>"
                   for s in result["plan"])
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>kipcheck qualify {esc(version)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}
.regression{{border-left:6px solid {RELEASE};padding:2px 12px;margin:1em 0;background:#fff5f5}}
.ok{{border-left:6px solid #2a9d3f;padding:6px 12px;background:#f3fbf4}}
.bar{{display:inline-block;height:11px;margin:1px 4px 1px 0;vertical-align:middle}}.n{{font-size:12px}}
.key{{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:middle}}pre{{margin:0;white-space:pre-wrap}}</style>
</head><body><h1>Kafka {esc(version)} qualified against {esc(baseline)}</h1>
<p>{result['runs']} runs ({result['errors']} errored) in {result['seconds'] / 60:.1f} min of a
{result['budget'] / 60:.0f} min budget. The per-KIP tables side by side: <a href="summary.html">summary.html</a>.</p>
<h2>Regressions</h2>{regressions}{shared}
<h2>Anomalies per family</h2>{bars}
{lists}<h2>The plan</h2><table><tr><th>step</th><th>faults</th><th>reaches</th></tr>{plan}</table>
<p><a href="qualify.json">qualify.json</a> · <a href="qualify.md">qualify.md</a></p></body></html>"""
    path = directory / "qualify.html"
    path.write_text(page)
    return path
