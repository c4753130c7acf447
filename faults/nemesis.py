"""Runs a fault schedule against a live cluster and records every inject and heal.

The nemesis is the only writer of `fault` records (process "nemesis"). A fault whose
inject fails (no leader to target, a node that would not start, or an exception of our
own, whose traceback goes to the run's harness.log) is recorded as `info`, its family is
healed, and the schedule goes on; a heal that fails stops the nemesis and the run.
Whatever happens, `heal_all()` undoes every kind at the end of a run.
"""
from __future__ import annotations

import logging
import threading
import time

from kipcheck.faults.base import FaultSpec
from kipcheck.errors import KipcheckError
from kipcheck.faults.registry import healers, kind


class Nemesis(threading.Thread):
    def __init__(self, ctx, schedule: list[FaultSpec], history, stop: threading.Event):
        super().__init__(name="nemesis", daemon=True)
        self.ctx, self.schedule, self.history, self.stop_event = ctx, schedule, history, stop
        ctx.stop_event = stop  # FaultContext.stop_event: long faults (rolling-restart) stop early when the run ends
        self.error: BaseException | None = None
        self.windows: list[tuple[FaultSpec, dict]] = []
        self.failed: list[tuple[FaultSpec, str]] = []
        self.skipped: list[FaultSpec] = []

    def run(self):
        t0 = time.monotonic()
        try:
            for spec in sorted(self.schedule, key=lambda s: s.start):
                if self.stop_event.wait(max(0.0, spec.start - (time.monotonic() - t0))):
                    return
                if time.monotonic() - t0 > spec.start + spec.duration:
                    self.skipped.append(spec)  # a slow fault before it overran this window: keep the quiet tail
                    continue
                self.apply(spec)
        except BaseException as e:
            self.error = e

    def apply(self, spec: FaultSpec) -> None:
        k = kind(spec.kind)
        op = self.history.invoke("nemesis", "fault", fault_value(spec, "start"))
        try:
            injected = k.inject(self.ctx, spec)
        except KipcheckError as e:  # a fault's own, or a cluster verb's (a HarnessError): a known reason
            op.info(error=str(e))
            self.failed.append((spec, str(e)))
            heal_all_quietly(k, self.ctx)  # a half-done inject must not outlive its window
            return
        except Exception as e:  # ours or the cluster's: recorded, its traceback to the harness log, go on
            logging.getLogger("kipcheck").error("nemesis: inject %s failed", spec.kind, exc_info=e)
            op.info(error=f"{type(e).__name__}: {e}"[:200], internal=True)
            self.failed.append((spec, str(e)))
            heal_all_quietly(k, self.ctx)
            return
        op.ok(**injected)
        self.stop_event.wait(spec.duration)
        op = self.history.invoke("nemesis", "fault", fault_value(spec, "stop", injected))
        try:
            k.heal(self.ctx, spec, injected)
        except Exception as e:
            op.info(error=str(e))
            raise
        op.ok()
        self.windows.append((spec, injected))


def fault_value(spec: FaultSpec, phase: str, injected: dict | None = None) -> dict:
    """A fault record's value: its kind, parameters and phase, the targets a stop heals, and
    what the fault does (kipcheck.effects): the checker reads the effects, never the kind's name."""
    value = {"fault": spec.kind, **spec.params, "effects": sorted(kind(spec.kind).effects), "phase": phase}
    return value if injected is None else {**value, "targets": injected.get("targets", [])}


def heal_all_quietly(k, ctx) -> None:
    try:
        k.heal_all(ctx)
    except Exception:  # the run's final heal-all tries again and records the error
        pass


def heal_all(ctx, history=None) -> None:
    """Undo every fault kind (each family once); recorded when a history is given."""
    op = history.invoke("nemesis", "fault", {"fault": "heal-all", "effects": [], "phase": "stop", "targets": []}) if history else None
    errors = []
    for heal in healers():
        try:
            heal(ctx)
        except Exception as e:  # heal the others anyway
            errors.append(f"{getattr(heal, '__qualname__', heal)}: {e}")
    if op:
        (op.info(error="; ".join(errors)) if errors else op.ok())
