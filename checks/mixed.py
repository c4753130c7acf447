"""Mixed-version windows of a rolling upgrade, read from the history's `upgrade` records.

harness.upgrade records each roll step (docs/history.md); a window runs from the first
step's invoke to the completion of the step after which every node ran one release.
The report draws them on the timeline; the verdict's profile note explains how a mixed
history is judged (checks.profiles.mixed_profile).
"""
from __future__ import annotations

F = "upgrade"


def mixed_windows(records) -> list[tuple[int, int | None]]:
    """(start ns, end ns or None) of each mixed-version window in a history: from the first
    roll step's invoke to the completion of the step after which every node ran one release
    (`versions` of its ok record); None when the history ends mixed."""
    windows, start = [], None
    for r in records:
        if r.get("f") != F or r.get("value", {}).get("step") != "roll":
            continue
        if r["type"] == "invoke" and start is None:
            start = r["time"]
        elif r["type"] == "ok" and start is not None and len(set(r["value"].get("versions", {}).values())) == 1:
            windows.append((start, r["time"]))
            start = None
    if start is not None:
        windows.append((start, None))
    return windows
