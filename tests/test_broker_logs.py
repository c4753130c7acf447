"""The brokers' log lines beside each anomaly (rundir/broker_logs.py): a synthetic run directory
with one real anomaly (a lost write on t/0, judged by the real checker), a config.json and
node logs with lines inside and just outside the window, of other partitions, and WARNs."""
import json
from datetime import datetime, timedelta, timezone

import pytest

from kipcheck.checks.api import check
from kipcheck.rundir import broker_logs
from kipcheck.rundir.history import write_jsonl

S = 1_000_000_000
#: Unix ms at the history's time 0, as the polls map it
WALL0_MS = 1_790_000_000_000


def stamp(history_s: float, skew_s: float = 0.0, tz_hours: int = 0) -> str:
    """log4j's `[%d]` for a history time, in a zone `tz_hours` east of UTC."""
    t = datetime.fromtimestamp((WALL0_MS + round(history_s * 1000)) / 1000 + skew_s, timezone(timedelta(hours=tz_hours)))
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def line(history_s: float, level: str, text: str, **kw) -> str:
    return f"[{stamp(history_s, **kw)}] {level} {text}\n"


def history(clock_node: int | None = None) -> list[dict]:
    """Sends of a, b, c to t/0 at offsets 0-2 (10.0-10.5 s), a poll at 11.0 s that returns 0 and 2:
    `lost-write` of offset 1 with the proof [2, 3, 7] (with a clock fault: [4, 5, 9]). The poll
    maps wall = history + WALL0_MS. `clock_node`: that node's clock 300 s behind from 9 s to 12.1 s."""
    recs = []

    def add(t_s, process, type_, f, value):
        recs.append({"time": round(t_s * S), "process": process, "type": type_, "f": f, "value": value})

    for k, v in enumerate("abc"):
        add(10.0 + 0.2 * k, 0, "invoke", "send", {"topic": "t", "partition": 0, "value": v})
        add(10.1 + 0.2 * k, 0, "ok", "send", {"topic": "t", "partition": 0, "value": v, "offset": k})
    add(10.9, 9, "invoke", "poll", {"topic": "t"})
    add(11.0, 9, "ok", "poll", {"topic": "t", "records": [["t", 0, 0, "a"], ["t", 0, 2, "c"]],
                                "wall_minus_history_ms": WALL0_MS})
    if clock_node is not None:
        v = {"fault": "clock-skew", "topic": "t", "partition": 0, "target": "leader", "index": 0, "offset": -300}
        add(9.0, "nemesis", "invoke", "fault", {**v, "phase": "start"})
        add(9.1, "nemesis", "ok", "fault", {**v, "phase": "start", "targets": [clock_node], "skew_s": -300})
        add(12.0, "nemesis", "invoke", "fault", {**v, "phase": "stop", "targets": [clock_node]})
        add(12.1, "nemesis", "ok", "fault", {**v, "phase": "stop", "targets": [clock_node]})
    recs.sort(key=lambda r: r["time"])
    return [{"index": i, **r} for i, r in enumerate(recs)]


NODE1 = [
    (7.9, "INFO", "[Partition t-0 broker=1] ISR updated to 1,2 (kafka.cluster.Partition)"),  # 0.3 s before the window
    (8.5, "INFO", "[Partition t-0 broker=1] ISR updated to 1,2,3 (kafka.cluster.Partition)"),
    (10.25, "WARN", "[UnifiedLog partition=t-0, dir=/d] Non-monotonic update of high watermark from "
                    "(offset=2 segment=[0:99]) to (offset=1 segment=[0:50]) <b>&"),
    (10.5, "INFO", "[Partition t-1 broker=1] ISR updated to 1,2,3 (kafka.cluster.Partition)"),  # another partition
    (10.6, "INFO", "Created log for partition t-10 in /d/t-10 (kafka.log.LogManager)"),  # t-10, not t-0
    (10.65, "INFO", "[Broker id=1] Creating new partition t-0-0 with topic id X. (state.change.logger)"),  # topic t-0
    (10.7, "WARN", "[RaftManager id=1] Connection to node 2 could not be established. (NetworkClient)"),  # no partition
    (11.5, "ERROR", "[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error for partition t-0 at offset 1"),
    (12.9, "INFO", "[ReplicaFetcherManager on broker 1] Removed fetcher for partitions Set(t-0, t-1)"),
    (13.1, "INFO", "[Partition t-0 broker=1] ISR updated to 1 (kafka.cluster.Partition)"),  # 0.1 s after the window
]
TRACE = ["org.apache.kafka.common.errors.NotLeaderOrFollowerException: not the leader",
         "\tat kafka.server.ReplicaFetcherThread.processPartitionData(x.scala:1)",
         "\tat kafka.server.AbstractFetcherThread.process(y.scala:2)",
         "\tat kafka.server.AbstractFetcherThread.run(z.scala:3)",
         "\tat java.lang.Thread.run(Thread.java:4)"]


def run_dir(tmp_path, node1=NODE1, node2=(), node3=(), clock_node=None, tz_hours=0, config_started_s=-0.7):
    """A run directory: history, config.json (started `config_started_s` from history time 0,
    in the zone `tz_hours` east of UTC; the nodes write their logs in that zone) and node logs."""
    write_jsonl(history(clock_node), tmp_path / "history.jsonl")
    zone = timezone(timedelta(hours=tz_hours))
    started = datetime.fromtimestamp(WALL0_MS / 1000 + config_started_s, zone).strftime("%Y-%m-%dT%H:%M:%S%z")
    (tmp_path / "config.json").write_text(json.dumps({"kafka_version": "4.3.1", "started": started,
                                                      "workload": {"topic": "t"}}))
    for node, lines in ((1, node1), (2, node2), (3, node3)):
        d = tmp_path / "cluster" / f"node-{node}"
        d.mkdir(parents=True)
        text = ""
        for entry in lines:
            t, level, msg = entry[:3]
            kw = dict(entry[3]) if len(entry) > 3 else {}
            text += line(t, level, msg, tz_hours=tz_hours, **kw)
            if level == "ERROR":
                text += "".join(t + "\n" for t in TRACE)
        (d / "server.log").write_text(text)
        (d / "stdout.log").write_text(line(10.3, "WARN", "stdout is not read: t-0"))
    return tmp_path


def lost_write(verdict: dict) -> dict:
    (example,) = verdict["anomalies"]["lost-write"]
    assert len(example["indices"]) == 3
    return example


def texts(block: dict) -> list[str]:
    return [ln["text"].split("\n")[0] for ln in block["lines"]]


def test_the_lines_naming_the_partition_within_the_window_mapped_to_history_time(tmp_path):
    node2 = [(9.0, "INFO", "[ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] Truncating partition t-0 with "
                           "TruncationState(offset=1, completed=true) due to leader epoch"),
             (9.0, "INFO", "Truncating partition t-00 (another topic-partition's name that starts alike)")]
    verdict = check(run_dir(tmp_path, node2=node2))  # the real checker, through the API: the call is wired
    assert verdict["valid"] is False
    assert lost_write(verdict)["indices"] == [2, 3, 7]
    block = lost_write(verdict)[broker_logs.FIELD]
    assert block["partitions"] == ["t-0"]
    assert block["window_s"] == [8.2, 13.0]  # 2 s around the proof records (10.2, 10.3 and 11.0 s)
    assert block["mapping"] == {"wall_minus_history_ms": WALL0_MS, "source": "poll at index 7"}
    assert texts(block) == [NODE1[1][2], node2[0][2], NODE1[2][2], NODE1[7][2], NODE1[8][2]]  # time order
    assert [(ln["node"], ln["history_s"], ln["level"]) for ln in block["lines"]] == [
        (1, 8.5, "INFO"), (2, 9.0, "INFO"), (1, 10.25, "WARN"), (1, 11.5, "ERROR"), (1, 12.9, "INFO")]
    assert block["lines"][2]["time"] == stamp(10.25)  # the log's own timestamp, as written
    assert block["matched"] == 5
    # a stack trace keeps its first CONTINUATION lines
    assert block["lines"][3]["text"].split("\n")[1:] == TRACE[:broker_logs.CONTINUATION]
    top = verdict[broker_logs.FIELD]
    assert top["logs"] == ["cluster/node-1/server.log", "cluster/node-2/server.log", "cluster/node-3/server.log"]
    assert top["examples"] == 2 and top["lines"] == 10 and top["left_out"] == 0  # and the poll-skip [3, 7]
    assert verdict["anomalies"]["poll-skip"][0][broker_logs.FIELD]["lines"] == block["lines"]
    json.dumps(verdict)  # still plain JSON


def test_local_time_is_read_in_the_runs_zone_and_config_started_maps_without_a_poll(tmp_path):
    d = run_dir(tmp_path, tz_hours=2)  # the brokers write local time 2 h east of UTC, as config.json's started says
    verdict = check(d)
    assert [ln["history_s"] for ln in lost_write(verdict)[broker_logs.FIELD]["lines"]] == [8.5, 10.25, 11.5, 12.9]
    # no poll carries a mapping: history time 0 is config.json's `started` (1 s resolution), here 1 s early
    recs = history()
    del recs[7]["value"]["wall_minus_history_ms"]
    write_jsonl(recs, d / "history.jsonl")
    block = lost_write(check(d))[broker_logs.FIELD]
    assert block["mapping"]["source"].startswith("config.json started")
    assert block["mapping"]["wall_minus_history_ms"] == WALL0_MS - 1000
    assert [ln["history_s"] for ln in block["lines"]] == [8.9, 9.5, 11.25, 12.5]  # each 1 s late: 7.9 in, 12.9 out


def test_warn_and_error_first_then_the_lines_nearest_the_proof_at_most_forty(tmp_path):
    many = [(8.3 + 0.07 * k, "INFO", f"[Partition t-0 broker=1] line {k}") for k in range(65)]  # 8.3 .. 12.78 s
    block = lost_write(check(run_dir(tmp_path, node1=NODE1 + many)))[broker_logs.FIELD]
    assert block["matched"] == 4 + 65 and len(block["lines"]) == broker_logs.MAX_LINES == 40
    kept = texts(block)
    assert NODE1[2][2] in kept and NODE1[7][2] in kept  # the WARN and the ERROR
    proof = (10.2, 10.3, 11.0)  # the proof records' times

    def distance(t):
        return min(abs(t - p) for p in proof)
    kept_info = [distance(ln["history_s"]) for ln in block["lines"] if ln["level"] == "INFO"]
    dropped = [distance(t) for t, level, text in NODE1 + many
               if level == "INFO" and 8.2 <= t <= 13.0 and "t-0 " in text + " " and text not in kept]
    assert dropped and max(kept_info) <= min(dropped)
    assert [ln["history_s"] for ln in block["lines"]] == sorted(ln["history_s"] for ln in block["lines"])


def test_the_total_bound_goes_to_anomalies_before_known_deviations(tmp_path, monkeypatch):
    many = [(8.3 + 0.07 * k, "INFO", f"[Partition t-0 broker=1] line {k}") for k in range(65)]
    d = run_dir(tmp_path, node1=NODE1 + many)
    first = {"indices": [2, 3, 7], "message": "m", "topic": "t", "partition": 0}
    verdict = {"anomalies": {"lost-write": [dict(first)], "duplicate": [dict(first)]},
               "known": {"uncommitted-read": [dict(first)]}}
    monkeypatch.setattr(broker_logs, "MAX_TOTAL_LINES", 50)
    broker_logs.enrich(verdict, d)
    shown = [len(verdict[s][n][0][broker_logs.FIELD]["lines"])
             for s, n in (("anomalies", "lost-write"), ("anomalies", "duplicate"), ("known", "uncommitted-read"))]
    assert shown == [40, 10, 0]
    assert verdict[broker_logs.FIELD]["lines"] == 50 and verdict[broker_logs.FIELD]["left_out"] == 3 * 69 - 50


def test_a_node_under_a_clock_fault_is_read_at_its_faked_time(tmp_path):
    node3 = [(10.4, "WARN", "[Partition t-0 broker=3] Shrinking ISR from 3,1 to 3", {"skew_s": -300}),
             (10.45, "WARN", "[Partition t-0 broker=3] ISR faked and not under the fault", {"skew_s": -600})]
    block = lost_write(check(run_dir(tmp_path, node3=node3, clock_node=3)))[broker_logs.FIELD]
    skewed = [ln for ln in block["lines"] if ln["node"] == 3]
    assert [(ln["history_s"], ln["clock_skew_s"]) for ln in skewed] == [(10.4, -300.0)]


def test_no_partition_named_gives_the_warnings_of_the_brokers_named(tmp_path):
    d = run_dir(tmp_path, node2=[(10.3, "WARN", "node 2 speaks of nothing in particular")])
    verdict = {"anomalies": {"slow-recovery": [{"indices": [6], "message": "no partition here", "broker": 1}]}}
    block = broker_logs.enrich(verdict, d)["anomalies"]["slow-recovery"][0][broker_logs.FIELD]
    assert block["partitions"] == [] and block["window_s"] == [8.9, 12.9]
    # every WARN and ERROR of node 1 in the window, whatever it names; node 2 is not named
    assert [(ln["node"], ln["level"], ln["history_s"]) for ln in block["lines"]] == [
        (1, "WARN", 10.25), (1, "WARN", 10.7), (1, "ERROR", 11.5)]


def test_a_history_given_as_parquet_or_as_a_file_of_the_run_gets_the_same_lines(tmp_path):
    from kipcheck.rundir.history import to_parquet
    d = run_dir(tmp_path)
    expected = lost_write(check(d))[broker_logs.FIELD]
    assert lost_write(check(d / "history.jsonl"))[broker_logs.FIELD] == expected
    to_parquet(d / "history.jsonl", d / "history.parquet")
    (d / "history.jsonl").unlink()
    assert lost_write(check(d))[broker_logs.FIELD] == expected


def test_a_run_without_node_logs_is_left_alone(tmp_path):
    write_jsonl(history(), tmp_path / "history.jsonl")
    verdict = check(tmp_path)
    assert broker_logs.FIELD not in verdict and broker_logs.FIELD not in lost_write(verdict)


def test_the_report_shows_the_lines_under_the_proof_escaped(tmp_path):
    from kipcheck.checks.api import write_verdict
    from kipcheck.reports.html import write_report
    d = run_dir(tmp_path)
    write_verdict(check(d), d / "verdict.json")
    page = write_report(d).read_text()
    example = page[page.index("id='lost-write-0'"):]
    example = example[:example.index("</div>")]
    assert "<details class='broker-logs' open>" in example  # open: it holds a WARN
    assert "broker log lines: 4 of 4 naming t-0 within 8.2–13.0 s" in example
    assert "Non-monotonic update of high watermark" in example and "&lt;b&gt;&amp;" in example and "<b>&" not in example
    assert stamp(10.25) in example and "poll at index 7" in example
    assert "broker_logs" not in example  # not repeated in the details block


@pytest.mark.parametrize("text,names", [
    ("Set(t-0, t-1)", ["t-0"]), ("[Partition t-0 broker=1]", ["t-0"]), ("partition=t-0,", ["t-0"]),
    ("t-0.", ["t-0"]), ("t-00", []), ("t-0-0", []), ("xt-0", []), ("/d/t-0 with", ["t-0"]), ("t-0.abc-delete", []),
])
def test_names_are_matched_as_whole_words(text, names):
    assert broker_logs.needle_pattern(["t-0"]).findall(text) == names


@pytest.mark.spark
def test_the_spark_engine_gets_the_same_lines_on_the_driver(tmp_path):
    pytest.importorskip("pyspark")
    from kipcheck.checks.verdict import comparable
    from kipcheck.rundir.history import to_parquet
    d = run_dir(tmp_path)
    to_parquet(d / "history.jsonl", d / "history.parquet")  # what Spark reads; the lines come from the same logs
    local, remote = check(d), check(d, engine="spark", master="local[1]")
    assert remote["engine"] == "spark" and comparable(local) == comparable(remote)
    assert len(lost_write(remote)[broker_logs.FIELD]["lines"]) == 4


def test_a_metadata_log_anomaly_is_placed_when_the_controller_decided_it_not_when_the_run_read_it(tmp_path):
    """The controllers' metadata log is appended after the workload (here at 30 s); its records'
    `log_time_ms` say when the controller wrote them (10.0 and 10.4 s): the window is around those."""
    run = run_dir(tmp_path)
    records = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines()]
    move = [{"kind": "create", "replicas": [1, 2, 3], "isr": [1, 2, 3], "adding": [], "removing": []},
            {"kind": "change", "replicas": [1, 2, 4, 3], "isr": [1, 3, 4], "adding": [4], "removing": [3]},
            {"kind": "change", "replicas": [1, 2, 4], "isr": [1, 4], "adding": [], "removing": []}]
    for k, (v, at_s) in enumerate(zip(move, (9.6, 10.0, 10.4))):
        records.append({"index": len(records), "time": 30 * S + k, "process": "metadata-log", "type": "ok",
                        "f": "partition_change", "value": {**v, "topic": "t", "partition": 0, "offset": 50 + k,
                                                           "log_time_ms": WALL0_MS + round(at_s * 1000)}})
    write_jsonl(records, run / "history.jsonl")
    (example,) = check(run)["anomalies"]["premature-reassignment-completion"]
    block = example[broker_logs.FIELD]
    assert block["window_s"] == [8.0, 12.4]
    assert texts(block) == [NODE1[1][2], NODE1[2][2], NODE1[7][2]]  # t-0's lines from 8.5 to 11.5 s
