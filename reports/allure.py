"""Allure results, through allure-python-commons (the library under allure-pytest).

- `write_allure_results`: `kipcheck run` writes one Allure test per anomaly name into
  `runs/<id>/allure-results`, so a nightly job's dashboard shows which KIP rules held across runs.
- `report_to_current_test`: a pytest test's verdict on the Allure test that allure-pytest is
  recording (`pytest --alluredir DIR`): anomalies as failed steps with their proofs attached,
  the fault schedule, a history excerpt and node logs as attachments, version and seed as
  parameters. Without `--alluredir` every call here does nothing.

Render either with the Allure command line: `allure generate DIR -o REPORT`
(npm `allure-commandline`; `scripts/install.sh --allure` installs it).
"""
from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from allure_commons.logger import AllureFileLogger
from allure_commons.model2 import (Attachment, Label, Parameter, Status, StatusDetails, TestResult,
                                   TestStepResult)
from allure_commons.types import AttachmentType

from kipcheck.rundir import config as run_config

# which KIP each anomaly speaks for (Allure "feature" label)
FEATURE = {
    "lost-write": "durability", "duplicate": "durability", "inconsistent-offset": "durability",
    "nonmonotonic-poll": "consumer order", "poll-skip": "consumer order",
    "uncommitted-read": "KIP-392", "wrong-fetch-error": "KIP-392", "preferred-replica-violation": "KIP-392",
    "hwm-regression": "KIP-1166", "hwm-propagation-delay": "KIP-1166",
    "fetch-session-violation": "KIP-227", "tiered-offset-violation": "KIP-1023",
    "slow-recovery": "liveness", "client-crash-loop": "liveness",
}
EXAMPLES_KEPT = 50  # per anomaly name in an attachment


def example_title(name: str, example: dict) -> str:
    return f"{name}: {example.get('message', json.dumps(example)[:200])}"


def _json(body) -> bytes:
    return json.dumps(body, indent=1, default=str).encode()


def write_allure_results(run_dir: Path, verdict: dict, config: dict) -> Path:
    """One Allure test per anomaly name of a `kipcheck run`, each example a step; returns the directory."""
    run_dir = Path(run_dir)
    out = run_dir / "allure-results"
    files = AllureFileLogger(out)
    config_file = run_config.path_of(run_dir)
    start = int(config_file.stat().st_mtime * 1000) if config_file.exists() else int(time.time() * 1000)

    def attach(body: bytes | None, name: str, kind: AttachmentType, source: Path | None = None) -> Attachment:
        file_name = f"{uuid.uuid4()}-attachment.{kind.extension}"
        if source is not None:
            files.report_attached_file(str(source), file_name)
        else:
            files.report_attached_data(body, file_name)
        return Attachment(name=name, source=file_name, type=kind.mime_type)

    page = run_dir / "report" / "index.html"  # the interactive report (reports/html.py), one self-contained file
    parameters = [Parameter(name="kafka_version", value=str(config.get("kafka_version"))),
                  Parameter(name="seed", value=str(config.get("seed"))),
                  Parameter(name="profile", value=str(verdict.get("profile")))]
    for name, examples in verdict.get("anomalies", {}).items():
        known = verdict.get("known", {}).get(name, [])
        status = Status.FAILED if examples else (Status.PASSED if verdict.get("valid") is not None else Status.SKIPPED)
        steps = [TestStepResult(name=example_title(name, ex), status=Status.FAILED, start=start, stop=start,
                                attachments=[attach(_json(ex), "proof", AttachmentType.JSON)])
                 for ex in examples[:EXAMPLES_KEPT]]
        detail = attach(_json({"anomalies": examples[:EXAMPLES_KEPT], "known": known[:EXAMPLES_KEPT]}),
                        "examples", AttachmentType.JSON)
        files.report_result(TestResult(
            uuid=str(uuid.uuid4()), historyId=f"kipcheck:{name}", name=name,
            fullName=f"kipcheck.{FEATURE.get(name, 'other')}.{name}", status=status, stage="finished",
            statusDetails=StatusDetails(message=f"{len(examples)} anomalies, {len(known)} known deviations"),
            start=start, stop=start, steps=steps, parameters=parameters,
            labels=[Label(name="feature", value=FEATURE.get(name, "other")),
                    Label(name="suite", value=f"Kafka {config.get('kafka_version', '?')}"),
                    Label(name="tag", value=f"seed {config.get('seed')}")],
            # the report (megabytes for a long run) goes only with the names that failed, where people look
            attachments=[detail, *([attach(None, "report", AttachmentType.HTML, page)]
                                   if examples and page.exists() else [])]))
    return out


class _AnomalyFound(AssertionError):
    """Raised inside an anomaly's step so that Allure marks the step failed; caught right after."""


def report_to_current_test(verdict: dict, proofs: dict[int, dict], *, parameters: dict,
                           faults: list[dict], excerpt: str, logs: dict[str, str]) -> None:
    """Put a pytest test's verdict on its Allure test (a no-op without allure-pytest recording)."""
    import allure
    for key, value in parameters.items():
        allure.dynamic.parameter(key, value)  # shown as repr, like allure-pytest's own parameters
    valid = verdict.get("valid")
    allure.dynamic.tag(f"verdict {dict([(True, 'valid'), (False, 'invalid')]).get(valid, 'unknown')}")
    for name, examples in (verdict.get("anomalies") or {}).items():
        if not examples:
            continue
        allure.dynamic.feature(FEATURE.get(name, "other"))
        try:
            with allure.step(f"anomaly {name}: {len(examples)} example(s)"):
                for ex in examples[:EXAMPLES_KEPT]:
                    try:
                        with allure.step(example_title(name, ex)):
                            records = [proofs.get(i) for i in ex.get("indices", [])]
                            allure.attach(_json({"example": ex, "records": records}), "proof",
                                          allure.attachment_type.JSON)
                            raise _AnomalyFound(ex.get("message", name))
                    except _AnomalyFound:
                        pass
                raise _AnomalyFound(name)
        except _AnomalyFound:
            pass
    for name, examples in (verdict.get("known") or {}).items():
        if examples:
            with allure.step(f"known deviation {name}: {len(examples)} example(s), accepted by {verdict.get('profile')}"):
                allure.attach(_json(examples[:EXAMPLES_KEPT]), "examples", allure.attachment_type.JSON)
    allure.attach(_json(verdict), "verdict", allure.attachment_type.JSON)
    allure.attach(_json(faults), "fault schedule", allure.attachment_type.JSON)
    allure.attach(excerpt, "history excerpt", allure.attachment_type.TEXT)
    for name, text in logs.items():
        allure.attach(text, f"node log {name}", allure.attachment_type.TEXT)

