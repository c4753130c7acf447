"""Runs a fault schedule against a live cluster and records every inject and heal.

The nemesis is the only writer of `fault` records (process "nemesis"). Whatever
happens, `heal_all()` undoes every known kind at the end of a run.
"""
from __future__ import annotations

import threading
import time

from faults.base import FaultSpec
from faults.registry import KINDS, kind


class Nemesis(threading.Thread):
    def __init__(self, ctx, schedule: list[FaultSpec], history, stop: threading.Event):
        super().__init__(name="nemesis", daemon=True)
        self.ctx, self.schedule, self.history, self.stop_event = ctx, schedule, history, stop
        self.error: BaseException | None = None
        self.windows: list[tuple[FaultSpec, dict]] = []

    def run(self):
        t0 = time.monotonic()
        try:
            for spec in sorted(self.schedule, key=lambda s: s.start):
                if self.stop_event.wait(max(0.0, spec.start - (time.monotonic() - t0))):
                    return
                self.apply(spec)
        except BaseException as e:
            self.error = e

    def apply(self, spec: FaultSpec) -> None:
        k = kind(spec.kind)
        base = {"fault": spec.kind, **spec.params}
        op = self.history.invoke("nemesis", "fault", {**base, "phase": "start"})
        try:
            injected = k.inject(self.ctx, spec)
        except Exception as e:
            op.info(error=str(e))
            raise
        op.ok(**injected)
        self.stop_event.wait(spec.duration)
        op = self.history.invoke("nemesis", "fault", {**base, "phase": "stop", "targets": injected.get("targets", [])})
        k.heal(self.ctx, spec, injected)
        op.ok()
        self.windows.append((spec, injected))


def heal_all(ctx, history=None) -> None:
    """Undo every fault kind; recorded when a history is given."""
    op = history.invoke("nemesis", "fault", {"fault": "heal-all", "phase": "stop", "targets": []}) if history else None
    errors = []
    for k in KINDS.values():
        try:
            k.heal_all(ctx)
        except Exception as e:  # heal the others anyway
            errors.append(f"{k.name}: {e}")
    if op:
        (op.info(error="; ".join(errors)) if errors else op.ok())
