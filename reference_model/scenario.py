"""Replay a scenario (docs/model.md) through the model: `kipcheck model replay`."""
from __future__ import annotations

from . import profiles
from .model import Model


def replay(scenario: dict, profile: str = "kip") -> list[dict]:
    """Each step's allowed outcomes, as JSON-able dicts.

    A scenario is {"profile"?, "state": {...}, "steps": [operation, ...]}; the
    `profile` argument wins over the scenario's own unless it is the default "kip"."""
    name = scenario.get("profile", profile) if profile == "kip" else profile
    model = Model(profiles.get(name))
    state = model.init(scenario.get("state", {}))
    result = []
    for i, op in enumerate(scenario.get("steps", [])):
        outcomes, state = model.step(state, op)
        entry = {"step": i, "op": op["op"], "allowed": outcomes}
        if "expect" in op:
            entry["expected_allowed"] = op["expect"] in outcomes
        result.append(entry)
    return result
