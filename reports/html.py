"""Turns a run directory into `report/index.html`: verdict, interactive views, anomalies with proofs, logs.

Views first where people would rather look than read: an interactive timeline of
operations against fault windows (each heal's recovery, every client crash and every
anomaly record marked) and send latency and throughput over time, drawn in the browser by
reports/viewer.js from data inlined into the page (one file, works offline; reports/explore.py).
Then each anomaly and known deviation with its proof in context (reports/proof.py).
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from kipcheck.rundir import config as run_config
from kipcheck.rundir.history import iter_history
from kipcheck.reports.conformance_view import conformance_html
from kipcheck.reports.coverage_view import coverage_html
from kipcheck.reports.explore import fault_windows, flagged_indices, operations, view_data
from kipcheck.reports.proof import proofs_html
from kipcheck.rundir.records import JSONL_NAME

#: a heal's recovery status by the liveness status of the verdict (checks/rules/liveness_rules.py)
RECOVERY_COLORS = {"recovered": "#2a9d3f", "slow": "#d62728", "undecided": "#f0a030", "heal failed": "#888888"}
MEASURES = (("sends", "S", "acknowledged sends on every partition"), ("isr", "I", "full ISR everywhere"),
            ("reads", "R", "reads on every partition"))
VIEWER_JS = Path(__file__).with_name("viewer.js")


def _script_json(data: dict) -> str:
    """JSON safe inside a <script> element (no '</' can close it)."""
    return json.dumps(data, separators=(",", ":")).replace("</", "<\\/")


def _views(data: dict) -> str:
    """The interactive timeline and latency views: canvases, the data and the inlined viewer."""
    return f"""<h2>Timeline</h2>
<p class="legend"><span style="color:#2a9d3f">■ ok</span> <span style="color:#d62728">■ fail</span>
<span style="color:#f0a030">■ info</span> <span style="color:#d6272855;background:#d627281f">&nbsp;fault window&nbsp;</span>
✕ anomaly record <span style="color:#888">✕ known deviation record</span> <span style="color:#c0168c">✕ client crash</span> <span style="color:#ff8c00">○ the proof shown</span>
<button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button><button id="zoom-reset">whole run</button></p>
<p id="view-status">the interactive views need JavaScript</p>
<div class="chart"><canvas id="timeline" width="0" height="0"></canvas></div>
<h2>Latency and throughput</h2>
<div class="chart"><canvas id="latency" width="0" height="0"></canvas></div>
<div id="tooltip"></div>
<script id="kipcheck-data" type="application/json">{_script_json(data)}</script>
<script>{VIEWER_JS.read_text()}</script>"""


def _mixed_windows(records: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, label) of each mixed-version window of a rolling upgrade
    (checks.mixed.mixed_windows), with each roll step's node and release as its label."""
    from kipcheck.checks.mixed import mixed_windows
    steps = [r for r in records if r["f"] == "upgrade" and r["type"] == "invoke"]
    out = []
    for a, b in mixed_windows(records):
        inside = [s["value"] for s in steps if a <= s["time"] <= (b if b is not None else s["time"])]
        label = "mixed: " + ", ".join(f"n{v.get('node')}→{v.get('to')}" for v in inside if v.get("step") == "roll")
        out.append((a / 1e9, end if b is None else b / 1e9, label))
    return out


def _liveness(verdict: dict | None) -> str:
    """The liveness block of the verdict: recovery after each heal against the bound, and crashes."""
    block = (verdict or {}).get("liveness")
    if not block:
        return "<p>not measured</p>"
    esc = html.escape
    parts = ", ".join(f"{esc(k)} {v:g} s" for k, v in block.get("bound_parts", {}).items())
    head = (f"<p>Bound <b>{block['bound']:g} s</b> ({esc(str(block.get('bound_source', '')))}"
            f"{': ' + parts if parts else ''}). Times are seconds from the start of each heal; "
            f"“never”: not within the heal's window (until the next fault or the end of the workload).</p>")

    def cell(entry, m):
        value = entry.get(m)
        if value is None:
            return "<td>-</td>"
        if value == "never":
            missing = esc(", ".join(entry.get("missing", {}).get(m, [])))
            return f"<td title='not recovered: {missing}'>never</td>"
        style = " style='color:#d62728;font-weight:bold'" if value > entry.get("bound", block["bound"]) else ""
        return f"<td{style}>{value:.1f}</td>"

    def row(e):
        healed = "-" if e.get("healed") is None else f"{e['healed']:.1f}"
        color = RECOVERY_COLORS.get(e["status"], "#888")
        return (f"<tr><td>{esc(str(e['fault']))}</td><td>{esc(str(e.get('targets', [])))}</td>"
                f"<td>{e['heal']:.1f}</td><td>{healed}</td>" + "".join(cell(e, m) for m, _, _ in MEASURES)
                + f"<td style='color:{color}'>{esc(e['status'])}</td>"
                  f"<td>{e.get('window', 0):.1f} ({esc(str(e.get('ended_by', '')))})</td></tr>")

    rows = "".join(row(e) for e in block.get("faults", []))
    headers = "".join(f"<th title='{esc(what)}'>{m}</th>" for m, _, what in MEASURES)
    table = ("<table><tr><th>fault</th><th>targets</th><th>heal began (s)</th><th>heal done (s)</th>"
             + headers + "<th>status</th><th>window (s)</th></tr>" + rows + "</table>") if rows else "<p>no heals</p>"
    crashes = block.get("crashes", [])
    crash_rows = "".join(
        f"<tr><td>{c['time']:.1f}</td><td>{esc(str(c.get('f')))}</td><td>{esc(str(c.get('process')))}</td>"
        f"<td>{esc(str(c.get('broker', '-')))}</td><td>{esc(str(c.get('error', '')))}</td><td>{c['index']}</td></tr>"
        for c in crashes)
    total = block.get("client_crashes", 0)
    crash_table = (f"<h3>Client crashes: {total}</h3>"
                   + ("<table><tr><th>time (s)</th><th>operation</th><th>process</th><th>broker</th><th>error</th>"
                      "<th>history index</th></tr>" + crash_rows + "</table>" if crash_rows else "")
                   + (f"<p>… {total - len(crashes)} more</p>" if total > len(crashes) else "")
                   + "<p>Each crashed client was replaced under a new process id.</p>" * bool(total))
    return head + table + crash_table


def _fetch_sources(config: dict) -> str:
    rows = "".join(f"<tr><td>{html.escape(c)}</td><td>{html.escape(str(v.get('rack')))}</td><td>{p}</td><td>{v.get('leader')}</td>"
                   f"<td>{v.get('fetching_from')}{' (follower)' if v.get('fetching_from') != v.get('leader') else ''}</td></tr>"
                   for c, parts in config.get("consumer_fetch_sources", {}).items() for p, v in parts.items())
    return ("<table><tr><th>consumer</th><th>client.rack</th><th>partition</th><th>leader</th><th>fetching from</th></tr>"
            + rows + "</table>") if rows else "<p>not recorded</p>"


def _skipped(config: dict) -> str:
    """What the cluster could not be asked, and why (config.json `skipped`, harness.clients.capabilities)."""
    rows = "".join(f"<tr><td>{html.escape(str(s.get('feature')))}</td><td>{html.escape(str(s.get('reason')))}</td></tr>"
                   for s in config.get("skipped", []))
    return f"<h2>Skipped (the cluster cannot answer)</h2><table><tr><th>feature</th><th>why</th></tr>{rows}</table>" \
        if rows else ""


def _upgrade(config: dict, mixed) -> str:
    """A rolling upgrade's steps and its mixed-version windows (docs/history.md, `upgrade`)."""
    up = config.get("upgrade")
    if not up:
        return ""
    rows = "".join(f"<tr><td>{html.escape(str(s.get('step')))}</td><td>{html.escape(str(s.get('node', '')))}</td>"
                   f"<td>{html.escape(str(s.get('seconds', s.get('to_level', ''))))}</td>"
                   f"<td>{html.escape(str(s.get('error', '')))}</td></tr>" for s in up.get("steps", []))
    spans = "; ".join(f"{a:.1f}–{b:.1f} s" for a, b, _ in mixed) or "none"
    return (f"<h2>Rolling {html.escape(str(up.get('direction', 'upgrade')))} {html.escape(str(up.get('from')))} → "
            f"{html.escape(str(up.get('to')))}</h2><p>completed: {html.escape(str(up.get('completed', '?')))} · "
            f"mixed-version windows (blue on the timeline): {spans} · nodes now: "
            f"{html.escape(json.dumps(up.get('versions', {})))}</p>"
            f"<table><tr><th>step</th><th>node</th><th>seconds / level</th><th>error</th></tr>{rows}</table>")


def write_report(run_dir: Path) -> Path:
    from kipcheck.reports.transactions import transactions_html
    run_dir = Path(run_dir)
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    config = run_config.load(run_dir)
    verdict_path = run_dir / "verdict.json"
    verdict = json.loads(verdict_path.read_text()) if verdict_path.exists() else None
    records = list(iter_history(run_dir / JSONL_NAME)) if (run_dir / JSONL_NAME).exists() else []
    ops = operations(records)
    end = max([r["time"] for r in records] + [0]) / 1e9
    mixed = _mixed_windows(records, end)
    windows = sorted(fault_windows(records, end) + mixed)  # mixed-version windows are marked like faults
    views = (_views(view_data(ops, windows, flagged_indices(verdict), end, (verdict or {}).get("liveness")))
             if ops else "<h2>Timeline</h2><p>no operations</p>")
    for stale in ("timeline.png", "latency.png"):  # pictures of reports before the interactive views
        (out / stale).unlink(missing_ok=True)
    valid = verdict["valid"] if verdict else "not checked"
    badge = {True: ("VALID", "#2a9d3f"), False: ("INVALID", "#d62728")}.get(valid, (str(valid).upper(), "#888"))
    counts = {}
    for r in records:
        counts[f"{r['f']} {r['type']}"] = counts.get(f"{r['f']} {r['type']}", 0) + 1
    logs = sorted((run_dir / "cluster").glob("node-*/*.log")) if (run_dir / "cluster").exists() else []
    log_links = "".join(f'<li><a href="../{html.escape(str(p.relative_to(run_dir)))}">'
                        f'{html.escape(str(p.relative_to(run_dir)))}</a> ({p.stat().st_size // 1024} KiB)</li>'
                        for p in logs)
    schedule = "".join(f"<tr><td>{html.escape(s['kind'])}</td><td>{s['start']:.1f}</td><td>{s['duration']:.1f}</td>"
                       f"<td>{html.escape(json.dumps(s.get('params', {})))}</td></tr>"
                       for s in config.get("schedule", []))
    why = html.escape(str((verdict or {}).get("reason", "")))
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>kipcheck run {html.escape(run_dir.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}}table{{border-collapse:collapse;font-size:13px}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}.badge{{color:#fff;padding:4px 12px;border-radius:4px}}
.chart{{border:1px solid #eee;user-select:none}}canvas{{display:block;cursor:crosshair}}
#tooltip{{position:absolute;display:none;background:#fffff0;border:1px solid #999;padding:4px 8px;font-size:12px;
pointer-events:none;max-width:520px;box-shadow:1px 1px 4px #0003}}#view-status{{font-size:12px;color:#555}}
tr.proof td{{background:#ffe9c7;font-weight:bold}}tr.gap td{{color:#999;text-align:center}}
.example{{border-left:3px solid #d62728;padding-left:10px;margin:12px 0}}ul.faults li.active{{color:#a01010;font-weight:bold}}
table.records code{{font-size:11px;word-break:break-all}}
table.broker-logs pre{{margin:0;font-size:11px;white-space:pre-wrap;word-break:break-all}}
tr.level-WARN td{{background:#fff4d6}}tr.level-ERROR td,tr.level-FATAL td{{background:#ffe0e0}}</style></head><body>
<h1>kipcheck run <code>{html.escape(run_dir.name)}</code> <span class="badge" style="background:{badge[1]}">{badge[0]}</span></h1>
<p>Kafka {html.escape(str(config.get('kafka_version', '?')))} · seed {config.get('seed', '?')} ·
{config.get('duration', '?')} s · mode {html.escape(str(config.get('mode', '?')))} ·
profile {html.escape(str((verdict or {}).get('profile', '?')))} · consumer rack {html.escape(str(config.get('consumer_rack', '-')))}</p>
{f"<p><b>Profile note:</b> {html.escape(str(verdict['profile_note']))}</p>" if (verdict or {}).get('profile_note') else ''}
{f'<p><b>Why:</b> {why}</p>' if why else ''}
{f'<p>Reproduce: <code>{html.escape(config["reproduce"])}</code></p>' if config.get("reproduce") else ''}
{_skipped(config)}
{_upgrade(config, mixed)}
{views}
{transactions_html(records, end)}
<h2>Anomalies</h2>{proofs_html(verdict, records, windows)}
<h2>Known deviations (accepted by the profile)</h2>{proofs_html(verdict, records, windows, known=True)}
<h2>Liveness: recovery after each heal</h2>{_liveness(verdict)}
<h2>KIP conformance (per rule the checker judges)</h2>{conformance_html(verdict)}
<h2>Rule coverage (observations that could have violated each KIP rule)</h2>{coverage_html(verdict)}
<h2>Where consumers fetched from (KIP-392)</h2>{_fetch_sources(config)}
<h2>Faults</h2><table><tr><th>kind</th><th>start (s)</th><th>duration (s)</th><th>params</th></tr>{schedule}</table>
<h2>History</h2><table>{''.join(f'<tr><td>{html.escape(k)}</td><td>{v}</td></tr>' for k, v in sorted(counts.items()))}</table>
<p>Files: <a href="../history.jsonl">history.jsonl</a> · <a href="../verdict.json">verdict.json</a> · <a href="../config.json">config.json</a>{' · <a href="../harness.log">harness.log</a>' if (run_dir / "harness.log").exists() else ''}</p>
<h2>Node logs</h2><ul>{log_links or '<li>none</li>'}</ul>
</body></html>"""
    (out / "index.html").write_text(page)
    if verdict:
        from kipcheck.reports.allure import write_allure_results
        write_allure_results(run_dir, verdict, config)
    return out / "index.html"
