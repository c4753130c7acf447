"""How long a share consumer holds a poll's records (`share_workload.stall_seconds`): the workload's
default, and the selftest's windows (stalls only on first deliveries, lengths inside and past the lock)."""
from __future__ import annotations

import random

from kipcheck.harness.clients.share_workload import stall_seconds
from kipcheck.harness.clients.workload_options import WorkloadOptions

LOCK_MS = 5000


def test_the_default_stalls_past_the_lock_on_one_draw_per_poll():
    options = WorkloadOptions(workload="share")
    rng, twin = random.Random(7), random.Random(7)
    stalls = [stall_seconds(rng, options, [2], LOCK_MS) for _ in range(2000)]
    expected = [6.0 if twin.random() < options.share_stall else None for _ in range(2000)]
    assert stalls == expected  # one draw a poll, whatever its delivery counts: the seeded sequence is the same
    assert 30 < sum(s is not None for s in stalls) < 100  # ~3 in 100


def test_fresh_only_stalls_only_a_poll_with_a_first_delivery():
    options = WorkloadOptions(workload="share", share_stall=1.0, share_stall_fresh_only=True)
    rng = random.Random(1)
    assert stall_seconds(rng, options, [2, 3], LOCK_MS) is None
    assert stall_seconds(rng, options, [], LOCK_MS) is None
    assert stall_seconds(rng, options, [3, 1], LOCK_MS) == LOCK_MS / 1000 + 1


def test_lengths_are_drawn_from_those_given():
    options = WorkloadOptions(workload="share", share_stall=1.0, share_stall_ms=(2500, 6000))
    rng = random.Random(3)
    lengths = {stall_seconds(rng, options, [1], LOCK_MS) for _ in range(200)}
    assert lengths == {2.5, 6.0}


def test_no_stall_rate_never_stalls():
    options = WorkloadOptions(workload="share", share_stall=0.0, share_stall_fresh_only=True)
    rng = random.Random(5)
    assert all(stall_seconds(rng, options, [1], LOCK_MS) is None for _ in range(500))
