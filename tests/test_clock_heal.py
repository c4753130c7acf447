"""A clock fault's heal returns only once the node's clock is really back (docs/findings.md, "clock-strobe heal").

libfaketime 0.9.10 (FAKETIME_CACHE_DURATION=1, harness/backends/node.faketime_env) re-reads a
process's offset file on the first clock call whose whole second exceeds that of its last read
by more than one: a process can run on the old offset up to 2 s after the file changed. The
seed-1 `--faults all` run flagged LogAppendTime stamps 300 s behind 1.5-1.6 s after a
clock-strobe's heal was recorded, because the heal returned (and its stop completed in the
history) as soon as the file was gone, and the rule allowed only 1.5 s more.

Here a real process runs under libfaketime with the environment a node's JVM gets, and reports
its wall clock's offset from the real one (its monotonic clock is not faked) every few ms. The
fault is injected and healed through a real KafkaNode's `set_clock` (no JVM: the preload and the
file are what is tested). The heal is called just after the process re-read "-300", the worst
phase: on the old heal it returned ~2 s before the process's clock was real again.

The rule's half is pure: a history whose clock fault carries `settle_ms` is judged by its stop's
completion; an older one by the completion plus libfaketime's 2 s bound."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.faults.base import FaultSpec
from kipcheck.faults.clock import ClockSkew, ClockStrobe, heal_clocks
from kipcheck.harness.backends.network import Host
from kipcheck.harness.backends.node import LIBFAKETIME, KafkaNode, NodeSpec, faketime_env

HERE = Host("n3", "127.0.0.1", None)

# the child: print "<monotonic s> <offset s>" whenever its wall clock's offset changes (and once at start)
CHILD = r"""
import select, sys, time
m0, r0 = time.monotonic(), time.time()
last = None
end = m0 + float(sys.argv[1])
while time.monotonic() < end:
    m = time.monotonic()
    off = round(time.time() - (r0 + m - m0))
    if off != last:
        print(f"{m:.4f} {off}", flush=True)
        last = off
    select.select([], [], [], 0.003)
"""


class _Cluster:
    """The clock faults' view of a cluster: its nodes, here one real KafkaNode without a JVM."""

    def __init__(self, node):
        self.nodes = [node]

    def node(self, node_id):
        assert node_id == self.nodes[0].spec.node_id
        return self.nodes[0]


class _Ctx:
    def __init__(self, node):
        self.cluster, self.topic, self.stop_event = _Cluster(node), "t", None


class _Watched:
    """A process under libfaketime, driven by `node`'s offset file, its offset changes collected."""

    def __init__(self, node, seconds):
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(seconds)], stdout=subprocess.PIPE, text=True,
                                     env={**faketime_env(node.clock_file, HERE), "PATH": "/usr/bin:/bin"})
        self.changes: list[tuple[float, int]] = []
        self.seen = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            m, off = line.split()
            with self.seen:
                self.changes.append((float(m), int(off)))
                self.seen.notify_all()

    def wait_offset(self, offset, timeout=8.0):
        with self.seen:
            assert self.seen.wait_for(lambda: self.changes and self.changes[-1][1] == offset, timeout), self.changes

    def offset_at(self, monotonic_s):
        """The offset the process ran on at that moment (its last change at or before it)."""
        before = [off for m, off in self.changes if m <= monotonic_s]
        return before[-1] if before else None

    def finish(self):
        self.proc.wait(30)
        return self.changes


@pytest.fixture
def node(tmp_path):
    if not Path(LIBFAKETIME).exists():
        pytest.skip(f"needs libfaketime ({LIBFAKETIME}): scripts/install.sh installs it")
    spec = NodeSpec(3, ("broker", "controller"), "rack-3", HERE, 1, 2, 3)
    return KafkaNode(spec, tmp_path, None, None, "uuid", "voters", fake_clock=True)


def _heal_after_reread(node, heal, watched):
    """Call `heal` just after the process re-read "-300"; its clock after `heal` returned."""
    watched.wait_offset(-300)
    heal()
    returned = time.monotonic()
    changes = watched.finish()
    assert changes[0][1] == 0 and changes[-1][1] == 0, changes  # real before the fault and in the end
    return returned, changes[-1][0]  # when it last became real


def test_a_clock_skews_heal_returns_when_the_process_runs_on_the_real_clock_again(node):
    watched = _Watched(node, 9)
    kind = ClockSkew()
    spec = FaultSpec("clock-skew", 0, 5, {"target": 3, "offset": -300})
    watched.wait_offset(0)
    injected = kind.inject(_Ctx(node), spec)
    assert node.clock_file.read_text().strip() == "-300"
    returned, back = _heal_after_reread(node, lambda: kind.heal(_Ctx(node), spec, injected), watched)
    assert not node.clock_file.exists()
    assert watched.offset_at(returned) == 0, f"heal returned at {returned:.3f}, the clock was real only at {back:.3f}"
    assert injected["settle_ms"] >= 2000  # recorded with the start: the rule judges this window by its stop


def test_a_clock_strobes_heal_returns_when_the_process_runs_on_the_real_clock_again(node):
    watched = _Watched(node, 10)
    kind = ClockStrobe()
    spec = FaultSpec("clock-strobe", 0, 5, {"target": 3, "offset": -300, "period": 2})
    watched.wait_offset(0)
    injected = kind.inject(_Ctx(node), spec)
    returned, back = _heal_after_reread(node, lambda: kind.heal(_Ctx(node), spec, injected), watched)
    assert watched.offset_at(returned) == 0, f"heal returned at {returned:.3f}, the clock was real only at {back:.3f}"
    time.sleep(0.1)
    assert not node.clock_file.exists()  # no late flip of the strobe outlived the heal


def test_heal_all_returns_when_a_skewed_process_runs_on_the_real_clock_again(node):
    watched = _Watched(node, 9)
    watched.wait_offset(0)
    ClockSkew().inject(_Ctx(node), FaultSpec("clock-skew", 0, 5, {"target": 3, "offset": -300}))
    returned, back = _heal_after_reread(node, lambda: heal_clocks(_Ctx(node)), watched)
    assert watched.offset_at(returned) == 0, f"heal-all returned at {returned:.3f}, real only at {back:.3f}"


# -- the rule's half: judged by when the fault's effect ended ----------------------------------

MS = 1_000_000


def _seed1_shape(settle_ms, sent_after_heal_ms):
    """The seed-1 shape: a -300 s strobe on the leader healed at 88.9 s (its stop's completion), a
    record sent `sent_after_heal_ms` later, read stamped 300 s behind its send."""
    recs = []

    def add(at_ms, process, type_, f, value):
        recs.append({"index": len(recs), "time": int(at_ms * MS), "process": process, "type": type_, "f": f,
                     "value": value})

    start = {"fault": "clock-strobe", "target": 3, "offset": -300, "period": 2, "phase": "start"}
    add(70_000, "nemesis", "invoke", "fault", start)
    add(70_010, "nemesis", "ok", "fault", {**start, "targets": [3], "skew_s": -300, "faketime": "-300", "period_s": 2.0,
                                           **({"settle_ms": settle_ms} if settle_ms is not None else {})})
    stop = {"fault": "clock-strobe", "target": 3, "offset": -300, "period": 2, "phase": "stop", "targets": [3]}
    add(88_900 - (settle_ms or 5), "nemesis", "invoke", "fault", stop)
    add(88_900, "nemesis", "ok", "fault", stop)
    sent = 88_900 + sent_after_heal_ms
    v = {"topic": "t", "partition": 0, "key": "k", "value": "1-0"}
    add(sent, 1, "invoke", "send", v)
    add(sent + 30, 1, "ok", "send", {**v, "offset": 0})
    add(sent + 200, 9, "invoke", "poll", {"topic": "t"})
    add(sent + 201, 9, "ok", "poll", {"topic": "t", "records": [["t", 0, 0, "1-0"]],
                                      "append_ms": [sent + 10 - 300_000]})
    return check_records(recs)["anomalies"].get("append-time-violation", [])


def test_an_old_history_is_given_libfaketimes_two_seconds_after_the_heal():
    assert not _seed1_shape(None, 1_600)  # what the seed-1 run flagged: within libfaketime's bound
    assert _seed1_shape(None, 2_200)


def test_a_settled_heal_is_judged_by_its_completion():
    assert _seed1_shape(2_250, 50)  # the heal waited out the re-read: the clock was real when it completed
    assert not _seed1_shape(2_250, -3_000)  # sent while the strobe still held
