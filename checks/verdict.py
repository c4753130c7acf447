"""What both engines share: the rule list, running a rule on a group, counting records,
and turning anomalies into the verdict dict of docs/checker.md. Engines only move data; the
same code here decides the answer, so the local and Spark engines agree by construction.

Besides the anomaly names of docs/checker.md, a rule may return an `Anomaly` named `UNKNOWN`
("unknown"): not a deviation but a reason the history could not be decided (e.g. the
linearisation budget ran out). It makes the verdict "unknown" unless a real anomaly is
proven, and is listed under the verdict's extra key "unknown". A rule with a `summary`
name (the liveness rule, coverage) returns one row of that name: not an anomaly, but a block of the
verdict (`"liveness"`), so that engines move it like any other row.
"""
from __future__ import annotations

import contextlib
import gc
import json
from collections import Counter
from typing import Iterable, Sequence

from kipcheck.checks.rules.base import DEVIATIONS, RULE, UNKNOWN, Anomaly, Rule

#: every anomaly name of docs/checker.md, in its order; each is a key of the verdict
ANOMALY_NAMES = (
    "lost-write", "duplicate", "inconsistent-offset", "nonmonotonic-poll", "poll-skip",
    "uncommitted-read", "hwm-regression", "wrong-fetch-error", "preferred-replica-violation",
    "fetch-session-violation", "tiered-offset-violation", "hwm-propagation-delay", "ineligible-leader",
    "premature-reassignment-completion",
    "append-time-violation", "time-offset-violation",
    # consumer groups (checks/rules/group_rules.py, group_liveness_rules.py, commit_rules.py)
    "group-ownership-violation", "slow-rebalance", "committed-offset-regression", "resume-skip",
    # share groups (checks/rules/share_rules.py)
    "share-double-acquire", "share-accepted-redelivered", "share-delivery-limit-exceeded",
    "share-record-lost", "share-session-violation",
    # transactions (checks/rules/txn_rules.py)
    "aborted-read", "precommitted-read", "torn-transaction", "lso-violation",
    # liveness (checks/rules/liveness_rules.py)
    "slow-recovery", "client-crash-loop", "hanging-transaction",
)

#: examples kept per name (the smallest proofs first); counts always hold the total
MAX_EXAMPLES = 50


def default_rules(liveness=None, group_liveness=None) -> list:
    """The history rules, the liveness rule (`liveness`, or one with the Kafka-default
    bound), the model-backed rules (the group liveness rule `group_liveness` in place of the
    Kafka-default one, when given) and rule coverage. All are required: a checker that
    silently ran without the model's rules would certify what it never judged."""
    from kipcheck.checks.coverage import CoverageRule
    from kipcheck.checks.recovery import liveness_rule
    from kipcheck.checks.rules.history_rules import HISTORY_RULES
    from kipcheck.checks.rules.model_rules import MODEL_RULES
    from kipcheck.checks.rules.txn_rules import TransactionRule

    liveness = liveness or liveness_rule()
    model = [group_liveness if group_liveness is not None and type(r) is type(group_liveness) else r for r in MODEL_RULES]
    return [*HISTORY_RULES, liveness, *model, TransactionRule(liveness.bound), CoverageRule()]


@contextlib.contextmanager
def no_cyclic_gc():
    """Pause the cyclic collector while millions of acyclic record dicts are built: its
    full passes over all live objects otherwise make the checker superlinear."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_rule(rule: Rule, key: str, records: Iterable[dict], profile: str) -> list[Anomaly]:
    """Judge one group whole (`Rule.check_group`, given the key it was grouped by)."""
    return rule.check_group(key, records, profile)


def starter(rule: Rule, key: str):
    """`rule.start` when the rule judges the group `key` as its records stream by
    (`rule.streams_group(key)`), else None.

    `rule.start(key, profile)` returns a judge with `add(record)` (called for each record
    of the group, in index order) and `finish() -> [Anomaly]`; it must give what
    `run_rule` gives on the whole group. An engine that sees records one at a time then
    holds no group for that rule, only the judge's own summary."""
    return rule.start if rule.streams_group(key) else None


def group_keys(rule: Rule, record: dict) -> list[str]:
    """A rule's keys for a record, de-duplicated in a stable order."""
    keys = rule.group_keys(record)
    if type(keys) is not tuple:  # generators, sets: most records give none or one key
        keys = tuple(keys)
    if len(keys) < 2:
        return list(keys)
    return sorted(set(keys))


class Dispatch:
    """Which rules a record is offered to: those whose `reads(f, type)` admits its operation
    and type (a table built as new pairs appear), so a record reaches the few rules that read
    its kind instead of every rule's `split`. Both engines key records through one of these.
    `everything`: offer every record to every rule (the undispatched reference of the tests)."""

    def __init__(self, rules: Sequence[Rule], everything: bool = False):
        self.rules = list(rules)
        self.everything = everything
        self._table: dict[tuple, tuple] = {}

    def offered(self, f: str, type_: str) -> tuple:
        """(rule number, its `split`) of each rule that reads records of this f and type."""
        got = self._table.get((f, type_))
        if got is None:
            got = self._table[(f, type_)] = tuple(
                (i, rule.split) for i, rule in enumerate(self.rules) if self.everything or rule.reads(f, type_))
        return got

    def keyed(self, record: dict) -> list[tuple[int, str, dict]]:
        """Every (rule number, group key, record as that group sees it) of one record.

        `rule.split(record) -> [(key, record as that group needs it)]` gives the keys of
        `group_keys` in sorted order, each with the part of the record its group needs (e.g.
        only that partition's polled records), so engines move and hold less; by default
        (checks.rules.base.BaseRule) each group sees the whole record."""
        got = self._table.get((record["f"], record["type"]))
        if got is None:
            got = self.offered(record["f"], record["type"])
        return [(i, key, part) for i, split in got for key, part in split(record)]


def as_row(record: dict) -> tuple:
    """A record as a compact tuple (for spilling to disk and for Spark's shuffle)."""
    return (record["index"], record["time"], record["process"], record["type"], record["f"],
            record["value"])


def from_row(row) -> dict:
    index, time, process, type_, f, value = row
    return {"index": index, "time": time, "process": process, "type": type_, "f": f, "value": value}


class Counts:
    """Record counts, accumulated one record at a time (local) or merged (Spark)."""

    def __init__(self):
        self.records = 0
        self.by_f: Counter = Counter()
        self.by_type: Counter = Counter()
        self.reads = 0

    def add_pairs(self, pairs: Counter):
        """Merge a Counter of (f, type) -> n (cheaper than `add` per record)."""
        for (f, type_), n in pairs.items():
            self.add(f, type_, n)

    def add(self, f: str, type_: str, n: int = 1):
        self.records += n
        self.by_f[f] += n
        self.by_type[type_] += n
        if type_ == "ok" and f in ("poll", "fetch"):
            self.reads += n


def anomaly_to_row(a: Anomaly) -> dict:
    return {"name": a.name, "known": a.known, "indices": list(a.indices), "message": a.message,
            "details": json.dumps(a.details, sort_keys=True, default=str)}


def anomaly_from_row(row) -> Anomaly:
    return Anomaly(row["name"], tuple(int(i) for i in row["indices"]), row["message"],
                   bool(row["known"]), json.loads(row["details"]))


def _example_order(a: Anomaly):
    # the details break ties, so the examples kept do not depend on the order rules ran in
    return (len(a.indices), list(a.indices), a.message,
            json.dumps(a.details, sort_keys=True, default=str))


def summaries(rules: Sequence, anomalies: list[Anomaly], profile: str) -> dict:
    """Rules with a `summary` name (the liveness rule) return one row of that name whose
    details are a block of the verdict; a rule whose group never formed (no records of
    its kinds) gives the summary of an empty group."""
    names = {r.summary for r in rules} - {None}
    out = {a.name: a.details for a in anomalies if a.name in names}
    for rule in rules:
        name = rule.summary
        if name and name not in out:
            out.update({a.name: a.details for a in rule.start(rule.key, profile).finish() if a.name == name})
    return out


def _one_per_proof(anomalies: Iterable[Anomaly]) -> list[Anomaly]:
    """One anomaly per (name, proof indices): two groups may prove the same read wrong in
    two ways (e.g. a later HWM and a committed record elsewhere); an unknown one wins."""
    best: dict[tuple, Anomaly] = {}
    for n, a in enumerate(anomalies):
        key = (a.name, tuple(a.indices)) if a.indices else (n,)  # no proof records: nothing to merge
        if key not in best or (best[key].known and not a.known):
            best[key] = a
    return list(best.values())


def by_model_rule(found: dict[str, list[Anomaly]], known: dict[str, list[Anomaly]]) -> dict:
    """{model rule: {"anomalies": {name: n}, "known": {name: n}, "deviations": {deviation: n}}}
    over every anomaly (not only the examples kept), from the model rule each names
    (`checks.rules.base.RULE`) and, for a known one, the deviations that accepted it."""
    out: dict[str, dict] = {}
    for section, items in (("anomalies", found), ("known", known)):
        for name, found_here in items.items():
            for a in found_here:
                rule = a.details.get(RULE)
                if rule:
                    counts = out.setdefault(rule, {"anomalies": {}, "known": {}, "deviations": {}})
                    counts[section][name] = counts[section].get(name, 0) + 1
                    for d in a.details.get(DEVIATIONS, ()):
                        counts["deviations"][d] = counts["deviations"].get(d, 0) + 1
    return dict(sorted(out.items()))


def by_deviation(known: dict[str, list[Anomaly]]) -> dict:
    """{deviation: {anomaly name: n}} over every known anomaly, from the deviations each
    names (`checks.rules.base.DEVIATIONS`): what the profile accepted, and how often."""
    out: dict[str, dict] = {}
    for name, accepted in known.items():
        for a in accepted:
            for d in a.details.get(DEVIATIONS, ()):
                row = out.setdefault(d, {})
                row[name] = row.get(name, 0) + 1
    return dict(sorted(out.items()))


def build_verdict(anomalies: Iterable[Anomaly], counts: Counts, profile: str,
                  engine: str, rules: Sequence = (), context: dict | None = None) -> dict:
    """The verdict dict (docs/checker.md). A proven anomaly makes it false; otherwise no reads
    or an undecided search make it "unknown". Summary rows of `rules` (see `summaries`)
    become verdict blocks; the liveness block's crash count joins `counts`. `context` is
    what the run's config.json says the broker could not be asked and which features its
    release lacks (`checks.conformance.run_context`): it shapes the conformance table."""
    found: dict[str, list[Anomaly]] = {n: [] for n in ANOMALY_NAMES}
    known: dict[str, list[Anomaly]] = {n: [] for n in ANOMALY_NAMES}
    unknown: list[Anomaly] = []
    anomalies = _one_per_proof(anomalies)
    blocks = summaries(rules, anomalies, profile)
    for a in anomalies:
        if a.name in blocks:
            continue
        if a.name == UNKNOWN:
            unknown.append(a)
        else:
            (known if a.known else found).setdefault(a.name, []).append(a)

    def examples(items: list[Anomaly]) -> list[dict]:
        # through JSON, so that both engines give identical plain values
        return [json.loads(json.dumps(a.as_example(), default=str))
                for a in sorted(items, key=_example_order)[:MAX_EXAMPLES]]

    if any(found.values()):
        valid: bool | str = False
    elif counts.reads == 0 or unknown:
        valid = UNKNOWN
    else:
        valid = True
    reasons = examples(unknown)
    if counts.reads == 0:
        reasons.insert(0, {"indices": [], "message": "the history holds no reads (no ok poll or fetch)"})
    verdict = {
        "valid": valid,
        "anomalies": {n: examples(v) for n, v in found.items()},
        "known": {n: examples(v) for n, v in known.items()},
        "unknown": reasons,
        "profile": profile,
        "engine": engine,
        "counts": {
            "records": counts.records,
            "reads": counts.reads,
            "by_f": dict(sorted(counts.by_f.items())),
            "by_type": dict(sorted(counts.by_type.items())),
            "anomalies": {n: len(v) for n, v in found.items()},
            "known": {n: len(v) for n, v in known.items()},
            "unknown": len(unknown),
            "by_rule": by_model_rule(found, known),
            "by_deviation": by_deviation(known),
        },
    }
    for name, block in sorted(blocks.items()):
        verdict[name] = json.loads(json.dumps(block, default=str))  # plain values, as the examples
    if "liveness" in blocks:
        verdict["counts"]["client_crashes"] = blocks["liveness"].get("client_crashes", 0)
    if "coverage" in verdict:
        from kipcheck.checks.conformance import CONFORMANCE, conformance_table
        verdict[CONFORMANCE] = conformance_table(verdict, context)
    return verdict


def comparable(verdict: dict) -> dict:
    """A verdict without the fields that legitimately differ between engines."""
    return {k: v for k, v in verdict.items() if k != "engine"}
