"""Seeded fault schedules: the same seed, kinds and duration always give the same list."""
from __future__ import annotations

import random

from faults.base import FaultSpec


def single_partition(duration: float, topic: str) -> list[FaultSpec]:
    """The skeleton's schedule: isolate the leader of partition 0 for ~10 s, a third of the way in."""
    length = min(10.0, duration / 3)
    return [FaultSpec("partition", start=duration / 3, duration=length,
                      params={"target": "leader", "topic": topic, "partition": 0})]


def generate(seed: int, kinds: list[str], duration: float, topic: str, intensity: float = 1.0) -> list[FaultSpec]:
    """Alternate fault windows and quiet windows over the run, drawing kinds from `kinds`.

    The last fifth of the run stays quiet so the cluster can recover before the final reads."""
    rng = random.Random(seed)
    specs, t = [], rng.uniform(3.0, 6.0)
    end = duration * 0.8
    while t < end and kinds:
        length = min(rng.uniform(4.0, 12.0) * intensity, end - t)
        if length < 2.0:
            break
        kind = rng.choice(sorted(kinds))
        specs.append(FaultSpec(kind, start=round(t, 3), duration=round(length, 3),
                               params={"target": "leader", "topic": topic, "partition": rng.randrange(3)}))
        t += length + rng.uniform(3.0, 8.0) / max(intensity, 0.1)
    return specs
