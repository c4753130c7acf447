"""The liveness rule on hand-made histories: recovery times after heals, the bound, undecided
windows, client crash loops; the bound's derivation and the CLI options."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.rundir.history import write_jsonl
from kipcheck.checks.recovery import choose_bound, derive_bound, liveness_rule
from kipcheck.checks.verdict import default_rules
from tests.support.liveness import BROKERS, PARTITIONS, Hist, crash, judge, kill_and_heal


def test_recovery_inside_the_bound_is_measured_and_not_an_anomaly():
    h = Hist()
    kill_and_heal(h, 10)
    h.at(11).send(0)
    h.at(12.5).send(1)  # sends resume on every partition 2.5 s after the heal began
    h.at(13).poll([0])
    h.at(13.5).poll([1])
    h.at(14).all_metadata(full=True)
    h.at(30).fault("heal-all", "stop", targets=())
    v = judge(h.records, bound=5.0)
    assert v["anomalies"]["slow-recovery"] == []
    (entry,) = v["liveness"]["faults"]
    assert entry["fault"] == "kill" and entry["targets"] == [3] and entry["heal"] == 10.0
    assert entry["sends"] == pytest.approx(2.5, abs=1e-3)
    assert entry["reads"] == pytest.approx(3.5, abs=1e-3)
    assert entry["isr"] == pytest.approx(4.0, abs=1e-3)
    assert entry["status"] == "recovered" and entry["ended_by"].startswith("end of workload")
    assert v["valid"] is True


def test_recovery_just_outside_the_bound_is_slow_recovery():
    h = Hist()
    kill_and_heal(h, 10)
    for p in PARTITIONS:
        h.at(11).send(p)
    h.poll(PARTITIONS)
    for b in (1, 2):
        for p in PARTITIONS:
            h.metadata(b, p, full=True)
    h.at(15.05).metadata(3, 0, full=False)  # broker 3 still shows a shrunk ISR after the bound ...
    for p in PARTITIONS:  # ... and a full one 5.1 s after the heal began
        h.at(15.1).metadata(3, p, full=True)
    h.at(30).fault("heal-all", "stop", targets=())
    v = judge(h.records, bound=5.0)
    (slow,) = v["anomalies"]["slow-recovery"]
    assert slow["fault"] == "kill" and slow["measures"] == ["isr"] and slow["targets"] == [3]
    assert "isr took 5.1" in slow["message"]
    assert v["liveness"]["faults"][0]["status"] == "slow"
    assert v["valid"] is False and v["counts"]["anomalies"]["slow-recovery"] == 1
    assert judge(h.records, bound=5.2)["anomalies"]["slow-recovery"] == []


def test_a_late_isr_that_no_answer_after_the_bound_showed_is_undecided():
    """The observer samples (and stalls while a propagation waits on a dead broker): a full
    ISR first seen late, with no answer after the bound showing it shrunk, proves nothing."""
    h = Hist()
    kill_and_heal(h, 10)
    for p in PARTITIONS:
        h.at(11).send(p)
    h.poll(PARTITIONS)
    h.at(12).metadata(1, 0, full=False)  # the last answer before the observer's silence
    h.at(25).all_metadata(full=True)
    h.at(30).fault("heal-all", "stop", targets=())
    v = judge(h.records, bound=5.0)
    entry = v["liveness"]["faults"][0]
    assert entry["isr"] == pytest.approx(15.0, abs=1e-2) and entry["isr_not_full_at"] == pytest.approx(2.0, abs=1e-2)
    assert entry["status"] == "undecided" and entry["undecided"] == ["isr"]
    assert v["anomalies"]["slow-recovery"] == []
    # a broker that failed to answer after the bound is proof enough
    h.records = h.records[:-2 - 2 * len(BROKERS) * len(PARTITIONS)]
    h.at(16)
    h.op("observer", "metadata", {"broker": 3, "topic": "t", "partition": 0}, type_="info", error="refused")
    h.at(25).all_metadata(full=True)
    h.at(30).fault("heal-all", "stop", targets=())
    assert [ex["measures"] for ex in judge(h.records, bound=5.0)["anomalies"]["slow-recovery"]] == [["isr"]]


def test_every_broker_must_show_the_full_isr_after_the_heal():
    h = Hist()
    h.at(0).healthy()  # broker 3's last answers, before it was killed, showed a full ISR
    h.at(1).fault("kill", "start")
    for b in (1, 2):
        for p in PARTITIONS:
            h.at(2).metadata(b, p, full=False)
    h.at(10).fault("kill", "stop")
    for p in PARTITIONS:
        h.send(p)
        h.metadata(1, p, full=True)
    h.metadata(2, 0, full=True)
    h.metadata(2, 1, full=False)
    h.at(16).metadata(2, 1, full=False)  # still shrunk after the bound
    h.at(30).fault("heal-all", "stop", targets=())
    v = judge(h.records, bound=5.0)
    entry = v["liveness"]["faults"][0]
    assert entry["isr"] == "never" and entry["missing"]["isr"] == ["t/0", "t/1"]
    assert entry["sends"] == pytest.approx(0.0, abs=1e-3)
    assert [ex["measures"] for ex in v["anomalies"]["slow-recovery"]] == [["isr", "reads"]]
    h.records = h.records[:-4]  # without the heal-all and the answer at 16 s: broker 3 answers 6 s after the heal
    h.at(16)
    for p in PARTITIONS:
        h.metadata(3, p, full=True)
    h.metadata(2, 1, full=True)
    h.poll(PARTITIONS)
    assert judge(h.records, bound=7.0)["liveness"]["faults"][0]["isr"] == pytest.approx(6.0, abs=1e-3)


def test_never_recovered_with_less_than_the_bound_left_is_undecided():
    h = Hist()
    kill_and_heal(h, 10)
    h.at(11).send(0)  # partition 1 never acknowledges again
    h.at(13).fault("heal-all", "stop", targets=())  # the workload ends 3 s after the heal
    v = judge(h.records, bound=5.0)
    entry = v["liveness"]["faults"][0]
    assert entry["sends"] == "never" and entry["missing"]["sends"] == ["t/1"]
    assert entry["status"] == "undecided" and "sends" in entry["undecided"]
    assert v["anomalies"]["slow-recovery"] == [] and v["valid"] is not False
    # the same with the bound's worth of time left: not recovered in time, flagged
    v = judge(h.records, bound=3.0)
    assert [ex["measures"] for ex in v["anomalies"]["slow-recovery"]] == [["sends", "reads"]]
    assert v["liveness"]["faults"][0]["undecided"] == ["isr"]  # no answer after the heal at all


def test_the_next_fault_ends_the_window():
    h = Hist()
    kill_and_heal(h, 10)
    h.at(12).fault("partition", "start")  # before anything recovered
    h.at(13).healthy()
    h.at(20).fault("partition", "stop", targets=(1,))
    h.at(21).healthy()
    h.at(40).fault("heal-all", "stop", targets=())
    v = judge(h.records, bound=5.0)
    kill, part = v["liveness"]["faults"]
    assert kill["ended_by"] == "next fault (partition)" and kill["window"] == pytest.approx(2.0, abs=1e-3)
    assert kill["status"] == "undecided" and kill["sends"] == "never"
    assert part["fault"] == "partition" and part["status"] == "recovered" and part["sends"] == pytest.approx(1.0, abs=1e-2)
    assert v["anomalies"]["slow-recovery"] == []


def test_more_than_n_crashes_in_a_row_is_a_crash_loop():
    h = Hist()
    h.healthy()
    for i in range(6):
        crash(h, process=100 + i)
    h.poll([0])  # a read in between does not end a producer crash loop
    v = judge(h.records, crash_loop=5)
    (loop,) = v["anomalies"]["client-crash-loop"]
    assert loop["f"] == "send" and loop["crashes"] == 6 and len(loop["indices"]) == 6
    assert v["counts"]["client_crashes"] == 6 and v["valid"] is False
    listed = v["liveness"]["crashes"][0]
    assert listed["f"] == "send" and listed["broker"] == 2 and "OUT_OF_ORDER" in listed["error"]
    assert judge(h.records, crash_loop=6)["anomalies"]["client-crash-loop"] == []


def test_an_ok_in_between_ends_the_streak_and_one_client_crashes_once():
    h = Hist()
    h.healthy()
    for i in range(4):
        crash(h, process=100 + i)
    h.send(1, process=200)  # progress: the streak ends at 4
    for i in range(4):
        crash(h, process=300 + i)
    for slot in range(5):  # five in-flight slots of one pipelined client end together: one crash
        crash(h, client="producer-0#7", process=400 + slot)
    v = judge(h.records, crash_loop=5)
    assert v["anomalies"]["client-crash-loop"] == []
    assert v["counts"]["client_crashes"] == 9
    crash(h, f="poll", process=500)
    assert judge(h.records, crash_loop=5)["counts"]["client_crashes"] == 10


def test_the_default_rules_give_a_liveness_block_even_without_its_records():
    v = check_records([], rules=default_rules())
    assert v["liveness"]["faults"] == [] and v["counts"]["client_crashes"] == 0
    assert v["liveness"]["bound"] == derive_bound()["seconds"]


def test_bound_derivation_records_its_parts_and_the_run_overrides_kafka_defaults(tmp_path):
    b = derive_bound({"replica.lag.time.max.ms": 8000}, 5000, 21.04)
    assert b["parts"]["replica.lag.time.max.ms"] == 8.0 and b["parts"]["node start"] == 21.0
    assert b["seconds"] == pytest.approx(9 + 8 + 2 + 1 + 5 + 21.0)
    assert derive_bound()["parts"]["replica.lag.time.max.ms"] == 30.0  # Kafka's default
    (tmp_path / "config.json").write_text(json.dumps({"recovery_bound": b}))
    assert choose_bound(tmp_path) == b
    asked = choose_bound(tmp_path, 3.5)
    assert asked["seconds"] == 3.5 and asked["parts"] == b["parts"] and "46" in asked["source"]
    assert liveness_rule(asked).bound == 3.5


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", *args], capture_output=True, text=True, timeout=120)


def isr_back_after_8s(h: Hist) -> Hist:
    """A kill healed at 10 s: sends and reads back at once, a shrunk ISR seen at 16 s, full at 18 s."""
    kill_and_heal(h, 10)
    for p in PARTITIONS:
        h.at(11).send(p)
    h.poll(PARTITIONS)
    h.at(16).metadata(1, 0, full=False)
    h.at(18).all_metadata(full=True)
    return h


def test_check_cli_takes_the_bound_and_rejects_bad_ones(tmp_path):
    h = isr_back_after_8s(Hist())
    h.at(30).fault("heal-all", "stop", targets=())
    write_jsonl(h.records, tmp_path / "history.jsonl")
    slow = _cli("check", str(tmp_path), "--recovery-bound", "5")
    assert slow.returncode == 1 and "slow-recovery: 1" in slow.stdout, slow.stdout + slow.stderr
    assert "lost-write" not in slow.stdout and "poll-skip" not in slow.stdout  # liveness alone
    fine = _cli("check", str(tmp_path), "--recovery-bound", "9", "--json")
    assert fine.returncode == 0, fine.stderr
    assert json.loads(fine.stdout)["liveness"]["faults"][0]["isr"] == pytest.approx(8.0, abs=1e-3)
    for bad in ("0", "-1", "soon"):
        p = _cli("check", str(tmp_path), "--recovery-bound", bad)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_report_shows_recoveries_and_crashes(tmp_path):
    from kipcheck.checks.api import check, write_verdict
    from kipcheck.reports.html import write_report
    h = isr_back_after_8s(Hist())
    crash(h, process=100)
    h.at(30).fault("heal-all", "stop", targets=())
    write_jsonl(h.records, tmp_path / "history.jsonl")
    write_verdict(check(tmp_path, recovery_bound=5), tmp_path)
    page = write_report(tmp_path).read_text()
    liveness = page.split("<h2>Liveness", 1)[1].split("<h2>", 1)[0]
    assert "<td>kill</td>" in liveness and "slow" in liveness and "8.0" in liveness
    assert "Client crashes: 1" in liveness and "OUT_OF_ORDER_SEQUENCE_NUMBER" in liveness and "<td>2</td>" in liveness
    # the timeline's data carries the heal's recovery and the crash on its operation's lane
    data = json.loads(page.split('<script id="kipcheck-data" type="application/json">', 1)[1].split("</script>", 1)[0])
    assert [(e["fault"], e["status"]) for e in data["recoveries"]] == [("kill", "slow")]
    (crashed,) = data["crashes"]
    assert crashed["lane"] is not None and "OUT_OF_ORDER_SEQUENCE_NUMBER" in crashed["label"]


# -- each heal's bound: the run's bound plus the heal's restart and catch-up (issue 21 §5) ----------
RUN_BOUND = derive_bound({"replica.lag.time.max.ms": 8000}, 5000, 14.2)  # 39.2 s, the run


def _sends(h: Hist, start: float, end: float, per_second: int) -> None:
    """`per_second` acknowledged sends a second, alternating partitions, in [start, end)."""
    for i in range(int((end - start) * per_second)):
        h.at(start + i / per_second).send(i % len(PARTITIONS))


def _restart_heal(h: Hist, heal: float, healed: float) -> None:
    """The heal of a kill of node 3: invoked at `heal`, the restarted node listening at `healed`."""
    value = {"fault": "kill", "phase": "stop", "targets": [3]}
    h.at(heal)._add("nemesis", "invoke", "fault", value)
    h.at(healed)._add("nemesis", "ok", "fault", value)


def kill_of_node_3(h: Hist, isr_full_after: float | None, before: float = 10.0, rate: int = 20,
                   read_burst: bool = False) -> Hist:
    """The issue's kill: node 3 down for 16.6 s (from 95 s to its heal at 111.6 s with the
    default `before`), its heal restarting it for 17 s (JVM start and log recovery), sends at
    `rate`/s all along (`before` seconds of them from 85 s to the fault), the ISR shown shrunk
    every 0.2 s until `isr_full_after` seconds after the heal (None: never) and full from then on.
    `read_burst`: a consumer reads everything written before the fault in one poll just before it."""
    start = 85 + before
    heal = start + 16.6
    _sends(h, 85, start, rate)
    if read_burst:
        h.at(start - 0.7).poll(PARTITIONS)
    h.at(start - 0.5).all_metadata(full=True)
    h.at(start).fault("kill", "start")
    _sends(h, start, heal, rate)
    h.at(heal - 0.5).all_metadata(full=False)
    _restart_heal(h, heal, heal + 17)
    end = heal + 100
    full_at = end if isr_full_after is None else heal + isr_full_after
    t = heal + 17
    while t < end:
        h.at(t).send(0)
        h.send(1)
        h.poll(PARTITIONS)
        if t < full_at:
            h.metadata(1, 0, full=False)
        else:
            h.all_metadata(full=True)
        t = round(t + 0.2, 3)
    h.at(end).fault("heal-all", "stop", targets=())
    return h


def _judge_with(records, bound):
    return check_records(records, rules=[liveness_rule(bound)])


def test_a_killed_node_that_recovers_its_logs_and_catches_up_is_within_its_heals_bound():
    """The issue's false alarm: 45.2 s to a full ISR against the run's 39.2 s. The heal's
    own restart (17 s) and the 16.6 s of sends node 3 missed, at the rate the history showed,
    are what the node had to do: inside the heal's bound."""
    assert RUN_BOUND["seconds"] == 39.2
    h = kill_of_node_3(Hist(), isr_full_after=45.2)
    v = _judge_with(h.records, RUN_BOUND)
    (entry,) = v["liveness"]["faults"]
    assert entry["isr"] == pytest.approx(45.2, abs=0.01) and entry["status"] == "recovered", entry
    parts = entry["bound_parts"]
    assert parts["run"] == 39.2 and parts["restart"] == pytest.approx(17.0, abs=0.1)
    assert parts["missed sends"] == pytest.approx(16.6 * 20, abs=1) and parts["peak records/s"] == 20  # the kill to the heal
    assert parts["catch-up"] == pytest.approx(16.6, abs=0.1)
    assert entry["bound"] == pytest.approx(39.2 + 17 + 16.6, abs=0.2)
    assert v["anomalies"]["slow-recovery"] == [] and v["liveness"]["bound"] == 39.2
    # the run's bound alone, as before (a given bound is the whole bound of every heal): the false alarm
    given = choose_bound(None, 39.2)
    (slow,) = _judge_with(h.records, given)["anomalies"]["slow-recovery"]
    assert slow["measures"] == ["isr"] and "isr took 45.2" in slow["message"] and slow["bound"] == 39.2


def test_a_killed_node_that_never_rejoins_the_isr_is_slow_recovery():
    """A real bound: node 3 restarted (its port listens) but never back in the ISR."""
    v = _judge_with(kill_of_node_3(Hist(), isr_full_after=None).records, RUN_BOUND)
    (slow,) = v["anomalies"]["slow-recovery"]
    (entry,) = v["liveness"]["faults"]
    assert slow["fault"] == "kill" and slow["targets"] == [3] and slow["measures"] == ["isr"]
    assert f"isr had not recovered {entry['bound']:g} s after the heal" in slow["message"]
    assert entry["status"] == "slow" and entry["isr"] == "never" and entry["bound"] < entry["window"]
    # ... and one that comes back just past its heal's bound is slow too
    late = kill_of_node_3(Hist(), isr_full_after=entry["bound"] + 1.0)
    (slow,) = _judge_with(late.records, RUN_BOUND)["anomalies"]["slow-recovery"]
    assert slow["measures"] == ["isr"] and "isr took" in slow["message"]


@pytest.mark.parametrize("longer", (10, 100))
def test_a_heals_bound_does_not_grow_with_the_run(longer):
    """Lengthening the run before the fault (10x, 100x the sends) leaves the heal's bound as
    it was: the catch-up counts only the sends of the fault's own span. The stuck node stays
    flagged, the 45.2 s recovery stays inside."""
    base = _judge_with(kill_of_node_3(Hist(), isr_full_after=None).records, RUN_BOUND)["liveness"]["faults"][0]
    stuck = _judge_with(kill_of_node_3(Hist(), isr_full_after=None, before=10.0 * longer).records, RUN_BOUND)
    (entry,) = stuck["liveness"]["faults"]
    assert entry["bound"] == base["bound"] and entry["bound_parts"] == base["bound_parts"]
    assert [ex["measures"] for ex in stuck["anomalies"]["slow-recovery"]] == [["isr"]]
    fine = _judge_with(kill_of_node_3(Hist(), isr_full_after=45.2, before=10.0 * longer).records, RUN_BOUND)
    assert fine["anomalies"]["slow-recovery"] == []


def test_consumers_reading_faster_than_producers_write_shorten_the_catch_up():
    """The catch-up rate is the fastest the history shows records moving: a consumer that
    read 200 records in one second (the same Fetch path a follower uses) makes the 332
    missed sends 1.7 s of catch-up, not 16.6 s at the producers' 20/s."""
    v = _judge_with(kill_of_node_3(Hist(), isr_full_after=45.2, read_burst=True).records, RUN_BOUND)
    (entry,) = v["liveness"]["faults"]
    assert entry["bound_parts"]["peak records/s"] == 200
    assert entry["bound_parts"]["catch-up"] == pytest.approx(332 / 200, abs=0.1)
    assert v["anomalies"]["slow-recovery"] == []  # 45.2 s < 39.2 + 17 + 1.7


def test_no_catch_up_when_no_isr_shrank_during_the_fault():
    """A fault that took nobody out of the ISR (no shrunk answer during it) gets no catch-up:
    nobody missed anything."""
    h = Hist()
    _sends(h, 0, 5, 10)
    h.at(5).all_metadata(full=True)
    h.at(6).fault("elect", "start")
    _sends(h, 6, 20, 10)
    h.at(20).all_metadata(full=True)
    h.at(21).fault("elect", "stop")
    _sends(h, 21, 23, 10)
    h.at(23).poll(PARTITIONS)
    h.all_metadata(full=True)
    h.at(30).fault("heal-all", "stop", targets=())
    (entry,) = _judge_with(h.records, RUN_BOUND)["liveness"]["faults"]
    assert entry["bound_parts"]["catch-up"] == 0 and entry["bound"] == pytest.approx(39.2, abs=0.1)
