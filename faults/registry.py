"""Every fault kind by name; an unknown name is a one-line error listing the known ones."""
from __future__ import annotations

from harness.errors import HarnessError
from faults.partition import IsolateNode

KINDS = {k.name: k for k in (IsolateNode(),)}


def kind(name: str):
    try:
        return KINDS[name]
    except KeyError:
        raise HarnessError(f"unknown fault {name!r}; known faults: {', '.join(sorted(KINDS))}") from None


def parse_kinds(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    for n in names:
        kind(n)
    return names
