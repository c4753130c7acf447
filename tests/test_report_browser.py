"""The HTML report as people see it: rendered in headless Chromium (Debian `chromium`) from
the file alone, with the network unreachable. For a valid run and an invalid one (a read
forged away, judged by the real checker) the DOM after the scripts ran must show the
verdict, a timeline canvas that drew every operation and the fault window, and (invalid)
each anomaly with its proof records in context, and hovering a record must name it; screenshots
go to tests/artifacts/."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kipcheck.checks.api import check, write_verdict
from kipcheck.rundir.history import write_jsonl
from kipcheck.reports.html import write_report
from tests.support.liveness import Hist, kill_and_heal

ROOT = Path(__file__).resolve().parent.parent
SHOTS = ROOT / "tests" / "artifacts"


def history(forge_lost_read: bool) -> list[dict]:
    """30 s of sends and polls on two partitions, broker 3 killed from 1 s to 10 s."""
    h = Hist()
    kill_and_heal(h, 10)
    for tenth in range(110, 280, 5):
        for p in (0, 1):
            h.at(tenth / 10).send(p, process=p)
        if tenth % 20 == 0:
            h.poll([0, 1])
    h.at(12).all_metadata(full=True)
    h.poll([0, 1])
    h.at(29.5)  # the final reads: a new process reads every record again, in one second
    h.read_to = {p: 0 for p in h.read_to}
    h.poll([0, 1], process=99)
    h.at(30).fault("heal-all", "stop", targets=())
    if forge_lost_read:  # the consumer never sees one record in the middle of partition 0
        poll = next(r for r in h.records[len(h.records) // 2:]
                    if r["f"] == "poll" and r["type"] == "ok" and len(r["value"]["records"]) >= 3)
        poll["value"]["records"] = [e for e in poll["value"]["records"] if (e[1], e[2]) != tuple(
            next(e for e in poll["value"]["records"] if e[1] == 0)[1:3])]
    return h.records


#: history time 0 of the runs here, as config.json's `started` says (UTC)
STARTED = "2026-11-20T10:00:00+0000"


def run_dir(tmp_path: Path, name: str, forge: bool) -> tuple[Path, dict, list[dict]]:
    run = tmp_path / name
    run.mkdir()
    records = history(forge)
    write_jsonl(records, run / "history.jsonl")
    (run / "config.json").write_text(json.dumps({"kafka_version": "4.3.1", "seed": 7, "duration": 30,
                                                 "reproduce": f"kipcheck run --seed 7 # {name}", "started": STARTED}))
    (run / "cluster" / "node-1").mkdir(parents=True)  # a WARN on partition 0 every second (rundir/broker_logs.py)
    (run / "cluster" / "node-1" / "server.log").write_text("".join(
        f"[2026-11-20 10:00:{s:02d},500] WARN [Partition t-0 broker=1] browser line {s} <i>\n" for s in range(31)))
    verdict = check(run)
    write_verdict(verdict, run)
    write_report(run)
    return run, verdict, records


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("Debian's chromium is missing: run scripts/install.sh --allure")
    return found


def render(page: Path, shot: Path, query: str = "", height: int = 1600) -> str:
    """The page's DOM after its scripts ran, and a screenshot; any network request fails
    (an unreachable proxy), so the page must carry everything it needs."""
    browser = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
               "--proxy-server=http://127.0.0.1:9", f"--window-size=1400,{height}"]
    url = page.as_uri() + query
    SHOTS.mkdir(exist_ok=True)
    subprocess.run([*browser, f"--screenshot={shot}", url], capture_output=True, timeout=180)
    assert shot.exists() and shot.stat().st_size > 20_000
    return subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout


def canvas(dom: str, name: str) -> dict:
    tag = re.search(rf'<canvas id="{name}"[^>]*>', dom)
    assert tag, f"no {name} canvas"
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag.group(0)))


def operations(records: list[dict]) -> int:
    return sum(1 for r in records if r["type"] != "invoke" and r["process"] != "nemesis")


def per_second(records: list[dict], f: str) -> dict[int, int]:
    """Acknowledged sends, or records polled, per whole second of history time (ns)."""
    out: dict[int, int] = {}
    for r in records:
        if r["type"] == "ok" and r["f"] == f:
            s = r["time"] // 1_000_000_000
            out[s] = out.get(s, 0) + (1 if f == "send" else len(r["value"]["records"]))
    return out


def test_valid_run_shows_the_verdict_timeline_and_fault_window(tmp_path):
    run, verdict, records = run_dir(tmp_path, "valid-run", forge=False)
    assert verdict["valid"] is True, {k: v[:1] for k, v in verdict["anomalies"].items() if v}
    page = run / "report" / "index.html"
    text = page.read_text()
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=', text), "the page loads something from outside"
    dom = render(page, SHOTS / "report-valid.png")
    assert 'data-viewer="ready"' in dom, "the viewer script did not finish"
    assert ">VALID</span>" in dom and "kipcheck run --seed 7 # valid-run" in dom
    timeline = canvas(dom, "timeline")
    assert int(timeline["width"]) > 600 and int(timeline["height"]) > 50
    assert int(timeline["data-operations-in-view"]) == operations(records)
    assert timeline["data-fault-windows"] == "1"  # the kill (1 s to 10 s); heal-all stops it at the end
    latency = canvas(dom, "latency")
    assert int(latency["height"]) > 100
    # the per-second chart is scaled to the seconds with sends; the final reads run off its top
    sent, read = per_second(records, "send"), per_second(records, "poll")
    last_send = max(sent)
    assert int(latency["data-throughput-peak"]) == max(*sent.values(), *(n for s, n in read.items() if s <= last_send))
    assert int(latency["data-read-after-sends"]) == max(n for s, n in read.items() if s > last_send) > 3 * max(sent.values())
    anomalies = dom.split("<h2>Anomalies</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<p>none</p>" in anomalies


def test_invalid_run_shows_each_anomaly_with_its_proof_in_context(tmp_path):
    run, verdict, records = run_dir(tmp_path, "invalid-run", forge=True)
    found = {name: examples for name, examples in verdict["anomalies"].items() if examples}
    assert verdict["valid"] is False and found, "the forged read was not flagged"
    first = next(iter(found))
    dom = render(run / "report" / "index.html", SHOTS / "report-invalid.png", f"?show={first}-0", height=2400)
    assert 'data-viewer="ready"' in dom and ">INVALID</span>" in dom
    timeline = canvas(dom, "timeline")
    assert int(timeline["data-operations-in-view"]) >= 1 and int(timeline["width"]) > 600
    proof_indices = {i for examples in found.values() for ex in examples for i in ex["indices"]}
    assert int(timeline["data-anomaly-records-in-view"]) >= 1
    # ?show= opened the first example: the view zoomed onto its proof and rings its operations
    shown = found[first][0]["indices"]
    assert 1 <= int(timeline["data-proof-operations-ringed"]) <= len(shown)
    assert re.search(r'id="view-status">(\d+\.\d+)–(\d+\.\d+) s', dom).group(2) != "30.00"
    anomalies = dom.split("<h2>Anomalies</h2>", 1)[1].split("<h2>Known", 1)[0]
    for name, examples in found.items():
        assert f'id="anomaly-{name}"' in anomalies
        for ex in examples[:10]:
            assert ex["message"].replace("'", "&#x27;").replace('"', "&quot;")[:40] in anomalies \
                or ex["message"][:40] in anomalies
            for i in ex["indices"]:  # each proof record, highlighted, with its neighbours
                assert re.search(rf"<tr class=\"proof\" data-index=\"{i}\">", anomalies), (name, i)
                for j in (i - 1, i + 1):
                    if 0 <= j < len(records):
                        assert f'data-index="{j}"' in anomalies
    assert "Fault windows around the proof" in anomalies or "no fault window within" in anomalies
    assert proof_indices <= {r["index"] for r in records}
    # the broker's log lines naming the partition around the proof, open (WARNs), escaped
    assert re.search(r"<details class=\"broker-logs\" open=\"\">.*browser line \d+ &lt;i&gt;", anomalies, re.S)


HOVER = """<script>window.addEventListener("load", () => {
  const hover = (canvas, [x, y]) => {
    document.getElementById(canvas).dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
    return document.getElementById("tooltip").innerText;
  };
  document.body.dataset.hover = hover("timeline", window.kipcheckViewer.pointOf(%d));
  document.body.dataset.hoverLatency = hover("latency", window.kipcheckViewer.latencyPointOf(%d));
});</script></body>"""


def test_hovering_an_anomaly_record_names_the_operation_and_the_anomaly(tmp_path):
    run, verdict, records = run_dir(tmp_path, "hover-run", forge=True)
    name, examples = next((n, e) for n, e in verdict["anomalies"].items() if e)
    completion = next(i for i in examples[0]["indices"] if records[i]["type"] != "invoke")
    send = next(i for i in examples[0]["indices"] if records[i]["type"] == "ok" and records[i]["f"] == "send")
    page = run / "report" / "index.html"
    probe = page.with_name("hover.html")  # the report plus a script that moves the mouse onto the records
    probe.write_text(page.read_text().replace("</body>", HOVER % (completion, send)))
    dom = render(probe, tmp_path / "hover.png")
    hover, latency = (re.search(rf'data-{key}="([^"]*)"', dom) for key in ("hover", "hover-latency"))
    assert hover and latency, "the tooltip script did not run"
    text = hover.group(1)
    assert f"history index {completion}" in text and "proof of: " in text and name in text
    assert f"{records[completion]['f']} {records[completion]['type']}" in text
    assert "send ok" in latency.group(1) and f"history index {send}" in latency.group(1)


def test_known_deviation_names_the_kafka_class_and_method(tmp_path):
    from kipcheck.checks.engine_local import check_records
    from kipcheck.reports.proof import proofs_html
    from tests.support.histories import fetch, history as fetches
    # records above the reported HWM that no later answer contradicts: known under kafka-4.3
    records = fetches(fetch(8, records=[8, 9, 10], current_leader_epoch=3))
    verdict = check_records(records, profile="kafka-4.3")
    assert verdict["counts"]["by_deviation"] == {"response-hwm-sampled-before-read": {"uncommitted-read": 1}}
    text = proofs_html(verdict, records, [(0.0, 1e-8, "kill [3]")], known=True)
    assert "accepted as: <code>response-hwm-sampled-before-read</code>" in text
    assert "kafka.cluster.Partition.readRecords" in text and "(active during the proof)" in text
    assert "follower-hwm-follows-leader" not in text  # a deviation of the profile that accepted nothing here
    # under the KIP text the same records are an anomaly, and no evidence is claimed for it
    strict = check_records(records, profile="kip")
    assert strict["anomalies"]["uncommitted-read"] and strict["counts"]["by_deviation"] == {}
    assert "Partition.readRecords" not in proofs_html(strict, records, [], known=False)