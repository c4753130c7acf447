"""A campaign's summary: summary.json (machines), summary.html (people: a verdict grid per
Kafka version, fault mix x seed, then one row per run with its anomalies, known deviations,
liveness, report link and the command that reproduces it) and junit.xml (CI systems: one
test case per run, the anomalies as its failure text)."""
from __future__ import annotations

import html
import json
import os
from pathlib import Path
from xml.etree import ElementTree as ET

from kipcheck.checks.conformance import release_summary, summary_markdown
from kipcheck.reports.conformance_view import release_summary_html

COLORS = {"VALID": "#2a9d3f", "INVALID": "#d62728", "UNKNOWN": "#888", "ERROR": "#7b3fa0", "NOT RUN": "#ccc"}


def outcome(row: dict) -> str:
    if row["status"] == "error":
        return "ERROR"
    v = row.get("verdict")
    if v is None:
        return "NOT RUN"
    return {True: "VALID", False: "INVALID"}.get(v["valid"], "UNKNOWN")


def _flagged(verdict: dict | None, section: str) -> dict[str, int]:
    if not verdict:
        return {}
    return {n: verdict["counts"][section][n] for n, ex in verdict.get(section, {}).items() if ex}


def write_summary(directory: Path, rows: list[dict], engine: str) -> dict:
    summary = {"engine": engine, "runs": [
        {**{k: r[k] for k in ("key", "seed", "faults", "kafka_version", "status", "error", "run_dir", "reproduce")},
         "outcome": outcome(r), "anomalies": _flagged(r["verdict"], "anomalies"),
         "known": _flagged(r["verdict"], "known"), "profile": (r["verdict"] or {}).get("profile"),
         "liveness": (r["verdict"] or {}).get("liveness")} for r in rows]}
    totals: dict[str, int] = {}
    for r in summary["runs"]:
        totals[r["outcome"]] = totals.get(r["outcome"], 0) + 1
    summary["totals"] = totals
    summary["conformance"] = write_release_summary(directory, release_columns(rows))
    (directory / "summary.json").write_text(json.dumps(summary, indent=2))
    (directory / "summary.html").write_text(_html(directory, summary))
    _junit(directory / "junit.xml", summary)
    return summary


def release_columns(rows: list[dict]) -> dict[str, list[dict]]:
    """The checked runs' verdicts per Kafka release (column label: the version, or "default")."""
    columns: dict[str, list[dict]] = {}
    for r in rows:
        columns.setdefault(str(r.get("kafka_version") or "default"), []).append(r.get("verdict"))
    return columns


def write_release_summary(directory: Path, columns: dict[str, list[dict]], name: str = "summary") -> dict:
    """Which KIP rules each release conforms to (checks.conformance.release_summary): written
    as `name`.md beside the other summary files; returned for `name`.json."""
    release = release_summary(columns)
    (directory / f"{name}.md").write_text(summary_markdown(release))
    return release


def _link(directory: Path, run_dir: str | None) -> str:
    if not run_dir:
        return ""
    rel = os.path.relpath(Path(run_dir) / "report" / "index.html", directory)
    return f'<a href="{html.escape(rel)}">report</a>'


def _grid(runs: list[dict]) -> str:
    """Per Kafka version: fault mixes down, seeds across, one coloured cell per run."""
    out = []
    for version in dict.fromkeys(r["kafka_version"] for r in runs):
        mine = [r for r in runs if r["kafka_version"] == version]
        seeds = list(dict.fromkeys(r["seed"] for r in mine))
        cells = {(r["faults"], r["seed"]): r for r in mine}
        body = "".join(
            f"<tr><th>{html.escape(f)}</th>" + "".join(
                f'<td title="{html.escape(cells[(f, s)]["outcome"])}" style="background:'
                f'{COLORS[cells[(f, s)]["outcome"]]};width:26px"></td>' if (f, s) in cells else "<td></td>"
                for s in seeds) + "</tr>"
            for f in dict.fromkeys(r["faults"] for r in mine))
        out.append(f"<h3>Kafka {html.escape(str(version or 'default'))}</h3><table><tr><th>faults \\ seed</th>"
                   + "".join(f"<th>{s}</th>" for s in seeds) + f"</tr>{body}</table>")
    return "".join(out)


def _html(directory: Path, summary: dict) -> str:
    runs = summary["runs"]
    legend = " ".join(f'<span class="b" style="background:{c}">{k} {summary["totals"].get(k, 0)}</span>'
                      for k, c in COLORS.items() if summary["totals"].get(k))
    rows = "".join(
        f'<tr><td><span class="b" style="background:{COLORS[r["outcome"]]}">{r["outcome"]}</span></td>'
        f'<td>{html.escape(str(r["kafka_version"] or "default"))}</td><td>{html.escape(r["faults"])}</td>'
        f'<td>{r["seed"]}</td><td>{html.escape(", ".join(f"{k}: {n}" for k, n in r["anomalies"].items()) or r["error"] or "")}</td>'
        f'<td>{html.escape(", ".join(f"{k}: {n}" for k, n in r["known"].items()))}</td>'
        f'<td>{html.escape(_liveness_text(r["liveness"]))}</td>'
        f'<td>{_link(directory, r["run_dir"])}</td><td><code>{html.escape(r["reproduce"])}</code></td></tr>'
        for r in runs)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>kipcheck campaign {html.escape(directory.name)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em}}table{{border-collapse:collapse;font-size:13px;margin-bottom:1em}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}.b{{color:#fff;padding:2px 8px;border-radius:4px}}</style>
</head><body><h1>kipcheck campaign <code>{html.escape(directory.name)}</code></h1>
<p>{len(runs)} runs, checked in one {html.escape(summary["engine"])} job. {legend}</p>
<h2>Verdicts</h2>{_grid(runs)}
<h2>KIP conformance per release</h2>{release_summary_html(summary["conformance"])}
<p style="font-size:13px">Each release's runs together: fails (an anomaly of that rule), known deviation, holds
(observed, no anomaly), not asked (no observation), not in this release. Also <a href="summary.md">summary.md</a>.</p>
<h2>Runs</h2><table><tr><th>verdict</th><th>Kafka</th><th>faults</th><th>seed</th><th>anomalies (or error)</th>
<th>known deviations</th><th>liveness</th><th></th><th>reproduce</th></tr>{rows}</table>
<p><a href="summary.json">summary.json</a> · <a href="junit.xml">junit.xml</a> · <a href="campaign.json">campaign.json</a></p>
</body></html>"""


def _liveness_text(liveness) -> str:
    """A short line from the verdict's liveness block, whatever its detail (absent: empty)."""
    if not liveness:
        return ""
    if isinstance(liveness, dict):
        return ", ".join(f"{k}: {v}" for k, v in liveness.items() if not isinstance(v, (list, dict)))
    return str(liveness)


def _junit(path: Path, summary: dict) -> None:
    runs = summary["runs"]
    failures = sum(r["outcome"] == "INVALID" for r in runs)
    errors = sum(r["outcome"] == "ERROR" for r in runs)
    skipped = sum(r["outcome"] in ("UNKNOWN", "NOT RUN") for r in runs)
    suite = ET.Element("testsuite", name="kipcheck-campaign", tests=str(len(runs)), failures=str(failures),
                       errors=str(errors), skipped=str(skipped))
    for r in runs:
        case = ET.SubElement(suite, "testcase", classname=f"kafka-{r['kafka_version'] or 'default'}.{r['faults']}",
                             name=f"seed-{r['seed']}")
        if r["outcome"] == "INVALID":
            names = ", ".join(f"{k} ({n})" for k, n in r["anomalies"].items())
            failure = ET.SubElement(case, "failure", message=f"anomalies: {names}")
            failure.text = _anomaly_text(r) + f"\nreproduce: {r['reproduce']}"
        elif r["outcome"] == "ERROR":
            ET.SubElement(case, "error", message=r["error"] or "error").text = f"reproduce: {r['reproduce']}"
        elif r["outcome"] in ("UNKNOWN", "NOT RUN"):
            ET.SubElement(case, "skipped", message=f"verdict {r['outcome'].lower()}")
        ET.SubElement(case, "system-out").text = f"run directory: {r['run_dir']}\nreproduce: {r['reproduce']}"
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)


def _anomaly_text(row: dict) -> str:
    """The first proofs of each anomaly, from the run's verdict.json."""
    try:
        verdict = json.loads((Path(row["run_dir"]) / "verdict.json").read_text())
    except (OSError, TypeError, ValueError):
        return ""
    lines = []
    for name, examples in verdict.get("anomalies", {}).items():
        for ex in examples[:3]:
            lines.append(f"{name}: indices {ex.get('indices')}: {ex.get('message')}")
    return "\n".join(lines)
