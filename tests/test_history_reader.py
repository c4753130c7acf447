"""Reading, validating and converting histories; bad input gets a one-line error."""
import argparse
import json

import pytest

from kipcheck.checks.cli_check import add_check_arguments, run_check_command
from kipcheck.rundir.history import HistoryError, read_history, resolve, to_parquet, write_jsonl
from tests.synthetic import generate


def rec(i, f="send", type_="invoke", value=None, process=0):
    return {"index": i, "time": i * 10, "process": process, "type": type_, "f": f,
            "value": {"topic": "t", "partition": 0, "value": "a"} if value is None else value}


def write_lines(tmp_path, lines):
    p = tmp_path / "history.jsonl"
    p.write_text("".join(line + "\n" for line in lines))
    return p


def error_of(path) -> str:
    with pytest.raises(HistoryError) as e:
        read_history(path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_reads_valid_jsonl(tmp_path):
    records = list(generate(300, seed=1))
    write_jsonl(records, tmp_path / "history.jsonl")
    assert read_history(tmp_path) == records


def test_truncated_line_is_named(tmp_path):
    good = json.dumps(rec(0))
    p = write_lines(tmp_path, [good, good.replace('"index": 0', '"index": 1')[:-1], good])
    msg = error_of(p)
    assert msg.startswith("history.jsonl:2:") and "truncated JSON" in msg


def test_cut_off_last_line_is_named(tmp_path):
    p = tmp_path / "history.jsonl"
    p.write_text(json.dumps(rec(0)) + "\n" + json.dumps(rec(1))[:20])
    assert error_of(p).startswith("history.jsonl:2: truncated JSON")


@pytest.mark.parametrize("mutate, expected", [
    (lambda r: r.update(f="frobnicate"), "unknown f 'frobnicate'"),
    (lambda r: r.pop("time"), "missing field 'time'"),
    (lambda r: r.update(type="maybe"), "unknown type 'maybe'"),
    (lambda r: r["value"].pop("partition"), "missing value field 'partition'"),
    (lambda r: r.update(index=0), "index 0 does not follow index 0"),
])
def test_bad_record_is_named(tmp_path, mutate, expected):
    bad = rec(1)
    mutate(bad)
    p = write_lines(tmp_path, [json.dumps(rec(0)), json.dumps(bad)])
    msg = error_of(p)
    assert msg.startswith("history.jsonl:2:") and expected in msg


def test_parquet_round_trip(tmp_path):
    records = list(generate(500, seed=2))
    write_jsonl(records, tmp_path / "history.jsonl")
    assert to_parquet(tmp_path / "history.jsonl", tmp_path / "history.parquet") == len(records)
    assert resolve(tmp_path).name == "history.parquet"
    assert read_history(tmp_path / "history.parquet") == records


def test_failed_conversion_leaves_no_parquet(tmp_path):
    p = write_lines(tmp_path, [json.dumps(rec(0)), "{"])
    with pytest.raises(HistoryError, match="history.jsonl:2"):
        to_parquet(p, tmp_path / "history.parquet")
    assert list(tmp_path.iterdir()) == [p]


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    p = write_lines(tmp_path, [json.dumps(rec(0)), json.dumps(rec(1, f="bogus"))])
    args = add_check_arguments(argparse.ArgumentParser()).parse_args([str(p), "--json"])
    assert run_check_command(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "history.jsonl:2" in err and "unknown f 'bogus'" in err


def test_cli_missing_path(tmp_path, capsys):
    args = add_check_arguments(argparse.ArgumentParser()).parse_args([str(tmp_path / "nope")])
    assert run_check_command(args) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.parametrize("value", [{"a": float("nan")}, {"a": [1, float("inf")]}, {"x": -float("inf"), "n": None},
                                   {"big": 2 ** 70, "n": None}, {1: "int key"}, {"s": "\ud800"}, {"n": None, "f": 0.5},
                                   {"nested": {"deep": [{"v": float("nan")}]}}])
def test_the_parquet_value_column_reads_back_as_json_would_write_it(value):
    """orjson writes NaN and infinities as null and refuses huge ints: those go through json."""
    from kipcheck.rundir.history import dumps_value, loads
    assert json.dumps(loads(dumps_value(value))) == json.dumps(json.loads(json.dumps(value)))
