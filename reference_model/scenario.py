"""Replay a scenario (docs/model.md) through the model: `kipcheck model replay`."""
from __future__ import annotations

from pathlib import Path

from . import profiles
from .model import Model

#: the example scenarios shipped with the package (docs/model.md); reading them is the caller's
SHIPPED = Path(__file__).resolve().parent / "scenarios"


class ScenarioError(ValueError):
    """A scenario the model cannot replay; the message names the step."""


def replay(scenario: dict, profile: str = "kip") -> list[dict]:
    """Each step's allowed outcomes, as JSON-able dicts.

    A scenario is {"profile"?, "state": {...}, "steps": [operation, ...]}; the
    `profile` argument wins over the scenario's own unless it is the default "kip"."""
    if not isinstance(scenario, dict):
        raise ScenarioError("a scenario is a JSON object with \"state\" and \"steps\"")
    name = scenario.get("profile", profile) if profile == "kip" else profile
    try:
        model = Model(profiles.get(name))
        state = model.init(scenario.get("state", {}))
    except (ValueError, KeyError, TypeError) as e:
        raise ScenarioError(f"initial state: {e}") from None
    result = []
    for i, op in enumerate(scenario.get("steps", [])):
        try:
            outcomes, state = model.step(state, op)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ScenarioError(f"step {i}: missing field {e}" if isinstance(e, KeyError) else f"step {i}: {e}") from None
        entry = {"step": i, "op": op["op"], "allowed": outcomes}
        if "expect" in op:
            entry["expected_allowed"] = op["expect"] in outcomes
        result.append(entry)
    return result
