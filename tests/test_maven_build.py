"""The jar cache keeps other checkouts' jars while they may still be in use."""
import os

from kipcheck.harness.backends.maven_build import STALE_AFTER_S, _prune


def test_prune_keeps_recent_jars_of_other_sources_and_removes_stale_ones(tmp_path):
    now = 10 * STALE_AFTER_S
    current, recent, stale = (tmp_path / n for n in ("current", "recent", "stale"))
    for d, age in ((current, 2 * STALE_AFTER_S), (recent, STALE_AFTER_S - 60), (stale, STALE_AFTER_S + 60)):
        d.mkdir()
        os.utime(d, (now - age, now - age))
    _prune(tmp_path, keep=current, now=now)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "recent"]
