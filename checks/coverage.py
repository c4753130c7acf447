"""Rule coverage: how many observations of a run could have violated each KIP rule.

A VALID verdict means little if the rules never had a chance to fail, so the verdict
carries the honest denominator: per model rule (a `reference_model` function whose
docstring names its KIP section), the number of answered operations that the checker
judged against it. A rule with 0 was never exercised by the run.

The list of rules is read from the model itself (every public function of the KIP
modules whose docstring starts with "KIP-"), so a new model rule appears here with 0
until `opportunities` learns which observations exercise it.

`CoverageRule` is an ordinary checker rule with a summary (checks.verdict.summaries): its
`split` turns each record into the ids of the rules it exercises (so engines move a few
strings, not the record), and its streaming judge sums them into the one summary row that
becomes `verdict["coverage"]`; both engines therefore count the same way.
"""
from __future__ import annotations

import inspect
import re
from collections import Counter
from typing import Iterable

from kipcheck.reference_model import (kip32, kip227, kip392, kip455, kip734, kip848, kip932, kip966, kip1023,
                                      kip1166, transactions)

from kipcheck.checks.rules.base import Anomaly, BaseRule
from kipcheck.checks.rules.election_rules import decides as election_decided
from kipcheck.checks.rules.commit_rules import is_offset_fetch_answer
from kipcheck.checks.rules.group_rules import is_assigning_describe, is_group_assign
from kipcheck.checks.rules.kip1166_rules import counted_probes
from kipcheck.checks.rules.reassignment_rules import ends_a_move
from kipcheck.checks.rules.share_rules import is_share_delivery
from kipcheck.checks.rules.observe import as_int

#: the verdict key of the coverage table (the summary row's name)
COVERAGE = "coverage"
_GROUP = "coverage"
_SECTION = re.compile(r'^(KIP-\d+(?: / KIP-\d+)*) "([^"]+)"')
_NONE = "NONE"
#: ListOffsets timestamps of the tiered offsets KIP-1023 orders (earliest local, last tiered,
#: earliest pending upload); answers to -1/-2 alone say nothing about tiering
KIP1023_TIMESTAMPS = (-4, -5, -6)

#: the model rules the checker judges histories by, and which answered records count for each;
#: every other model rule is part of one of these, or cannot be seen from outside a broker
OBSERVED: dict[str, str] = {
    "kip392.records_committed": "consumer fetch answers that returned records",
    "kip392.read_value_committed": "consumer fetch answers that returned records",
    "kip392.consumer_fetch_outcomes": "consumer fetch answers with NONE, OFFSET_OUT_OF_RANGE or "
                                      "OFFSET_NOT_AVAILABLE and no redirect (cases 1-4)",
    "kip392.hwm_may_go_back": "fetch answers that carried a high watermark",
    "kip392.preferred_read_replica_outcomes": "consumer fetch answers naming a preferred read replica",
    "kip392.epoch_end_offset_possible": "OffsetsForLeaderEpoch answers to consumers",
    "kip227.request_kind": "fetch requests with a session id and epoch",
    "kip227.observer_outcomes": "fetch answers to requests with a session id and epoch",
    "kip227.next_epoch": "incremental fetch requests (id > 0, epoch > 0)",
    "kip227.may_be_evicted": "FETCH_SESSION_ID_NOT_FOUND answers to a session id (evicted, or one the prober made up)",
    "kip227.full_response_partitions": "full fetch answers (sessionless, new or closing session) without a "
                                       "top-level error",
    "kip227.may_omit": "partitions of incremental fetch answers",
    "kip227.top_level_error_view": "fetch answers with a top-level error",
    "kip1023.offset_order": "ListOffsets answers with an offset for KIP-1023's timestamps -4, -5 or -6 "
                            "(their order against the other answers over time)",
    "kip1166.propagation_statistic": "metadata changes measured without a fault on a node they depend on "
                                      "(from 20 on: fewer decide nothing)",
    "kip966.may_lead": "partition creations and leader changes in the controller's metadata log",
    "kip455.completion_allowed": "records of the controller's metadata log that end a reassignment (completed or "
                                 "cancelled)",
    "kip32.append_time_allowed": "polls that read records with a LogAppendTime stamp",
    "kip32.offset_for_time_allowed": "ListOffsets answers with an offset for a real timestamp",
    "kip734.max_timestamp_answer_allowed": "ListOffsets answers with an offset for the largest timestamp (-3)",
    "kip848.handoff_allowed": "partitions a rebalance gave a consumer group member (its assign callbacks)",
    "kip848.assigned_to_one_member": "the group coordinator's ConsumerGroupDescribe answers that listed a member's "
                                     "assigned partitions",
    "kip848.committed_offset_kept": "partitions of a group member's OffsetFetch answers (`committed`)",
    "kip848.reowned_in_time": "partitions a group member gave up (its revoke callbacks), judged where a member stayed",
    "kip848.resume_within_commits": "partitions of a group member's OffsetFetch answers (`committed`)",
    "kip932.exclusive_acquisition": "records a share consumer's poll acquired (each against the record's other deliveries)",
    "kip932.accepted_not_redelivered": "records a share consumer's poll acquired (each against the record's accepts)",
    "kip932.delivery_count_allowed": "records a share consumer's poll acquired (the delivery count it was told)",
    "kip932.share_session_answer": "the prober's ShareFetch and ShareAcknowledge answers (its own share group's sessions)",
    "kip932.available_record_delivered": "records a share consumer's poll acquired (the acknowledged sends below each "
                                         "judged for loss, where the group starts at the earliest offset)",
    "transactions.lso_within_hwm": "fetch answers that carried a last stable offset",
    "transactions.lso_may_follow": "fetch answers that carried a last stable offset for a known leader epoch",
    "transactions.read_committed_offsets_allowed": "read_committed fetch answers that returned records",
    "transactions.aborted_record_covered": "read_committed fetch answers that returned records (with their batches)",
    "transactions.visible_all_or_nothing": "read_committed fetch answers that returned records",
    "transactions.read_committed_verdict": "read_committed polls that returned records",
    "transactions.torn_offsets": "read_committed polls that returned records",
}


#: what a run must have set up for each judged rule to be reachable: "probes" (the prober and
#: the observer ran), and the `skipped` keys of config.json (harness.clients.capabilities) any
#: of which takes the rule's observations away. KIP-1023's order needs no tiered topic: on any
#: topic a release with ListOffsets -4 answers it (the earliest local offset is the log start).
_SESSIONS = ("probes", "prober.fetch_session")
REACHED_BY: dict[str, tuple[str, ...]] = {
    "kip392.records_committed": ("probes", "prober.kip392_cases"),
    "kip392.read_value_committed": ("probes", "prober.kip392_cases"),
    "kip392.consumer_fetch_outcomes": ("probes", "prober.kip392_cases"),
    "kip392.hwm_may_go_back": ("probes", "prober.kip392_cases"),
    "kip392.preferred_read_replica_outcomes": ("probes", "prober.kip392_cases", "consumer.follower_fetching"),
    "kip392.epoch_end_offset_possible": ("probes", "prober.offsets_for_leader_epoch"),
    "kip227.request_kind": _SESSIONS,
    "kip227.observer_outcomes": _SESSIONS,
    "kip227.next_epoch": _SESSIONS,
    "kip227.may_be_evicted": _SESSIONS,
    "kip227.full_response_partitions": _SESSIONS,
    "kip227.may_omit": _SESSIONS,
    "kip227.top_level_error_view": _SESSIONS,
    "kip1023.offset_order": ("probes", "prober.list_offsets@-4"),
    "kip1166.propagation_statistic": ("probes", "observer.metadata_propagation"),
    # read from the controllers' disks after the run, probes or not (harness/metadata_log.py)
    "kip966.may_lead": ("harness.metadata_log",),
    "kip455.completion_allowed": ("harness.metadata_log",),
    # every partition a rebalance gives a subscriber (the run's consumers cycle assign and subscribe)
    "kip848.handoff_allowed": ("group_members",),
    # the group describer asks the coordinator once a second (consumer-protocol subscribers, 4.0 on)
    "kip848.assigned_to_one_member": ("probes", "consumer_protocol_members", "observer.group_describe"),
    # every partition a rebalance gives a subscriber: it asks the group's committed offset first
    "kip848.committed_offset_kept": ("group_members",),
    "kip848.resume_within_commits": ("group_members",),
    # every partition a subscriber revokes (it leaves 10-20 s after its first assignment)
    "kip848.reowned_in_time": ("group_members",),
    # every poll of a LogAppendTime topic (workload topics on the backends that share this machine's clock)
    "kip32.append_time_allowed": ("stamped_polls", "workload.log_append_time"),
    # the prober asks every leader for a time a little before now; judged where the consumers read stamps
    "kip32.offset_for_time_allowed": ("probes", "stamped_polls", "workload.log_append_time"),
    # the prober asks every leader for the largest timestamp (ListOffsets v7, Kafka 3.0+)
    "kip734.max_timestamp_answer_allowed": ("probes", "prober.list_offsets@-3", "stamped_polls",
                                            "workload.log_append_time"),
    # KIP-932: every record a share consumer acquires (the share workload's consumers, Kafka 4.2+)
    "kip932.exclusive_acquisition": ("share_consumers",),
    "kip932.accepted_not_redelivered": ("share_consumers",),
    "kip932.delivery_count_allowed": ("share_consumers",),
    "kip932.available_record_delivered": ("share_consumers",),
    # the prober's share round runs only on a share workload's run, on brokers that answer KIP-932's APIs
    "kip932.share_session_answer": ("probes", "share_consumers", "prober.share_session"),
    # KIP-98: every fetch answer carries an LSO; the prober's read_committed round returns records;
    # read_committed consumers poll (the default consumers cycle read_committed in)
    "transactions.lso_within_hwm": ("probes", "prober.kip392_cases"),
    "transactions.lso_may_follow": ("probes", "prober.kip392_cases"),
    "transactions.read_committed_offsets_allowed": ("probes", "prober.read_committed"),
    "transactions.aborted_record_covered": ("probes", "prober.read_committed"),
    "transactions.visible_all_or_nothing": ("probes", "prober.read_committed"),
    "transactions.read_committed_verdict": ("probes", "read_committed_polls"),
    "transactions.torn_offsets": ("probes", "read_committed_polls"),
}


def model_rules() -> dict[str, dict]:
    """Every KIP rule of the model: `module.function` -> {"kip", "section"}, in source order."""
    rules = {}
    for module in (kip392, kip227, kip1023, kip1166, kip966, kip455, kip32, kip734, kip848, kip932, transactions):
        short = module.__name__.rsplit(".", 1)[1]
        functions = [f for name, f in vars(module).items()
                     if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == module.__name__]
        for f in sorted(functions, key=lambda f: f.__code__.co_firstlineno):
            m = _SECTION.match(inspect.getdoc(f) or "")
            if m:
                rules[f"{short}.{f.__name__}"] = {"kip": m.group(1), "section": m.group(2)}
    return rules


def _entries(value: dict) -> list[dict]:
    if "partitions" in value:
        return list(value.get("partitions") or [])
    return [value] if "topic" in value else []


def _fetch(v: dict) -> Iterable[str]:
    consumer = as_int(v.get("replica_id"), -1) < 0
    session_id, epoch = as_int(v.get("session_id"), 0), as_int(v.get("session_epoch"), -1)
    if "session_id" in v:
        yield "kip227.request_kind"
        yield "kip227.observer_outcomes"
        if session_id > 0 and epoch > 0:
            yield "kip227.next_epoch"
        if v.get("top_error") == "FETCH_SESSION_ID_NOT_FOUND" and session_id > 0:
            yield "kip227.may_be_evicted"
    if v.get("top_error", _NONE) not in (_NONE, None):
        yield "kip227.top_level_error_view"
        return
    incremental = session_id > 0 and epoch > 0
    entries = _entries(v)
    committed = v.get("isolation_level") == "read_committed"
    if "session_id" in v and not incremental and entries:
        yield "kip227.full_response_partitions"
    for e in entries:
        if incremental:
            yield "kip227.may_omit"
        if e.get("omitted") or e.get("missing") or "fetch_offset" not in e:
            continue  # left out of the answer: nothing of KIP-392 to judge (docs/checker.md)
        err = e.get("error", _NONE)
        if err == _NONE and as_int(e.get("high_watermark"), -1) >= 0:
            yield "kip392.hwm_may_go_back"
        if err == _NONE and as_int(e.get("last_stable_offset"), -1) >= 0:
            yield "transactions.lso_within_hwm"
            if as_int(v.get("current_leader_epoch"), -1) >= 0:
                yield "transactions.lso_may_follow"
            if committed and e.get("records"):
                yield "transactions.read_committed_offsets_allowed"
                yield "transactions.visible_all_or_nothing"
                if e.get("batches") is not None:
                    yield "transactions.aborted_record_covered"
        if not consumer:
            continue
        if err == _NONE and e.get("records"):
            yield "kip392.records_committed"
            yield "kip392.read_value_committed"
        redirected = as_int(e.get("preferred_read_replica"), -1) >= 0
        if redirected:
            yield "kip392.preferred_read_replica_outcomes"
        if err in kip392.CASE_ERRORS and not redirected:
            yield "kip392.consumer_fetch_outcomes"


def opportunities(record: dict) -> tuple[str, ...]:
    """The model rules an answered record could have violated (empty for the rest)."""
    if record.get("type") != "ok":
        return ()
    f, v = record.get("f"), record.get("value") or {}
    if f == "fetch":
        return tuple(_fetch(v))
    if f == "poll":  # the commonest answer first: no test below admits a poll
        if not v.get("records"):
            return ()
        stamped = ("kip32.append_time_allowed",) if any(s is not None for s in v.get("append_ms") or ()) else ()
        if v.get("isolation") == "read_committed":
            return ("transactions.read_committed_verdict", "transactions.torn_offsets", *stamped)
        return stamped
    if (f == "list_offsets" and v.get("error", _NONE) == _NONE and as_int(v.get("timestamp"), 0) in KIP1023_TIMESTAMPS
            and as_int(v.get("offset"), -1) >= 0):
        return ("kip1023.offset_order",)
    if f == "list_offsets" and v.get("error", _NONE) == _NONE and as_int(v.get("timestamp"), -1) >= 0 \
            and as_int(v.get("offset"), -1) >= 0:
        return ("kip32.offset_for_time_allowed",)
    if f == "list_offsets" and v.get("error", _NONE) == _NONE and as_int(v.get("timestamp"), 0) == kip734.MAX_TIMESTAMP \
            and as_int(v.get("offset"), -1) >= 0:
        return ("kip734.max_timestamp_answer_allowed",)
    if is_group_assign(record):
        return ("kip848.handoff_allowed",) * len(v.get("partitions") or ())
    if is_assigning_describe(record):
        return ("kip848.assigned_to_one_member",)
    if f == "revoke" and isinstance(v.get("group"), str):
        return ("kip848.reowned_in_time",) * len(v.get("partitions") or ())
    if is_offset_fetch_answer(record):
        return ("kip848.committed_offset_kept", "kip848.resume_within_commits") * len(v.get("offsets") or ())
    if f in ("share_fetch", "share_acknowledge") and isinstance(v.get("top_error"), str):
        return ("kip932.share_session_answer",)
    if is_share_delivery(record):
        return ("kip932.exclusive_acquisition", "kip932.accepted_not_redelivered",
                "kip932.delivery_count_allowed", "kip932.available_record_delivered") * len(v.get("records") or ())
    if f == "offsets_for_leader_epoch" and v.get("error", _NONE) == _NONE and as_int(v.get("replica_id"), -1) < 0:
        return ("kip392.epoch_end_offset_possible",)
    if f == "metadata_propagation" and v.get("seen_by"):
        return ("kip1166.propagation_statistic",)
    if f == "partition_change":
        return ("kip966.may_lead",) * election_decided(v) + ("kip455.completion_allowed",) * ends_a_move(v)
    return ()


#: what the KIP-1166 statistic is decided from, kept whole (a few records a second): which
#: probes count depends on the faults around them (kip1166_rules.counted_probes)
_DECIDED_FROM = ("metadata_propagation", "fault")
#: the operations whose answers `opportunities` counts (one per branch there)
_ANSWERS = frozenset(("fetch", "list_offsets", "assign", "group_describe", "revoke", "committed", "share_fetch",
                      "share_acknowledge", "share_poll", "offsets_for_leader_epoch", "metadata_propagation",
                      "partition_change", "poll"))
#: rules that decide nothing below a minimum sample: their observations count only from it on
MINIMUM_SAMPLE = {"kip1166.propagation_statistic": kip1166.MIN_CHANGES}


class CoverageRule(BaseRule):
    """Counts `opportunities` over the whole history (one group, streamed)."""

    anomalies = ()
    summary = COVERAGE  # the verdict key its summary row fills (checks.verdict)
    key = _GROUP
    streams = True  # `check`/`check_group` are BaseRule's start/add/finish

    fs = _ANSWERS | frozenset(_DECIDED_FROM)

    def reads(self, f: str, type_: str) -> bool:
        return f in _DECIDED_FROM or type_ == "ok" and f in _ANSWERS

    def group_keys(self, record: dict) -> Iterable[str]:
        return (_GROUP,) if opportunities(record) or record.get("f") in _DECIDED_FROM else ()

    def split(self, record: dict) -> list[tuple[str, dict]]:
        if record.get("f") in _DECIDED_FROM:
            return [(_GROUP, record)]
        ids = opportunities(record)
        if not ids:
            return []
        return [(_GROUP, {"index": record["index"], "time": record.get("time", 0), "process": record.get("process"),
                          "type": record["type"], "f": record["f"], "value": {"rules": list(ids)}})]

    def start(self, key: str, profile: str) -> "_Counter":
        return _Counter()


class _Counter:
    def __init__(self):
        self.counts: Counter = Counter()
        self.propagation: list[dict] = []

    def add(self, record: dict) -> None:
        if record.get("f") in _DECIDED_FROM:
            self.propagation.append(record)
            return
        value = record.get("value") or {}
        self.counts.update(value["rules"] if "rules" in value else opportunities(record))

    def finish(self) -> list[Anomaly]:
        self.propagation.sort(key=lambda r: r.get("index", 0))
        self.counts["kip1166.propagation_statistic"] = len(counted_probes(self.propagation)[0])
        return [Anomaly(COVERAGE, (), "rule coverage", details=coverage_table(self.counts))]


def coverage_table(counts: Counter) -> dict[str, dict]:
    """The verdict's coverage block: every model rule with its observation count. A rule with
    a minimum sample (`MINIMUM_SAMPLE`) below it decided nothing: 0 observations, and
    `undecided` says how many it had."""
    table = {}
    for rid, meta in model_rules().items():
        n = counts.get(rid, 0) if rid in OBSERVED else None
        row = {**meta, "observations": n,
               "counted": OBSERVED.get(rid, "not judged on its own: part of another rule, or not "
                                            "observable from outside a broker")}
        if n and n < MINIMUM_SAMPLE.get(rid, 0):
            row.update(observations=0, undecided=f"{n} of the {MINIMUM_SAMPLE[rid]} it needs to decide")
        table[rid] = row
    return table


def shortfall(coverage: dict[str, dict], minimum: int, only: Iterable[str] = ()) -> list[str]:
    """Judged rules (all, or those named in `only`) observed fewer than `minimum` times."""
    wanted = set(only) or {rid for rid, row in coverage.items() if row["observations"] is not None}
    return [rid for rid in wanted if (coverage.get(rid) or {}).get("observations") is None
            or coverage[rid]["observations"] < minimum]


def parse_requirement(spec: str) -> dict[str, int]:
    """`--require-coverage` text: "N" (every judged rule at least N observations) or
    "RULE=N,RULE=N" (those rules). Returns {rule id or "*": minimum}; ValueError on bad text."""
    out: dict[str, int] = {}
    known = model_rules()
    for item in (x.strip() for x in spec.split(",") if x.strip()):
        rid, _, n = item.rpartition("=") if "=" in item else ("*", "", item)
        if rid != "*" and rid not in known:
            raise ValueError(f"--require-coverage: unknown rule {rid!r} (rules: {', '.join(sorted(OBSERVED))})")
        if rid != "*" and rid not in OBSERVED:
            raise ValueError(f"--require-coverage: {rid} is not judged from histories on its own")
        if not n.isdigit() or int(n) < 1:  # 0 asks for nothing: a requirement that could never fail
            raise ValueError(f"--require-coverage: {item!r} is not N or RULE=N with N a whole number >= 1")
        out[rid] = int(n)
    if not out:
        raise ValueError("--require-coverage: empty requirement")
    return out


def apply_requirement(verdict: dict, spec: str | None) -> dict:
    """A valid verdict whose coverage falls short of `spec` becomes "unknown" (the run could
    not decide: its rules had too few chances to fail). An invalid verdict stays invalid."""
    if not spec:
        return verdict
    required = parse_requirement(spec)
    cov = verdict.get("coverage") or {}
    short = sorted(set(shortfall(cov, required["*"])) if "*" in required else set())
    short += sorted(rid for rid, n in required.items() if rid != "*" and rid not in short
                    and (cov.get(rid) or {}).get("observations", 0) < n)
    verdict["coverage_required"] = {"spec": spec, "short": short}
    if short:
        _undecided(verdict, "coverage below --require-coverage " + spec + ": " + ", ".join(
            f"{rid} {(cov.get(rid) or {}).get('observations')}" for rid in short))
    return verdict


def _undecided(verdict: dict, message: str) -> None:
    """One more reason the verdict is unknown; a valid verdict becomes unknown."""
    verdict.setdefault("unknown", []).append({"indices": [], "message": message})
    verdict["counts"]["unknown"] = verdict["counts"].get("unknown", 0) + 1
    if verdict["valid"] is True:
        verdict["valid"] = "unknown"


def reachable(config: dict) -> list[str]:
    """The judged rules a run's set-up made reachable (`REACHED_BY`), from its config.json."""
    options = config.get("options") or {}
    workload = config.get("workload") or {}
    have = {"probes": options.get("probes", True),
            "read_committed_polls": workload.get("consumers", 1) > 0
            and "read_committed" in (workload.get("consumer_isolation") or ("read_committed",)),
            "stamped_polls": workload.get("consumers", 1) > 0,
            "group_members": _subscribes(workload),
            "consumer_protocol_members": _subscribes(workload) and workload.get("group_protocol") == "consumer",
            "share_consumers": workload.get("workload") == "share" and workload.get("share_consumers", 0) > 0}
    skipped = {s.get("key") for s in config.get("skipped") or []}
    return [rid for rid, needs in REACHED_BY.items()
            if all(have.get(n, n not in skipped) for n in needs)]


def _subscribes(workload: dict) -> bool:
    """Whether some consumer of the run subscribes to a group (WorkloadOptions.consumer_mode)."""
    modes = workload.get("consumer_modes") or ("assign", "subscribe")
    return any(modes[seq % len(modes)] == "subscribe" for seq in range(workload.get("consumers", len(modes))))


#: reachable rules the gate does not demand an observation of, and why: a run is not made unknown
#: for a rule whose first observation waits on something besides the run's set-up
NOT_DEMANDED = {
    # a subscriber's first partition waits on the group coordinator, whose offsets topic (50
    # partitions) is created by the first join: 2 of 4 20 s runs of 3.3.2 and 3.9.2 ended before any
    # subscriber was given a partition (2026-11-28); the table still says "not asked" then
    "kip848.handoff_allowed": "the first assignment waits on the group coordinator's start, not on the set-up",
    "kip848.assigned_to_one_member": "the first assignment waits on the group coordinator's start, not on the set-up",
    "kip848.committed_offset_kept": "the first assignment waits on the group coordinator's start, not on the set-up",
    "kip848.resume_within_commits": "the first assignment waits on the group coordinator's start, not on the set-up",
    # a revocation needs a membership to end (10-20 s after its first assignment) or a rebalance
    "kip848.reowned_in_time": "a revocation waits on a member leaving or joining, not on the set-up",
    # the prober's share member fetches only once its group's share state is initialized (up to ~75 s
    # after a coordinator failover, docs/history.md "Share groups"), and its round comes every seventh
    "kip932.share_session_answer": "the prober's share member waits on its group's share state, not on the set-up",
    # only a fault that moves replicas (their `moves-replicas` effect) starts a reassignment
    "kip455.completion_allowed": "a reassignment is started by a fault that moves replicas, not by the set-up",
}


def require_reachable(verdict: dict, config: dict) -> dict:
    """`kipcheck run`'s gate: a valid verdict with a reachable rule that decided nothing
    (0 observations, or below its minimum sample) becomes "unknown": VALID would claim a
    rule held that the run never put to the test. An invalid verdict stays invalid."""
    cov = verdict.get("coverage") or {}
    uncovered = [rid for rid in reachable(config)
                 if rid not in NOT_DEMANDED and not (cov.get(rid) or {}).get("observations")]
    verdict["uncovered"] = uncovered
    if uncovered:
        _undecided(verdict, "reachable rules that decided nothing (--allow-uncovered accepts it): " + ", ".join(
            f"{rid} ({(cov.get(rid) or {}).get('undecided') or 'no observation'})" for rid in uncovered))
    return verdict
