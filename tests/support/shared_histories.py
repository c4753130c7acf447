"""The hand-made histories of ../shared/histories (issue 28) and the indices their `why` names."""
import re
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "histories"


def why_indices(why: str) -> set[int]:
    """History indices a `why` names: numbers in parentheses or brackets, and "at N"."""
    found = set()
    for group in re.findall(r"[(\[]([^()\[\]]*)[)\]]", why):
        found.update(int(n) for n in re.findall(r"\b\d+\b", group))
    found.update(int(n) for n in re.findall(r"\bat (\d+)\b", why))
    return found
