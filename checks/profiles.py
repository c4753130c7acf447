"""Which model profile a check uses: asked for, or the one for the run's Kafka version.

The profiles themselves belong to `reference_model.profiles`; this module only reads the
run's `config.json` and validates names.
"""
from __future__ import annotations

from pathlib import Path

from checks.history import HistoryError
from checks import run_config
from reference_model.profiles import PROFILES, for_version, profile_for


def known_profiles() -> list[str]:
    return sorted(PROFILES)


def profile_for_version(version: str | None) -> str:
    """"4.3.1" -> "kafka-4.3"; a line without a profile -> `kip` (`profile_for`)."""
    return for_version(version)


def kafka_version(path: str | Path) -> str | None:
    """The `kafka_version` of the run a history belongs to, when its config.json says."""
    return run_config.load(path).get("kafka_version")


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
    return profile_for(kafka_version(path))
