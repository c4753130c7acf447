"""Allure results for a run: one test case per anomaly name, so a nightly job's Allure
dashboard shows which KIP rules held across runs. Render with `allure generate`
(npm package `allure`, or allure-commandline) on `runs/<id>/allure-results`.
"""
from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

# which KIP each anomaly speaks for (Allure "feature" label)
FEATURE = {
    "lost-write": "durability", "duplicate": "durability", "inconsistent-offset": "durability",
    "nonmonotonic-poll": "consumer order", "poll-skip": "consumer order",
    "uncommitted-read": "KIP-392", "wrong-fetch-error": "KIP-392", "preferred-replica-violation": "KIP-392",
    "hwm-regression": "KIP-1166", "hwm-propagation-delay": "KIP-1166",
    "fetch-session-violation": "KIP-227", "tiered-offset-violation": "KIP-1023",
    "slow-recovery": "liveness", "client-crash-loop": "liveness",
}


def write_allure_results(run_dir: Path, verdict: dict, config: dict) -> Path:
    out = Path(run_dir) / "allure-results"
    out.mkdir(exist_ok=True)
    start = int(Path(run_dir, "config.json").stat().st_mtime * 1000) if Path(run_dir, "config.json").exists() else 0
    attachments = []
    for png in ("timeline.png", "latency.png"):
        src = Path(run_dir) / "report" / png
        if src.exists():
            name = f"{uuid.uuid4()}-attachment.png"
            shutil.copy(src, out / name)
            attachments.append({"name": png, "source": name, "type": "image/png"})
    for name, examples in verdict.get("anomalies", {}).items():
        known = verdict.get("known", {}).get(name, [])
        status = "failed" if examples else ("passed" if verdict.get("valid") is not None else "skipped")
        body = json.dumps({"anomalies": examples[:50], "known": known[:50]}, indent=1)
        detail = f"{uuid.uuid4()}-attachment.json"
        (out / detail).write_text(body)
        result = {
            "uuid": str(uuid.uuid4()), "historyId": f"kipcheck:{name}", "name": name,
            "fullName": f"kipcheck.{FEATURE.get(name, 'other')}.{name}", "status": status,
            "statusDetails": {"message": f"{len(examples)} anomalies, {len(known)} known deviations"},
            "stage": "finished", "start": start, "stop": start,
            "labels": [{"name": "feature", "value": FEATURE.get(name, "other")},
                       {"name": "suite", "value": f"Kafka {config.get('kafka_version', '?')}"},
                       {"name": "tag", "value": f"seed {config.get('seed')}"}],
            "parameters": [{"name": "kafka_version", "value": str(config.get("kafka_version"))},
                           {"name": "profile", "value": str(verdict.get("profile"))}],
            "attachments": [{"name": "examples", "source": detail, "type": "application/json"}, *attachments],
        }
        (out / f"{result['uuid']}-result.json").write_text(json.dumps(result))
    return out
