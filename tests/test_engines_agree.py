"""The local and Spark engines give the same verdict (one shared local[2] session)."""

import pytest

from kipcheck.checks import engine_local
from kipcheck.rundir.history import HistoryError, to_parquet, write_jsonl
from tests.synthetic import generate, mutated
from kipcheck.checks.verdict import comparable

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from kipcheck.checks.engine_spark import spark_session
    session = spark_session("local[2]")
    yield session
    session.stop()


@pytest.mark.parametrize("seed, events, parquet, mutate", [
    (1, 3000, True, False), (2, 3000, False, True), (3, 1500, True, True)])
def test_same_verdict(spark, tmp_path, seed, events, parquet, mutate):
    from kipcheck.checks import engine_spark
    records = list(generate(events, seed=seed, partitions=3))
    if mutate:
        records = mutated(records)
    write_jsonl(records, tmp_path / "history.jsonl")
    path = tmp_path / "history.jsonl"
    if parquet:
        to_parquet(path, tmp_path / "history.parquet")
        path = tmp_path / "history.parquet"
    local = engine_local.check_path(path)
    remote = engine_spark.check_path(path, spark=spark)
    assert comparable(local) == comparable(remote)
    assert local["valid"] is (not mutate)


def test_spark_names_the_bad_row(spark, tmp_path):
    from kipcheck.checks import engine_spark
    records = list(generate(200, seed=4))
    write_jsonl(records, tmp_path / "history.jsonl")
    to_parquet(tmp_path / "history.jsonl", tmp_path / "history.parquet")
    # corrupt one row of the Parquet copy behind the converter's back
    import pyarrow.parquet as pq
    import pyarrow as pa
    t = pq.read_table(tmp_path / "history.parquet")
    f = t.column("f").to_pylist()
    f[57] = "bogus"
    pq.write_table(t.set_column(t.schema.get_field_index("f"), "f", pa.array(f)),
                   tmp_path / "history.parquet")
    with pytest.raises(HistoryError) as e:
        engine_spark.check_path(tmp_path / "history.parquet", spark=spark)
    assert "\n" not in str(e.value) and "index 57" in str(e.value) and "unknown f 'bogus'" in str(e.value)


def test_same_coverage_with_raw_fetches(spark, tmp_path):
    """Coverage counts travel through the engines like anomalies: both count the same."""
    from kipcheck.checks import engine_spark
    from tests.support.histories import consumer_fetch, valid_history
    records = valid_history()
    for offset, session in ((5, (0, -1)), (6, (77, 0)), (7, (77, 1)), (8, (77, 2))):
        records += consumer_fetch(len(records), offset, [offset], hwm=20, session=session)
    write_jsonl(records, tmp_path / "history.jsonl")
    local = engine_local.check_path(tmp_path / "history.jsonl")
    remote = engine_spark.check_path(tmp_path / "history.jsonl", spark=spark)
    assert comparable(local) == comparable(remote)
    assert local["coverage"]["kip227.next_epoch"]["observations"] == 2


def test_one_job_for_many_runs_gives_each_its_own_verdict(spark, tmp_path):
    """Runs checked together in one Spark job get exactly the verdicts they get alone,
    each under its own profile, and anomalies stay with the run that has them."""
    from kipcheck.checks import engine_spark
    paths, profiles = [], ["kip", "kafka-4.3", "kip"]
    for n, mutate in enumerate((False, True, False)):
        records = list(generate(800 + 300 * n, seed=10 + n, partitions=2))
        if mutate:
            records = mutated(records)
        (tmp_path / f"r{n}").mkdir()
        write_jsonl(records, tmp_path / f"r{n}" / "history.jsonl")
        paths.append(tmp_path / f"r{n}")
    together = engine_spark.check_paths(paths, profiles=profiles, spark=spark)
    alone = [engine_local.check_path(p, profile=prof) for p, prof in zip(paths, profiles)]
    assert [comparable(v) for v in together] == [comparable(v) for v in alone]
    assert [v["valid"] for v in together] == [True, False, True]
    assert [v["profile"] for v in together] == profiles


def test_same_liveness_verdict(spark, tmp_path):
    """Heals, recoveries, a slow one and a crash loop: both engines measure and judge alike."""
    from kipcheck.checks import engine_spark
    from kipcheck.checks.recovery import liveness_rule
    from kipcheck.checks.verdict import default_rules
    from tests.support.liveness import PARTITIONS, Hist, crash, kill_and_heal

    h = Hist()
    kill_and_heal(h, 10)
    h.at(11).send(0)
    h.at(12).send(1)
    h.poll(PARTITIONS)
    h.at(17).metadata(1, 0, full=False)  # still shrunk 7 s after the heal ...
    h.at(19).all_metadata(full=True)  # ... full at 9 s: slow against the 6 s bound below
    h.at(20).fault("pause", "start", targets=())
    h.at(25).fault("pause", "stop", targets=(2,))
    h.at(26).healthy()
    for i in range(7):
        crash(h, process=100 + i)
    h.at(40).fault("heal-all", "stop", targets=())
    write_jsonl(h.records, tmp_path / "history.jsonl")
    rules = default_rules(liveness_rule({"seconds": 6.0, "parts": {}, "source": "test"}))
    local = engine_local.check_path(tmp_path / "history.jsonl", rules=rules)
    remote = engine_spark.check_path(tmp_path / "history.jsonl", rules=rules, spark=spark)
    assert comparable(local) == comparable(remote)
    assert [f["status"] for f in local["liveness"]["faults"]] == ["slow", "recovered"]
    assert len(local["anomalies"]["slow-recovery"]) == 1 and len(local["anomalies"]["client-crash-loop"]) == 1
    assert local["counts"]["client_crashes"] == 7


def test_same_verdict_on_the_model_rules(spark, tmp_path):
    """The raw-protocol checks (fetch records in the log checks, preferred replica,
    sessions, ListOffsets) give the same verdict in both engines."""
    from kipcheck.checks import engine_spark
    from tests.support.raw_protocol import every_gap
    records = every_gap()
    write_jsonl(records, tmp_path / "history.jsonl")
    local = engine_local.check_path(tmp_path / "history.jsonl", profile="kafka-4.3")
    remote = engine_spark.check_path(tmp_path / "history.jsonl", spark=spark, profile="kafka-4.3")
    assert comparable(local) == comparable(remote)
    assert {n for n, ex in local["anomalies"].items() if ex} == {
        "inconsistent-offset", "preferred-replica-violation", "fetch-session-violation", "tiered-offset-violation"}


@pytest.mark.parametrize("gap", ["killed", "omitted", "deep"])
def test_same_verdict_on_the_second_pass_gaps(spark, tmp_path, gap):
    """Issue 21's rules that read other brokers' answers: a preferred replica every broker
    shows out of the ISR, an omitted partition whose HWM the broker had moved, a follower
    going back below its new leader's HWM: one verdict in both engines."""
    from kipcheck.checks import engine_spark
    from tests.support.histories import follower_with_leader, leader_answers
    from tests.support.raw_protocol import killed, omitted_after
    records, name = {"killed": (lambda: killed().records, "preferred-replica-violation"),
                     "omitted": (lambda: omitted_after().records, "fetch-session-violation"),
                     "deep": (lambda: follower_with_leader(leader_answers(10, epoch=4)), "hwm-regression")}[gap]
    write_jsonl(records(), tmp_path / "history.jsonl")
    local = engine_local.check_path(tmp_path / "history.jsonl", profile="kafka-4.3")
    remote = engine_spark.check_path(tmp_path / "history.jsonl", spark=spark, profile="kafka-4.3")
    assert comparable(local) == comparable(remote)
    assert local["anomalies"][name]


def test_same_conformance_table(spark, tmp_path):
    """The per-KIP table (anomalies per model rule, the run's skips and missing features from
    its config.json) is the same from both engines, and shows each status it can."""
    from kipcheck.checks import engine_spark
    from tests.support.histories import full_fetch_leaving_out, run_dir, sends
    from tests.support.histories import fetch, history
    records = history(*sends(3), fetch(1, hwm=3, records=[1, 2]), fetch(2, hwm=2, records=[2, 3]),
                      fetch(12, hwm=10), full_fetch_leaving_out(1))
    d = run_dir(tmp_path, records, kafka_version="4.2.2", features={"kip-1023": "not in this release"},
                skipped=[{"key": "prober.offsets_for_leader_epoch", "feature": "OffsetsForLeaderEpoch",
                          "reason": "not answered"}])
    local = engine_local.check_path(d, profile="kafka-4.3")
    remote = engine_spark.check_path(d, profile="kafka-4.3", spark=spark)
    assert comparable(local) == comparable(remote)
    shown = {row["status"] for kip in local["conformance"].values() for row in kip.values()}
    assert shown == {"holds", "fails", "known deviation", "not asked", "not in this release"}


@pytest.mark.parametrize("broken", [False, True])
def test_same_verdict_with_transactions(spark, tmp_path, broken):
    """The transaction rule and the history rule's transaction ends travel through both engines."""
    from kipcheck.checks import engine_spark
    from tests.test_checker_transactions import RC, base, reads
    h = reads(base())
    if broken:  # an aborted read and an LSO above the HWM
        h.rpoll(7, RC, (0, 2, "c")).fetch(5, 1, lso=8, hwm=7)
    write_jsonl(h.records, tmp_path / "history.jsonl")
    local = engine_local.check_path(tmp_path / "history.jsonl")
    remote = engine_spark.check_path(tmp_path / "history.jsonl", spark=spark)
    assert comparable(local) == comparable(remote)
    flagged = {k for k, v in local["anomalies"].items() if v}
    assert flagged == ({"aborted-read", "lso-violation"} if broken else set())
