"""Which model profile a check uses: asked for, or the one for the run's Kafka version.

The profiles themselves belong to `reference_model.profiles`; this module only reads the
run's `config.json` and validates names.
"""
from __future__ import annotations

from pathlib import Path

from kipcheck.rundir.history import HistoryError
from kipcheck.rundir import config as run_config
from kipcheck.reference_model.profiles import PROFILES, for_version, profile_for


def known_profiles() -> list[str]:
    return sorted(PROFILES)


def profile_for_version(version: str | None) -> str:
    """"4.3.1" -> "kafka-4.3"; a line without a profile -> `kip` (`profile_for`)."""
    return for_version(version)


def kafka_version(path: str | Path) -> str | None:
    """The `kafka_version` of the run a history belongs to, when its config.json says."""
    return run_config.load(path).get("kafka_version")


def mixed_profile(upgrade: dict) -> tuple[str, str]:
    """(profile, note) for a rolling upgrade's history (config.json `upgrade`): the older
    release's profile judges the whole history, and the note says so.

    A rule takes one profile for the whole history, so "the union of both releases'
    deviations during the mixed window only" cannot be expressed; the union everywhere would
    accept, on the older release's nodes, deviations only the newer one was shown to have.
    The older release's profile accepts only what that release is known to do; the newer
    release's extra deviations show as anomalies (re-judge with --profile to compare)."""
    a, b = str(upgrade.get("from")), str(upgrade.get("to"))
    old = str(upgrade.get("judged_as") or a)  # the older release, as the run decided (harness.upgrade.older)
    new = b if old == a else a
    name, fallback = profile_for(old)
    new_name = for_version(new)
    newer = (f"deviations known only for {new_name} show as anomalies; `kipcheck check RUN --profile "
             f"{new_name}` re-judges it under the newer" if new_name != "kip" and new_name != name
             else f"Kafka {new} has no profile of its own" if new_name == "kip" else "both releases are judged by it")
    note = (f"rolling {'upgrade' if old == a else 'downgrade'} {a} -> {b}: the history mixes both releases, "
            f"judged under the older release's profile {name} (one profile per history; the union of both "
            f"releases' deviations cannot be limited to the mixed window), so {newer}")
    return name, note + (f"; {fallback}" if fallback else "")


def choose_profile(path: str | Path, asked: str | None = None) -> str:
    """The profile to check `path` with: `asked` if given (and known), else by version."""
    return choose_profile_noted(path, asked)[0]


def choose_profile_noted(path: str | Path, asked: str | None = None) -> tuple[str, str | None]:
    """`choose_profile` and, when the run's Kafka version has no profile of its own, a
    note saying which profile judged it instead (None otherwise, and when `asked`)."""
    if asked is not None:
        if asked not in known_profiles():
            raise HistoryError(f"unknown profile {asked!r}; known: {', '.join(known_profiles())}")
        return asked, None
    upgrade = run_config.load(path).get("upgrade")
    if isinstance(upgrade, dict) and upgrade.get("from") and upgrade.get("to"):
        return mixed_profile(upgrade)
    return profile_for(kafka_version(path))
