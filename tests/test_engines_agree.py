"""The local and Spark engines give the same verdict (one shared local[2] session)."""
import copy
import json

import pytest

from checks import engine_local
from checks.history import HistoryError, to_parquet, write_jsonl
from checks.synthetic import generate
from checks.verdict import comparable

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    from checks.engine_spark import spark_session
    session = spark_session("local[2]")
    yield session
    session.stop()


def mutated(records):
    """A few anomalies of different kinds in one history."""
    records = copy.deepcopy(records)
    polls = [r for r in records if r["f"] == "poll" and r["type"] == "ok" and len(r["value"]["records"]) > 2]
    polls[0]["value"]["records"][1][3] = "forged"  # inconsistent-offset
    polls[-1]["value"]["records"].append(list(polls[-1]["value"]["records"][0]))  # nonmonotonic-poll
    return records


@pytest.mark.parametrize("seed, events, parquet, mutate", [
    (1, 3000, True, False), (2, 3000, False, True), (3, 1500, True, True)])
def test_same_verdict(spark, tmp_path, seed, events, parquet, mutate):
    from checks import engine_spark
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
    from checks import engine_spark
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


def test_same_verdict_on_the_model_rules(spark, tmp_path):
    """The raw-protocol checks (fetch records in the log checks, preferred replica,
    sessions, ListOffsets) give the same verdict in both engines."""
    from checks import engine_spark
    from tests.test_checker_gaps import every_gap
    records = every_gap()
    write_jsonl(records, tmp_path / "history.jsonl")
    local = engine_local.check_path(tmp_path / "history.jsonl", profile="kafka-4.3")
    remote = engine_spark.check_path(tmp_path / "history.jsonl", spark=spark, profile="kafka-4.3")
    assert comparable(local) == comparable(remote)
    assert {n for n, ex in local["anomalies"].items() if ex} == {
        "inconsistent-offset", "preferred-replica-violation", "fetch-session-violation", "tiered-offset-violation"}
