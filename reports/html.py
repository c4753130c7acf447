"""Turns a run directory into `report/index.html`: verdict, anomalies, liveness, pictures, logs.

Pictures first where people would rather look than read: a timeline of operations
against fault windows (with each heal's recovery and every client crash marked), and
send latency and throughput over time.
"""
from __future__ import annotations

import html
import json
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from checks.history import iter_history  # noqa: E402
from reports.coverage_view import coverage_html  # noqa: E402

COLORS = {"ok": "#2a9d3f", "fail": "#d62728", "info": "#f0a030"}
#: a heal's recovery span by the liveness status of the verdict (checks/rules/liveness_rules.py)
RECOVERY_COLORS = {"recovered": "#2a9d3f", "slow": "#d62728", "undecided": "#f0a030", "heal failed": "#888888"}
MEASURES = (("sends", "S", "acknowledged sends on every partition"), ("isr", "I", "full ISR everywhere"),
            ("reads", "R", "reads on every partition"))
CRASH_COLOR = "#c0168c"
CRASH_LABELS = 12  # crashes named on the picture; the table lists them all


def _fault_windows(records: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, label) per fault, from the nemesis' start/stop records."""
    open_, windows = {}, []
    for r in records:
        if r["f"] != "fault" or r["type"] != "ok":
            continue
        v = r["value"]
        key = (v.get("fault"), tuple(v.get("targets", [])))
        if v.get("phase") == "start":
            open_[key] = r["time"] / 1e9
        elif v.get("phase") == "stop":
            for k in [k for k in open_ if k[0] == v.get("fault")]:
                windows.append((open_.pop(k), r["time"] / 1e9, f"{k[0]} {list(k[1])}"))
    windows += [(t, end, f"{k[0]} {list(k[1])}") for k, t in open_.items()]
    return windows


MIXED_COLOR = "#1f5fbf"


def _mixed_windows(records: list[dict], end: float) -> list[tuple[float, float, str]]:
    """(start s, stop s, label) of each mixed-version window of a rolling upgrade
    (harness.upgrade.mixed_windows), with each roll step's node and release as its label."""
    from checks.mixed import mixed_windows
    steps = [r for r in records if r["f"] == "upgrade" and r["type"] == "invoke"]
    out = []
    for a, b in mixed_windows(records):
        inside = [s["value"] for s in steps if a <= s["time"] <= (b if b is not None else s["time"])]
        label = "mixed: " + ", ".join(f"n{v.get('node')}→{v.get('to')}" for v in inside if v.get("step") == "roll")
        out.append((a / 1e9, end if b is None else b / 1e9, label))
    return out


def _mark_upgrade(ax, records: list[dict], mixed) -> None:
    """The mixed-version windows (blue, hatched) and a tick at each upgrade step's start."""
    for i, (a, b, label) in enumerate(mixed):
        ax.axvspan(a, b, facecolor="none", edgecolor=MIXED_COLOR, hatch="//", alpha=0.35, lw=0,
                   label="mixed versions" if i == 0 else None)
        ax.text(a, -0.06, label, transform=ax.get_xaxis_transform(), fontsize=7, va="top", color=MIXED_COLOR,
                clip_on=False)
    for r in records:
        if r["f"] == "upgrade" and r["type"] == "invoke":
            ax.axvline(r["time"] / 1e9, color=MIXED_COLOR, lw=0.8, ls="--")


def _operations(records: list[dict]) -> list[dict]:
    """Pair each completion with its invoke (per process and f: a rebalance's assign may nest in a poll)."""
    pending, ops = {}, []
    for r in records:
        key = (r["process"], r["f"])
        if r["type"] == "invoke":
            pending[key] = r
        elif key in pending:
            inv = pending.pop(key)
            ops.append({"process": r["process"], "f": r["f"], "type": r["type"], "start": inv["time"] / 1e9,
                        "end": r["time"] / 1e9, "index": r["index"], "value": r["value"]})
    return ops


def _shade(ax, windows) -> None:
    for i, (a, b, label) in enumerate(windows):
        ax.axvspan(a, b, color="#d62728", alpha=0.12, lw=0)
        ax.text(a, 1.0, label, transform=ax.get_xaxis_transform(), fontsize=7, va="bottom", color="#a01010",
                rotation=0, clip_on=False)


def _measured(entry: dict, measure: str):
    value = entry.get(measure)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _mark_recoveries(ax, liveness: dict, y: float) -> None:
    """Per heal, a bar on lane `y` from the heal to the last recovery (to the window's end
    when something never recovered), coloured by status; S/I/R where sends, the ISR and
    reads came back; a dotted tick where the bound ran out."""
    left, right = ax.get_xlim()
    for n, entry in enumerate(liveness.get("faults", [])):
        heal, color = entry["heal"], RECOVERY_COLORS.get(entry.get("status"), "#888888")
        times = [t for m, _, _ in MEASURES if (t := _measured(entry, m)) is not None]
        never = any(entry.get(m) == "never" for m, _, _ in MEASURES)
        end = heal + ((entry.get("window") or 0) if never else max(times, default=0))
        ax.barh(y, max(end - heal, 0.05), left=heal, height=0.5, color=color, alpha=0.6, lw=0,
                label="heal → recovery" if n == 0 else None)
        for m, letter, _ in MEASURES:
            t = _measured(entry, m)
            if t is not None:
                ax.text(heal + t, y + 0.3, letter, fontsize=6, ha="center", va="bottom", color=color)
        bound = heal + float(liveness.get("bound", 0))
        if left <= bound <= right:
            ax.plot([bound, bound], [y - 0.4, y + 0.4], ls=":", color="#555555", lw=1)
    ax.set_xlim(left, right)


def _mark_crashes(ax, crashes: list[dict], lane_of: dict) -> None:
    """Client crashes as marks on the lane of the operation they ended, the first few named."""
    xs, ys = [], []
    for i, c in enumerate(crashes):
        y = lane_of.get((c.get("f"), str(c.get("process"))), 0)
        xs.append(c["time"])
        ys.append(y)
        if i < CRASH_LABELS:
            where = f" (broker {c['broker']})" if c.get("broker") is not None else ""
            ax.annotate(f"{str(c.get('error', 'fatal'))[:40]}{where}", (c["time"], y), fontsize=6,
                        color=CRASH_COLOR, xytext=(3, 3), textcoords="offset points")
    if xs:
        ax.scatter(xs, ys, s=60, color=CRASH_COLOR, marker="X", label="client crash", zorder=3)


#: more (operation, process) lanes than this and the timeline shows one lane per operation
#: kind instead (pipelined producers alone make hundreds of processes); anomalies stay marked
MAX_PROCESS_LANES = 40


def _lanes(ops: list[dict]) -> tuple[dict, list[str]]:
    """{(f, process): lane} and the lane labels: one lane per process when there are few,
    else one per operation kind, labelled with how many processes it holds."""
    keys = sorted({(o["f"], str(o["process"])) for o in ops if o["process"] != "nemesis"},
                  key=lambda x: (x[0], int(x[1]) if x[1].isdigit() else 0))
    if len(keys) <= MAX_PROCESS_LANES:
        return {k: i for i, k in enumerate(keys)}, [f"{f} p{p}" for f, p in keys]
    kinds = sorted({f for f, _ in keys})
    count = {f: sum(1 for g, _ in keys if g == f) for f in kinds}
    lane = {f: i for i, f in enumerate(kinds)}
    return {k: lane[k[0]] for k in keys}, [f"{f} ({count[f]} processes)" for f in kinds]


def timeline_png(ops: list[dict], windows, anomaly_indices: set[int], path: Path,
                 liveness: dict | None = None, records: list[dict] | None = None, mixed=()) -> None:
    lane_of, lane_labels = _lanes(ops)
    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.35 * len(lane_labels) + 1.5)))
    for type_, color in COLORS.items():
        sel = [o for o in ops if o["type"] == type_ and o["process"] != "nemesis"]
        ax.scatter([o["end"] for o in sel], [lane_of[(o["f"], str(o["process"]))] for o in sel], s=4, color=color,
                   label=type_, marker="|")
    bad = [o for o in ops if o["index"] in anomaly_indices and o["process"] != "nemesis"]
    if bad:
        ax.scatter([o["end"] for o in bad], [lane_of[(o["f"], str(o["process"]))] for o in bad], s=40,
                   color="black", marker="x", label="anomaly")
    _shade(ax, windows)
    if mixed or records:
        _mark_upgrade(ax, records or [], mixed)
    ticks, labels = list(range(len(lane_labels))), lane_labels
    if liveness:
        _mark_crashes(ax, liveness.get("crashes", []), lane_of)
        if liveness.get("faults"):
            _mark_recoveries(ax, liveness, -1)
            ticks, labels = [-1, *ticks], ["recovery after heal", *labels]
            ax.set_ylim(-1.6, max(len(lane_labels) - 0.4, 0.6))
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.set_xlabel("seconds since run start")
    ax.legend(loc="upper right", fontsize=7, ncols=6)
    ax.set_title("Operations by process against fault windows (red); after each heal, the time to recover "
                 "(bottom lane: S sends, I ISR, R reads; dotted: the bound)", fontsize=10, pad=14)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def latency_png(ops: list[dict], windows, path: Path) -> None:
    sends = [o for o in ops if o["f"] == "send"]
    polls = [o for o in ops if o["f"] == "poll" and o["type"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(12, 5.5), sharex=True)
    for type_, color in COLORS.items():
        sel = [o for o in sends if o["type"] == type_]
        ax1.scatter([o["start"] for o in sel], [(o["end"] - o["start"]) * 1000 for o in sel], s=3, color=color,
                    label=f"send {type_}")
    ax1.set_yscale("log")
    ax1.set_ylabel("send latency (ms)")
    ax1.legend(fontsize=7, loc="upper right")
    _shade(ax1, windows)
    per_sec_sent, per_sec_read = defaultdict(int), defaultdict(int)
    for o in sends:
        if o["type"] == "ok":
            per_sec_sent[int(o["end"])] += 1
    for o in polls:
        per_sec_read[int(o["end"])] += len(o["value"].get("records", []))
    xs = range(0, int(max([o["end"] for o in ops] + [1])) + 1)
    ax2.plot(xs, [per_sec_sent[x] for x in xs], label="acknowledged sends/s", color="#1f77b4")
    ax2.plot(xs, [per_sec_read[x] for x in xs], label="records read/s", color="#9467bd")
    ax2.set_ylabel("per second")
    ax2.set_xlabel("seconds since run start")
    ax2.legend(fontsize=7, loc="upper right")
    for a, b, _ in windows:
        ax2.axvspan(a, b, color="#d62728", alpha=0.12, lw=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _examples_table(section: dict, limit: int = 20) -> str:
    rows = []
    for name, examples in section.items():
        for ex in examples[:limit]:
            rows.append(f"<tr><td>{html.escape(name)}</td><td>{html.escape(str(ex.get('indices', [])))}</td>"
                        f"<td>{html.escape(str(ex.get('message', ex)))}</td></tr>")
        if len(examples) > limit:
            rows.append(f"<tr><td>{html.escape(name)}</td><td colspan=2>… {len(examples) - limit} more</td></tr>")
    if not rows:
        return "<p>none</p>"
    return "<table><tr><th>anomaly</th><th>history indices</th><th>what</th></tr>" + "".join(rows) + "</table>"


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
        style = " style='color:#d62728;font-weight:bold'" if value > block["bound"] else ""
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
    """What the cluster could not be asked, and why (config.json `skipped`, harness.capabilities)."""
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
    run_dir = Path(run_dir)
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    config = json.loads((run_dir / "config.json").read_text()) if (run_dir / "config.json").exists() else {}
    verdict_path = run_dir / "verdict.json"
    verdict = json.loads(verdict_path.read_text()) if verdict_path.exists() else None
    records = list(iter_history(run_dir / "history.jsonl")) if (run_dir / "history.jsonl").exists() else []
    ops = _operations(records)
    end = max([r["time"] for r in records] + [0]) / 1e9
    windows = _fault_windows(records, end)
    mixed = _mixed_windows(records, end)
    flagged = set()
    for examples in (verdict or {}).get("anomalies", {}).values():
        for ex in examples:
            flagged.update(ex.get("indices", []))
    if ops:
        timeline_png(ops, windows, flagged, out / "timeline.png", (verdict or {}).get("liveness"),
                     [r for r in records if r["f"] == "upgrade"], mixed)
        latency_png(ops, windows, out / "latency.png")
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
img{{max-width:100%;border:1px solid #eee}}</style></head><body>
<h1>kipcheck run <code>{html.escape(run_dir.name)}</code> <span class="badge" style="background:{badge[1]}">{badge[0]}</span></h1>
<p>Kafka {html.escape(str(config.get('kafka_version', '?')))} · seed {config.get('seed', '?')} ·
{config.get('duration', '?')} s · mode {html.escape(str(config.get('mode', '?')))} ·
profile {html.escape(str((verdict or {}).get('profile', '?')))} · consumer rack {html.escape(str(config.get('consumer_rack', '-')))}</p>
{f"<p><b>Profile note:</b> {html.escape(str(verdict['profile_note']))}</p>" if (verdict or {}).get('profile_note') else ''}
{f'<p><b>Why:</b> {why}</p>' if why else ''}
{f'<p>Reproduce: <code>{html.escape(config["reproduce"])}</code></p>' if config.get("reproduce") else ''}
{_skipped(config)}
{_upgrade(config, mixed)}
<h2>Timeline</h2>{'<img src="timeline.png" alt="operations against fault windows">' if ops else '<p>no operations</p>'}
<h2>Latency and throughput</h2>{'<img src="latency.png" alt="send latency and throughput">' if ops else ''}
<h2>Anomalies</h2>{_examples_table((verdict or {}).get('anomalies', {}))}
<h2>Known deviations (accepted by the profile)</h2>{_examples_table((verdict or {}).get('known', {}))}
<h2>Liveness: recovery after each heal</h2>{_liveness(verdict)}
<h2>Rule coverage (observations that could have violated each KIP rule)</h2>{coverage_html(verdict)}
<h2>Where consumers fetched from (KIP-392)</h2>{_fetch_sources(config)}
<h2>Faults</h2><table><tr><th>kind</th><th>start (s)</th><th>duration (s)</th><th>params</th></tr>{schedule}</table>
<h2>History</h2><table>{''.join(f'<tr><td>{html.escape(k)}</td><td>{v}</td></tr>' for k, v in sorted(counts.items()))}</table>
<p>Files: <a href="../history.jsonl">history.jsonl</a> · <a href="../verdict.json">verdict.json</a> · <a href="../config.json">config.json</a>{' · <a href="../harness.log">harness.log</a>' if (run_dir / "harness.log").exists() else ''}</p>
<h2>Node logs</h2><ul>{log_links or '<li>none</li>'}</ul>
</body></html>"""
    (out / "index.html").write_text(page)
    if verdict:
        from reports.allure import write_allure_results
        write_allure_results(run_dir, verdict, config)
    return out / "index.html"
