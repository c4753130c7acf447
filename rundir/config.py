"""config.json, a run directory's description of its run: its schema, writer and reader.

harness/run.py (and harness/selftest.py) write it with `write`; the checker (profile,
recovery bound), reports/html.py and reports/allure.py read it with `load`. It lives in
rundir/, the bottom layer every other one may import. Keys not in `RunConfig` are kept as they are, so a
field a newer run writes survives an older reader. The fields are listed in README.md
("Files of a run") and docs/history.md.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from kipcheck.rundir.records import CONFIG_NAME

FILE_NAME = CONFIG_NAME


class RunConfig(TypedDict, total=False):
    """Every field is optional: a run writes config.json first and grows it as it learns."""

    seed: int
    duration: float  # seconds of workload
    backend: str  # "native", "external" or "testcontainers"
    options: dict  # harness.run.RunOptions without the workload
    workload: dict  # harness.clients.workload.WorkloadOptions
    schedule: list[dict]  # faults.base.FaultSpec.as_json() of each planned fault
    python: str
    started: str  # local time, ISO 8601
    kafka_version: str  # "unknown" for an external cluster without --kafka-version
    features: dict  # KIP-level feature -> "present" / "not in this release" (harness.backends.releases.report)
    reproduce: str  # the `kipcheck run` command line that repeats the run
    mode: str  # "namespaces", "loopback", "external" or "testcontainers"
    racks: dict  # node id (a string in JSON) -> rack
    bootstrap: str
    recovery_bound: dict  # {"seconds", "parts", "source"} (checks.recovery)
    kraft: dict  # the settings the KIP-1166 bound needs (harness.backends.node.kraft_settings)
    # the brokers' KIP-848 {"session_timeout_ms", "heartbeat_interval_ms"}: the slow-rebalance bound
    # (harness.backends.node.consumer_group_settings; checks.recovery.group_liveness_rule); {}: unknown
    consumer_groups: dict
    consumer_rack: str | None  # the client.rack of rack-aware consumers
    skipped: list[dict]  # [{"key", "feature", "reason"}] (harness.clients.capabilities)
    consumer_fetch_sources: dict  # consumer -> partition -> {"rack", "leader", "fetching_from"}
    seeded_bug: str | None  # selftest windows only: the bug switched on
    window: float  # selftest windows only: seconds the bug was on
    upgrade: dict  # a rolling upgrade: {"from", "to", "direction", "judged_as", "format_release", "finalize", "steps"} (harness.upgrade)


def path_of(run: str | Path) -> Path:
    """The config.json of a run directory, or of the run a file in it (history.jsonl) belongs to."""
    p = Path(run)
    return (p if p.is_dir() else p.parent) / FILE_NAME


def load(run: str | Path) -> RunConfig:
    """The run's config; empty when there is none or it is not a JSON object (readers show '?')."""
    try:
        config = json.loads(path_of(run).read_text())
    except (OSError, ValueError):
        return RunConfig()
    return config if isinstance(config, dict) else RunConfig()


def write(run_dir: str | Path, config: RunConfig) -> Path:
    """Write the whole config (callers keep one dict and grow it)."""
    path = Path(run_dir) / FILE_NAME
    path.write_text(json.dumps(config, indent=2))
    return path
