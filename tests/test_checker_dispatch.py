"""The engines offer a record only to the rules that read its kind (`checks.verdict.Dispatch`,
each rule's `reads(f, type)`): a rule never sees another kind, every rule's declaration covers
every record its `split` takes, and a dispatched check gives the verdict of one that offers
every record to every rule."""
import gzip
import json
from functools import partial
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kipcheck.checks import engine_local
from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.base import BaseRule
from kipcheck.checks.rules.history_rules import PartitionHistoryRule
from kipcheck.checks.verdict import Dispatch, comparable, default_rules
from kipcheck.rundir.history import KNOWN_F
from kipcheck.rundir.records import TYPES
from tests.synthetic import generate, mutated

DATA = Path(__file__).parent / "data" / "recall"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "histories"


def _jsonl(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def corpus() -> list[list[dict]]:
    """Real histories (the recall corpus, the shared hand-made ones when present) and synthetic ones."""
    out = [_jsonl(p) for p in sorted(DATA.glob("*/history.jsonl.gz")) if p.parent.name != "ci-long"]
    out += [_jsonl(p) for p in sorted(SHARED.glob("*/history.jsonl"))]
    out.append(mutated(list(generate(3000, seed=4, partitions=3))))
    return out


def samples(histories, per_kind: int = 6) -> list[dict]:
    """A few records of each (f, type) of the histories, each also as a fatal completion."""
    seen: dict = {}
    for records in histories:
        for r in records:
            kept = seen.setdefault((r["f"], r["type"]), [])
            if len(kept) < per_kind:
                kept.append(r)
    out = [r for kept in seen.values() for r in kept]
    return out + [{**r, "value": {**r["value"], "fatal": True}} for r in out if isinstance(r["value"], dict)]


def _takes(rule, record) -> bool:
    try:
        return bool(rule.split(record))
    except Exception:  # it looked into the record far enough to fail: it reads that kind
        return True


def undeclared(rule, records) -> list[tuple]:
    """(f, type, original f) of each record that `rule.split` takes although `rule.reads` says the
    rule never reads that kind: every sample is offered under every kind the rule declines."""
    declined = [(f, t) for f in sorted(KNOWN_F) for t in sorted(TYPES) if not rule.reads(f, t)]
    return [(f, t, r["f"]) for r in records for f, t in declined if _takes(rule, {**r, "f": f, "type": t})]


@pytest.fixture(scope="module")
def histories():
    return corpus()


def test_every_rules_reads_cover_its_split(histories):
    records = samples(histories)
    assert {r["f"] for r in records} >= {"send", "poll", "fetch", "metadata", "fault", "assign", "revoke"}
    for rule in default_rules():
        assert undeclared(rule, records) == [], type(rule).__name__


class TooNarrow(PartitionHistoryRule):
    """Declares sends only, but its split takes polls too."""

    def reads(self, f, type_):
        return f == "send"


def test_a_declaration_narrower_than_split_is_caught(histories):
    missed = undeclared(TooNarrow(), samples(histories))
    assert ("poll", "ok", "poll") in missed


class Spy(BaseRule):
    """A streaming rule reading `send` records: remembers every (f, type) it was given."""

    streams = True
    key = "spy"
    fs = frozenset(("send",))

    def __init__(self):
        self.seen = []

    def group_keys(self, record):
        return ("spy",)  # it would take every record, were every record offered

    def start(self, key, profile):
        spy = self

        class Judge:
            def add(self, record):
                spy.seen.append((record["f"], record["type"]))

            def finish(self):
                return []
        return Judge()


def test_a_rule_is_offered_only_the_operations_it_reads():
    records = list(generate(2000, seed=2, partitions=2))
    spy = Spy()
    check_records(records, [*default_rules(), spy])
    assert spy.seen and {f for f, _ in spy.seen} == {"send"}
    assert len(spy.seen) == sum(r["f"] == "send" for r in records)
    offered = Dispatch([spy, PartitionHistoryRule()]).offered
    assert [i for i, _ in offered("poll", "invoke")] == [] and [i for i, _ in offered("poll", "ok")] == [1]
    assert [i for i, _ in Dispatch([spy], everything=True).offered("poll", "invoke")] == [0]


def _undispatched(monkeypatch):
    monkeypatch.setattr(engine_local, "Dispatch", partial(Dispatch, everything=True))


def _both(records, monkeypatch, **kw):
    dispatched = check_records(records, **kw)
    with monkeypatch.context() as m:
        _undispatched(m)
        everything = check_records(records, **kw)
    return dispatched, everything


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10**6), events=st.integers(200, 2000), partitions=st.integers(1, 5),
       broken=st.booleans(), profile=st.sampled_from(["kip", "kafka-4.3"]))
def test_dispatched_verdicts_are_undispatched_ones_synthetic(monkeypatch, seed, events, partitions, broken, profile):
    records = list(generate(events, seed=seed, partitions=partitions))
    if broken:
        records = mutated(records) if any(r["f"] == "poll" and len(r["value"].get("records") or ()) > 2
                                          for r in records) else records
    dispatched, everything = _both(records, monkeypatch, profile=profile)
    assert comparable(dispatched) == comparable(everything)


@pytest.mark.parametrize("name", ["groups-slice", "reassign-slice", "share-session-slice", "ci-txn"])
def test_dispatched_verdicts_are_undispatched_ones_real(monkeypatch, name):
    records = _jsonl(DATA / name / "history.jsonl.gz")
    for profile in ("kip", "kafka-4.3"):
        dispatched, everything = _both(records, monkeypatch, profile=profile)
        assert comparable(dispatched) == comparable(everything)
