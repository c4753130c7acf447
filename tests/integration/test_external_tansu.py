"""Clusters kipcheck did not start: the external backend against Tansu, a single-node
Kafka-compatible broker without replication and without OffsetsForLeaderEpoch.

The run must use what the broker supports, say what it skipped and why (terminal,
config.json, report), and end by its verdict (0/1/3), with no traceback anywhere on the
terminal. Also: a worker's internal exception on a real broker lands in harness.log and
in the history (`info`, `internal: true`), never on the terminal, and the run goes on."""
from __future__ import annotations

import json

import pytest

from kipcheck.rundir.history import read_history
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.progress import ProgressUI
from kipcheck.harness.run import RunOptions, run
from tests.integration.run_support import run_to_verdict
from tests.integration.tansu_support import tansu

pytestmark = pytest.mark.cluster  # a live broker (Kafka or Tansu), slow


@pytest.fixture
def tansu_bootstrap(tmp_path):
    with tansu(tmp_path) as bootstrap:
        yield bootstrap


@pytest.fixture(scope="module")
def tansu_run(tmp_path_factory):
    """One `kipcheck run --backend external` of 20 s against a Tansu of its own, read by the two
    tests below (what it skipped; its conformance table): both read the same kind of run, so one
    run serves them (issue 32: they were two runs, of 20 s and 15 s)."""
    root = tmp_path_factory.mktemp("tansu-run")
    with tansu(root) as bootstrap:
        yield run_to_verdict(root / "runs", "--backend", "external", "--bootstrap", bootstrap,
                             "--duration", "20", "--faults", "none", timeout=240)


def test_external_run_against_tansu_skips_what_it_lacks(tansu_run):
    run = tansu_run
    terminal, run_dir = run.terminal, run.run_dir
    skipped = {s["key"]: s["reason"] for s in run.config["skipped"]}
    # Tansu: one node (RF 1), no OffsetForLeaderEpoch (API key 23), ListOffsets up to v9 only
    assert "replication factor 1" in skipped["consumer.follower_fetching"]
    assert "OffsetForLeaderEpoch" in skipped["prober.offsets_for_leader_epoch"]
    assert "prober.list_offsets@-6" in skipped and "prober.fetch_session" not in skipped
    assert "skipped: consumers fetching from a follower" in " ".join(terminal.split())
    assert "replication factor 1" in (run_dir / "report" / "index.html").read_text()
    records = list(read_history(run_dir / "history.jsonl"))
    assert not [r for r in records if r["f"] == "offsets_for_leader_epoch"]  # skipped, not failed 1000 times
    assert [r for r in records if r["f"] == "fetch" and r["type"] == "ok"]  # what it supports did run
    assert [r for r in records if r["f"] == "send" and r["type"] == "ok"]


def test_tansu_gets_a_per_kip_conformance_table_with_no_false_claim(tansu_run):
    """The run ends by its verdict with the conformance table (verdict.json, terminal, report).
    No row holds without observations; what Tansu cannot be asked is "not asked" with why:
    KIP-1166 (no KRaft quorum: no DescribeQuorum), KIP-1023 (no tiered-offset answer) and
    OffsetsForLeaderEpoch. A requested partition Tansu leaves out of a full fetch answer is a
    KIP-227 full-response violation, never a KIP-392 `wrong-fetch-error` with "HWM -1"."""
    run = tansu_run
    table = run.verdict["conformance"]
    assert list(table) == ["KIP-392", "KIP-227", "KIP-1023", "KIP-1166", "KIP-966", "KIP-455", "KIP-32", "KIP-734", "KIP-848", "KIP-932", "KIP-98"]
    rows = {rule: row for kip in table.values() for rule, row in kip.items()}
    for rule, row in rows.items():
        assert (row["status"] == "holds") <= (row["observations"] > 0), (rule, row)
        assert row["status"] != "not in this release", (rule, row)  # not Kafka: no release features
    kip1166 = rows["kip1166.propagation_statistic"]
    assert kip1166["status"] == "not asked" and "DescribeQuorum" in kip1166["why"], kip1166
    assert rows["kip1023.offset_order"]["status"] == "not asked", rows["kip1023.offset_order"]
    assert rows["kip392.epoch_end_offset_possible"]["status"] == "not asked"
    assert "OffsetForLeaderEpoch" in rows["kip392.epoch_end_offset_possible"]["why"]
    assert rows["kip392.preferred_read_replica_outcomes"]["status"] == "not asked"
    assert rows["kip966.may_lead"]["status"] == "not asked" and "metadata log" in rows["kip966.may_lead"]["why"]
    stamps = rows["kip32.append_time_allowed"]  # an external broker's clock is not this machine's
    assert stamps["status"] == "not asked" and "clock" in stamps["why"], stamps
    by_time = rows["kip32.offset_for_time_allowed"]  # nor asked for an offset by time: no stamps to judge it by
    assert by_time["status"] == "not asked" and by_time["observations"] == 0, by_time
    largest = rows["kip734.max_timestamp_answer_allowed"]  # judged by the same stamps
    assert largest["status"] == "not asked" and "clock" in largest["why"], largest
    for example in run.verdict["anomalies"]["wrong-fetch-error"]:
        assert "HWM -1" not in example["message"], example
    for example in run.verdict["anomalies"]["fetch-session-violation"]:
        assert example["rule"] in rows, example
    gaps = [e for e in run.verdict["anomalies"]["fetch-session-violation"]
            if e["rule"] == "kip227.full_response_partitions"]
    if gaps:  # Tansu 0.1.2 answers max_wait_ms 0 with no partition: the KIP-392 rows saw nothing
        assert rows["kip227.full_response_partitions"]["status"] == "fails"
        assert "left out requested partitions" in gaps[0]["message"]
    assert "conformance (per KIP rule):" in run.terminal
    assert "propagation_statistic" in run.terminal and "not asked" in run.terminal
    assert "KIP conformance" in (run.run_dir / "report" / "index.html").read_text()


def test_a_worker_bug_is_history_and_harness_log_not_the_terminal(tansu_bootstrap, tmp_path, monkeypatch, capfd):
    """A prober that raises on every Fetch answer (a bug of ours, provoked): each such request
    ends `info` with the exception, its traceback is in harness.log, the prober reconnects and
    keeps probing, and the run ends by its verdict."""
    from kipcheck.harness.clients import observer
    from kipcheck.harness.clients.prober import Prober

    def broken_entries(self, *args, **kwargs):  # whatever `_entries` takes
        raise ValueError("provoked decoding bug")
    monkeypatch.setattr(Prober, "_entries", broken_entries)
    calls = iter(range(10**9))
    real_metadata = observer.metadata

    def flaky_metadata(conn, topics):  # the observer's every fourth Metadata answer "fails to decode"
        if next(calls) % 4 == 2:
            raise KeyError("provoked observer bug")
        return real_metadata(conn, topics)
    monkeypatch.setattr(observer, "metadata", flaky_metadata)
    run_dir, verdict = run(RunOptions(duration=8, backend="external", bootstrap=tansu_bootstrap, faults=[],
                                      runs_dir=str(tmp_path / "runs")), ProgressUI(quiet=True))
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err and "provoked" not in out + err, out + err
    assert verdict is not None and (run_dir / "verdict.json").exists()
    log = (run_dir / "harness.log").read_text()
    assert "Traceback" in log and "ValueError: provoked decoding bug" in log
    records = list(read_history(run_dir / "history.jsonl"))
    broken = [r for r in records if r["process"] != "observer" and r["f"] == "fetch" and r["type"] == "info"]
    assert len(broken) >= 2, "the prober went on after the first failure"
    assert all(r["value"]["internal"] and r["value"]["error"] == "ValueError: provoked decoding bug" for r in broken)
    assert len({r["process"] for r in broken}) == len(broken), "a process with an info issued nothing more"
    assert [r for r in records if r["f"] == "list_offsets" and r["type"] == "ok"]  # other probes still ran
    observed = [r for r in records if r["f"] == "metadata" and r["type"] in ("ok", "info")]
    lost = [r for r in observed if r["type"] == "info"]
    assert lost and all(r["value"]["internal"] and "provoked observer bug" in r["value"]["error"] for r in lost)
    assert [r for r in observed if r["type"] == "ok" and r["index"] > lost[0]["index"]], "the observer went on"
    assert len({r["process"] for r in observed}) > 1, "as new processes"
    assert "KeyError: 'provoked observer bug'" in log


def test_a_dead_worker_is_exit_2_naming_the_verdict_so_far(tansu_bootstrap, tmp_path, monkeypatch, capfd):
    """A worker thread that dies outright is kipcheck's own failure: a one-line error naming
    the verdict of the history so far, verdict.json written, the traceback in harness.log."""
    from kipcheck.harness.clients.observer import Observer

    def dies(self):
        self.stop_event.wait(2)
        raise RuntimeError("provoked observer death")
    monkeypatch.setattr(Observer, "work", dies)
    with pytest.raises(HarnessError) as raised:
        run(RunOptions(duration=30, backend="external", bootstrap=tansu_bootstrap, faults=[],
                       runs_dir=str(tmp_path / "runs")), ProgressUI(quiet=True))
    message = str(raised.value)
    [run_dir] = (tmp_path / "runs").iterdir()
    verdict = json.loads((run_dir / "verdict.json").read_text())
    state = {True: "VALID", False: "INVALID"}.get(verdict["valid"], "UNKNOWN")
    assert message.startswith("observer failed: RuntimeError: provoked observer death (history so far: " + state)
    assert str(run_dir / "verdict.json") in message and "harness.log" in message and "\n" not in message
    assert "RuntimeError: provoked observer death" in (run_dir / "harness.log").read_text()
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err
