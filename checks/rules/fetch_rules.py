"""Model-backed rules for raw-protocol fetches (KIP-392 and KIP-227).

* `ConsumerFetchRule`: `uncommitted-read`, `wrong-fetch-error` (KIP-392 cases 1-4); also
  `uncommitted-read` of consumer polls, against the HWMs their leader answered around them.
* `HighWatermarkRule`: `hwm-regression`, and OffsetsForLeaderEpoch answers above the
  HWM (`wrong-fetch-error`).
(`preferred-replica-violation` is checks/rules/replica_rules.py, `fetch-session-violation`
checks/rules/session_rules.py.)

Each rule builds model state only from what brokers answered and flags only what that
proves; a deviation the chosen profile accepts is reported with known=True.
"""
from __future__ import annotations

import bisect
import json
from collections import deque
from typing import Iterable, Sequence

from kipcheck.reference_model import kip392, profiles
from kipcheck.reference_model.state import NONE, Replica

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.kip1166_rules import SETTLE_NS, fault_windows, touched
from kipcheck.checks.rules.log_bounds import Extremes, HwmFloor, Lives, SendBound, fault_brokers, hwm_series, hwm_values
from kipcheck.checks.rules.observe import EpochIndex, Op, answered, as_int, known_as, partitions_of, proven_epoch, verdict
from kipcheck.checks.rules.replica_rules import IMAGE_LAG_NS, ISR_SPAN_NS



def _is_consumer(value: dict) -> bool:
    return as_int(value.get("replica_id"), -1) < 0


def _offsets(entry: dict) -> list[int]:
    return [int(r[0]) for r in entry.get("records") or []]


def _anomaly(kind: str | None, name: str, rule: str, indices, message: str, **details) -> list[Anomaly]:
    """`rule`: the model rule (`module.function`, checks.coverage.OBSERVED) that said no."""
    if kind is None:
        return []
    return [Anomaly(name, tuple(sorted(set(indices))), message, known=(kind == "known"),
                    details={**details, **known_as(kind), RULE: rule})]


class ConsumerFetchRule(BaseRule):
    """KIP-392 "Follower Fetching" and "Out of range handling", judged per response.

    The replica state is what the response itself shows (HWM and log start when not -1)
    and what other answers bound (docs/model.md, "bound"): the same broker's earlier HWMs
    and records in the same epoch and life prove a least LEO, its later log starts a
    greatest log start, its later HWMs whether records above a reported HWM were committed
    when read (groups `kip392-fetch:<broker>`); the partition's sends give a greatest LEO
    and HWM (groups `kip392-leo:<topic>/<partition>`); the leader's HWM gives an in-sync
    follower a least LEO (`kip392.leo_reached_leader_hwm`; one group, `kip392-isr`:
    consumer fetches, ListOffsets, metadata, faults). Only answers no log within those bounds
    explains are flagged. Consumer polls are judged against the HWMs the partition's leader
    answered around them (`_PollJudge`, one group for the run, `kip392-poll`, streamed: the
    rule reads each group once, `one_pass`)."""

    anomalies = ("uncommitted-read", "wrong-fetch-error")
    one_pass = True
    fs = frozenset(("fetch", "metadata", "list_offsets", "offsets_for_leader_epoch", "send", "poll", "upgrade", "fault"))

    def reads(self, f: str, type_: str) -> bool:
        return f in self.fs and (f != "poll" or type_ == "ok")

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        f = record.get("f")
        if f == "fetch" and _is_consumer(v):
            yield f"kip392-fetch:{v.get('broker')}"
            yield ISR_GROUP
            yield POLL_GROUP
            for e in partitions_of(v):
                yield f"kip392-leo:{e.get('topic')}/{e.get('partition')}"
        elif f == "metadata":
            yield f"kip392-fetch:{v.get('broker')}"
            yield ISR_GROUP
            yield POLL_GROUP
        elif f == "list_offsets":
            yield f"kip392-fetch:{v.get('broker')}"
            yield ISR_GROUP  # the broker's own bounds there are its group's (`_broker_answers`)
        elif f == "offsets_for_leader_epoch":
            yield f"kip392-leo:{v.get('topic')}/{v.get('partition')}"
        elif f == "send":
            yield f"kip392-leo:{v.get('topic')}/{v.get('partition')}"
            if record.get("type") == "invoke":
                yield POLL_GROUP
        elif f == "poll":
            if record.get("type") == "ok" and v.get("records"):
                yield POLL_GROUP
        elif f == "upgrade":
            yield POLL_GROUP
        elif f == "fault":
            yield from (f"kip392-fetch:{b}" for b in fault_brokers(record))
            yield ISR_GROUP
            yield POLL_GROUP

    def split(self, record: dict) -> list[tuple[str, dict]]:
        """The poll group gets only what `_PollJudge` reads of a record (`_poll_part`)."""
        keys = sorted(set(self.group_keys(record)))
        return [(k, _poll_part(record) if k == POLL_GROUP else record) for k in keys]

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        keys = None
        for r in records:
            mine = set(self.group_keys(r))
            keys = mine if keys is None else keys & mine
        return self.check_group(sorted(keys)[0], records, profile) if keys else []

    def streams_group(self, key: str) -> bool:
        """The poll group is judged as it streams by (`_PollJudge`): engines need not hold
        every poll's records for it. The other groups are judged whole."""
        return key == POLL_GROUP

    def start(self, key: str, profile: str) -> "_PollJudge":
        return _PollJudge(profile)

    def check_group(self, key: str, records: Iterable[dict], profile: str) -> list[Anomaly]:
        if self.streams_group(key):
            return super().check_group(key, records, profile)
        records = records if isinstance(records, list) else list(records)
        if key.startswith("kip392-leo:"):
            topic, _, part = key[len("kip392-leo:"):].rpartition("/")
            return self._judge_partition(records, topic, as_int(part), profile)
        if key == ISR_GROUP:
            return self._judge_in_sync_followers(records, profile)
        return self._judge_broker(records, profile)

    # --- one broker: KIP-392 cases, with the bounds its own answers prove ----------------
    def _judge_broker(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """(An answer `tiered-read-out-of-range` may explain is judged in `kip392-isr` instead:
        its bound needs the leader's answers, `_judge_in_sync_followers`.)"""
        out: list[Anomaly] = []
        for op, entry, _, same, bounds in self._broker_answers(records):
            out += self._uncommitted(op, entry, same, profile)
            if not _tiered_candidate(entry, profile):
                out += self._judge(op, entry, profile, bounds)
        return out

    @staticmethod
    def _broker_view(records: Sequence[dict]) -> tuple:
        """One broker's (fetch and ListOffsets answers, EpochIndex, Lives, `hwm_series`)."""
        ops = answered(records, ["fetch", "list_offsets"])
        epochs = EpochIndex(answered(records, ["metadata"]))
        lives = Lives(records)
        return ops, epochs, lives, hwm_series(ops, epochs, lives)

    def _broker_answers(self, records: Sequence[dict], view: tuple | None = None):
        """One broker's answered consumer fetch entries: (op, entry, proven epoch, the HWM
        answers of its epoch and life, the log bounds its own answers prove)."""
        ops, epochs, lives, series = view or self._broker_view(records)
        leo_lows, start_highs = self._log_facts(ops, series, lives)
        for op in ops:
            if op.f != "fetch" or op.value.get("top_error", NONE) not in (NONE, None):
                continue
            for entry in partitions_of(op.value):
                if not _answered(entry):
                    continue
                tp = (entry.get("topic"), entry.get("partition"))
                epoch, life = proven_epoch(op, entry, epochs), lives.of(op.completed)
                bounds = kip392.NO_BOUNDS
                if entry.get("error", NONE) != NONE:  # a least LEO or greatest log start only rules out errors
                    lows, highs = leo_lows.get((*tp, epoch, life)), start_highs.get((*tp, life))
                    bounds = kip392.LogBounds(leo_min=lows.before(op.invoked) if lows else None,
                                              log_start_max=highs.after(op.completed) if highs else None)
                yield op, entry, epoch, series.get((*tp, epoch, life), []), bounds

    # --- in-sync followers: the leader's HWM is a least LEO ------------------------------
    def _judge_in_sync_followers(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        """KIP-392 case 1 on a follower (`kip392.leo_reached_leader_hwm`): a follower in the
        leader's ISR at some moment after the leader reported a HWM had its LEO at that HWM by
        then, so a fetch at an offset in [its own HWM, the leader's HWM) is case 1 (Kafka:
        NONE and no records; the KIP: OFFSET_NOT_AVAILABLE), never OFFSET_OUT_OF_RANGE.
        The leader's HWM is that of its latest answer in the epoch before the follower's
        request after which `_IsrProof` proves the follower in its ISR (`_Reports`). Only what
        this bound adds to the follower's own bounds (`_broker_answers`, judged in its broker's
        group) is reported here.

        Also judged here, under a profile carrying `tiered-read-out-of-range`: every OFFSET_OUT_OF_RANGE
        answer with HWM and log start -1 (`_tiered_candidate`; its broker's group leaves it out), with
        its own bounds, as that group would, or-ed with `kip392.tiered_read_out_of_range`, whose facts
        come from more than one broker (`_tiered`). Kafka mechanism: TierStateMachine.buildRemoteLogAuxState
        empties the follower's leader-epoch cache before assigning the tier's epochs;
        RemoteLogManager.read reports OffsetOutOfRange for an offset without an epoch (real false
        alarm: corpus tiered seed 2, kipcheck/2 @104; docs/findings.md section 1)."""
        isr = _IsrProof(records)
        tiering = profiles.get(profile).allows(profiles.TIERED_READ_OUT_OF_RANGE)
        if not isr.known and not tiering:
            return []
        by_broker: dict[int, list[dict]] = {}
        for r in records:
            if r.get("f") == "fault":
                for b in fault_brokers(r):
                    by_broker.setdefault(b, []).append(r)
            else:
                by_broker.setdefault(as_int((r.get("value") or {}).get("broker"), -1), []).append(r)
        views = {b: self._broker_view(rs) for b, rs in by_broker.items()}
        answers = {b: list(self._broker_answers(rs, views[b])) for b, rs in by_broker.items()}
        starts = _LocalStarts(views) if tiering else None
        highs = _hwms_by_life(views) if tiering else {}
        tiered: dict[int, tuple] = {}  # id(entry) -> (predicate, why), for `_tiered_candidate` entries
        out: list[Anomaly] = []
        for b, items in answers.items():
            for op, entry, epoch, _, own in items:
                if tiering and _tiered_candidate(entry, profile):
                    tiered[id(entry)] = self._tiered(b, op, entry, epoch, isr, views, starts, highs)
                    out += self._judge(op, entry, profile, own, tiered=tiered[id(entry)])
        if not isr.known:
            return out
        leader_hwms: dict[tuple, list] = {}
        for b, items in answers.items():
            for op, entry, epoch, _, _ in items:
                tp, hwm = (entry.get("topic"), entry.get("partition")), as_int(entry.get("high_watermark"), -1)
                if entry.get("error", NONE) == NONE and hwm >= 0 and epoch is not None and isr.leader(tp, epoch) == b:
                    leader_hwms.setdefault((*tp, epoch), []).append((op.completed, hwm, op.invoked, op.indices))
        reports = {k: _Reports(v) for k, v in leader_hwms.items()}
        for b, items in answers.items():
            for op, entry, epoch, _, own in items:
                tp = (entry.get("topic"), entry.get("partition"))
                leader = None if epoch is None else isr.leader(tp, epoch)
                if leader is None or leader == b or (*tp, epoch) not in reports:
                    continue
                leader_hwm, proof = reports[(*tp, epoch)].in_sync(isr, tp, epoch, leader, b, (op.invoked, op.completed))
                least = kip392.leo_reached_leader_hwm(leader_hwm, leader_hwm is not None)
                if least is None or (own.leo_min is not None and own.leo_min >= least):
                    continue
                bounds = kip392.LogBounds(leo_min=least, leo_max=own.leo_max, log_start_max=own.log_start_max,
                                          hwm_max=own.hwm_max)
                out += self._judge(op, entry, profile, bounds, unless_under=own, proof=proof,
                                   why=f"broker {b} was in leader {leader}'s ISR of epoch {epoch}, whose HWM had "
                                       f"reached {least}", tiered=tiered.get(id(entry)))
        return out

    @staticmethod
    def _tiered(b: int, op: Op, entry: dict, epoch: int | None, isr: "_IsrProof", views: dict,
                starts: "_LocalStarts", highs: dict) -> tuple:
        """`kip392.tiered_read_out_of_range` for broker `b`'s answer `entry`, as a predicate of the
        profile, and the text saying why it holds: the epoch's leader
        (`_IsrProof.leader`), that leader's first EARLIEST_LOCAL answer in the epoch and its life
        invoked after the fetch completed (`_LocalStarts`), and the greatest HWM `b` reported for the
        partition in its life (any epoch) before the fetch was invoked."""
        tp, offset = (entry.get("topic"), entry.get("partition")), int(entry["fetch_offset"])
        leader = None if epoch is None else isr.leader(tp, epoch)
        start = None
        if leader is not None and leader in views:
            start = starts.after(tp, epoch, leader, views[leader][2].of(op.completed), op.completed)
        own = highs.get((b, *tp, views[b][2].of(op.completed)))
        before = own.before(op.invoked + 1) if own else None  # completed <= invoked
        is_leader = None if leader is None else leader == b
        local_start = start[0] if start else None

        def holds(p):
            return kip392.tiered_read_out_of_range(offset, is_leader, local_start, before, p)

        why = "" if start is None else (
            f"broker {b} is not leader {leader} of epoch {epoch}, whose local log start {local_start} (answered "
            f"after the fetch, index {start[1][-1]}) is above the offset"
            + (f" and at least every HWM {b} reported before in its life (at most {before})" if before is not None
               else "") + ": a follower rebuilding its log from the tier (tiered-read-out-of-range)")
        return holds, why

    @staticmethod
    def _log_facts(ops: list, series: dict, lives: Lives):
        """Per (topic, partition, epoch, life): the least LEO each answer proves, by
        completion time: its HWM and one past each record it returned (committed data is
        never truncated, and within one epoch the log only grows past it). Per (topic,
        partition, life): the greatest log start each answer proves, by invoke time: the
        log start it reported (within one life the log start only grows)."""
        lows: dict[tuple, list] = {}
        for key, items in series.items():
            for o in items:
                recs = [r + 1 for x in partitions_of(o.op.value)
                        if (x.get("topic"), x.get("partition")) == key[:2] for r in _offsets(x)]
                lows.setdefault(key, []).append((o.op.completed, max([o.hwm, *recs])))
        highs: dict[tuple, list] = {}
        for o in ops:
            life = lives.of_op(o)
            if o.f != "fetch" or life is None or o.value.get("top_error", NONE) not in (NONE, None):
                continue
            for x in partitions_of(o.value):
                if not x.get("omitted") and x.get("error", NONE) == NONE and as_int(x.get("log_start_offset"), -1) >= 0:
                    highs.setdefault((x.get("topic"), x.get("partition"), life), []).append(
                        (o.invoked, int(x["log_start_offset"])))
        return ({k: Extremes(v, max) for k, v in lows.items()}, {k: Extremes(v, min) for k, v in highs.items()})

    def _uncommitted(self, op: Op, e: dict, same: list, profile: str) -> list[Anomaly]:
        hwm = as_int(e.get("high_watermark"), -1)
        above = [o for o in _offsets(e) if hwm >= 0 and o >= hwm]
        if e.get("error", NONE) != NONE or not above:
            return []
        later = tuple((o.hwm, o.op.invoked > op.completed) for o in same
                      if o.op.completed > op.completed and o.op is not op)
        kind = verdict(lambda p: kip392.records_committed(above, hwm, p, later), profile)
        where = f"{e.get('topic')}/{e.get('partition')} on broker {op.value.get('broker')} at offset {e['fetch_offset']}"
        return _anomaly(kind, "uncommitted-read", "kip392.records_committed", op.indices,
                        f"fetch of {where} returned offsets {above[:5]} at or above the reported HWM {hwm}"
                        + ("" if kind == "known" else
                           f"; later HWMs of that broker in that epoch: {sorted({h for h, _ in later})[:5] or 'none'}"),
                        offsets=above[:20], high_watermark=hwm, later_high_watermarks=sorted({h for h, _ in later})[:20])

    def _judge(self, op: Op, e: dict, profile: str, bounds=kip392.NO_BOUNDS, unless_under=None,
               why: str = "", proof: tuple = (), tiered=None) -> list[Anomaly]:
        """`unless_under`: report only where `bounds` decide otherwise than these bounds (under
        which another group judges the same answer). `proof`: the indices of the answers that
        prove `bounds`, reported with the answer's own. `tiered`: (profile -> bool, why) for a
        `_tiered_candidate`: `kip392.tiered_read_out_of_range`, asked only when the KIP-392 cases
        reject the answer under the profile (then it alone is the deviation that accepts it)."""
        err, offset = e.get("error", NONE), int(e["fetch_offset"])
        hwm, start = as_int(e.get("high_watermark"), -1), as_int(e.get("log_start_offset"), -1)
        if err not in kip392.CASE_ERRORS or as_int(e.get("preferred_read_replica"), -1) >= 0:
            return []  # other errors belong to other KIPs; a redirect skips the read
        known = Replica(int(op.value.get("broker", -1)), log_start=start if start >= 0 else None,
                        leo=None, hwm=hwm if hwm >= 0 else None)

        def allowed(p, b=bounds):
            return any(o.matches(err, [], hwm, start) for o in kip392.consumer_fetch_outcomes(known, offset, p, b))

        def judged(b):
            kind = verdict(lambda p: allowed(p, b), profile)
            if kind == "anomaly" and tiered is not None:
                kind = verdict(lambda p: allowed(p, b) or tiered[0](p), profile)
                return kind, (tiered[1] if kind != "anomaly" else "")
            return kind, ""

        kind, rebuilding = judged(bounds)
        if unless_under is not None and kind == judged(unless_under)[0]:
            return []
        why = "; ".join(w for w in (why, rebuilding) if w)
        where = f"{e.get('topic')}/{e.get('partition')} on broker {op.value.get('broker')} at offset {offset}"
        bound_text = ", ".join(f"{k} {v}" for k, v in (("LEO >=", bounds.leo_min), ("LEO <=", bounds.leo_max),
                                                        ("log start <=", bounds.log_start_max)) if v is not None)
        return _anomaly(kind, "wrong-fetch-error", "kip392.consumer_fetch_outcomes", (*op.indices, *proof),
                        f"fetch of {where} answered {err} with HWM {hwm} and log start {start}, "
                        f"which no replica state allows (KIP-392 cases 1-4)"
                        + (f" with {bound_text} (proven by other answers)" if bound_text else "")
                        + (f": {why}" if why else ""),
                        error=err, fetch_offset=offset, high_watermark=hwm, log_start_offset=start,
                        leo_min=bounds.leo_min, leo_max=bounds.leo_max, log_start_max=bounds.log_start_max)

    # --- one partition: what every broker's answers and the sends prove ---------------
    def _judge_partition(self, records: Sequence[dict], topic, part, profile: str) -> list[Anomaly]:
        out = self._never_committed(records, topic, part)
        bound = SendBound(records, topic, part)
        if not bound.known:
            return out
        for op in answered(records, ["fetch", "offsets_for_leader_epoch"]):
            leo_max = bound.leo_max(op.invoked, op.completed)
            if op.f == "offsets_for_leader_epoch":
                end = as_int(op.value.get("end_offset"), -1)
                if op.value.get("error", NONE) == NONE and not kip392.epoch_end_offset_possible(end, leo_max):
                    out += _anomaly("anomaly", "wrong-fetch-error", "kip392.epoch_end_offset_possible", op.indices,
                                    f"OffsetsForLeaderEpoch answered end offset {end} for {topic}/{part}, above any "
                                    f"LEO the partition's sends allow ({leo_max})", end_offset=end, leo_max=leo_max)
                continue
            if op.value.get("top_error", NONE) not in (NONE, None):
                continue
            for e in _entries(op, topic, part):
                if as_int(e.get("fetch_offset"), -1) > leo_max:  # below it some allowed LEO reaches it
                    out += self._judge(op, e, profile, kip392.partition_log_bounds(leo_max),
                                       unless_under=kip392.NO_BOUNDS)
        return out

    @staticmethod
    def _never_committed(records: Sequence[dict], topic, part) -> list[Anomaly]:
        """Records read at or above the HWM their answer reported, at an offset where the
        history shows another committed record (`kip392.read_value_committed`): under
        every profile, since even a HWM sampled before the read bounds only committed data."""
        fetches = [op for op in answered(records, ["fetch"])
                   if _is_consumer(op.value) and op.value.get("top_error", NONE) in (NONE, None)]
        committed: dict[int, set] = {}
        for r in records:
            v = r.get("value") or {}
            if (r.get("f") == "send" and r.get("type") == "ok" and v.get("acks") == "all"
                    and (v.get("topic"), as_int(v.get("partition"))) == (topic, part) and as_int(v.get("offset"), -1) >= 0):
                committed.setdefault(int(v["offset"]), set()).add(_plain(v.get("value")))
        for op in fetches:
            for e in _entries(op, topic, part):
                hwm = as_int(e.get("high_watermark"), -1)
                for offset, value in e.get("records") or []:
                    if e.get("error", NONE) == NONE and 0 <= int(offset) < hwm:
                        committed.setdefault(int(offset), set()).add(_plain(value))
        out: list[Anomaly] = []
        for op in fetches:
            for e in _entries(op, topic, part):
                hwm = as_int(e.get("high_watermark"), -1)
                if e.get("error", NONE) != NONE or hwm < 0:
                    continue
                wrong = [(int(o), v, sorted(map(str, committed[int(o)] - {_plain(v)}))) for o, v in e.get("records") or []
                         if int(o) >= hwm and not kip392.read_value_committed(_plain(v), committed.get(int(o), ()))]
                if wrong:
                    o, v, others = wrong[0]
                    out += _anomaly("anomaly", "uncommitted-read", "kip392.read_value_committed", op.indices,
                                    f"fetch of {topic}/{part} on broker {op.value.get('broker')} returned {v!r} at "
                                    f"offset {o}, above its reported HWM {hwm}, where the history shows the committed "
                                    f"record(s) {others[:3]}: it was never committed",
                                    offsets=[w[0] for w in wrong][:20], high_watermark=hwm, committed_instead=others[:3])
        return out


ISR_GROUP = "kip392-isr"


class _IsrProof:
    """Which broker led a leader epoch, and whether a follower was in its ISR after the leader
    reported a HWM and before the follower answered.

    Kafka's leader advances its HWM only to the least LEO over its `Partition.maximalIsr`
    (`maybeIncrementLeaderHW`), and adds a follower to it only once the follower's LEO reached
    the HWM (`isFollowerInSync`); within one epoch and life the HWM never goes back and a
    follower never truncates below it. So a follower in the leader's maximal ISR at any moment
    after the leader reported HWM h held offsets below h from then on, and when it answered
    later in that epoch and life.

    From every broker's `metadata` answers, by completion. The follower was in the leader's
    maximal ISR at some moment in [report completed, answer invoked] when every answer from the
    last one completed before the follower's request was invoked to the first one invoked
    `IMAGE_LAG_NS` after the report completed names that leader for that epoch and lists the
    follower in the ISR, and the answers span less than `ISR_SPAN_NS`; and no fault touched any
    node from the report (or the first answer, if earlier) to the follower's answer (or the last
    answer, if later): no lost log, no new life. The first answer shows the committed ISR of a
    moment before the request, the last one that of a moment after the report (a broker's image
    lags less than `IMAGE_LAG_NS`), and a committed ISR an answer shows is in the leader's
    `maximalIsr` (a shrink is in it until it commits; an expansion from its proposal). Assumed,
    as `PreferredReplicaRule` assumes for the ISR it proves a replica out of: a broker's metadata
    image lags less than `IMAGE_LAG_NS`, and no shrink and rejoin of the follower falls between
    two answers of a fault-free span shorter than `replica.lag.time.max.ms` (8 s here), the lag a
    shrink needs. An answer sooner than `IMAGE_LAG_NS` after the report proves nothing about the
    ISR after it: the leader may have shrunk a follower that lagged 8 s just before its report
    (`Partition.handleAlterPartitionUpdate` takes the committed ISR at once) while the images
    still showed the old ISR."""

    def __init__(self, records: Sequence[dict]):
        # (topic, partition) -> [(invoked, completed, epoch, leader, isr, indices)]
        self.answers: dict[tuple, list[tuple]] = {}
        self.leaders: dict[tuple, int] = {}
        for op in answered(records, ["metadata"]):
            v = op.value
            epoch, leader = as_int(v.get("leader_epoch"), -1), as_int(v.get("leader"), -1)
            if epoch < 0 or leader < 0:
                continue
            tp = (v.get("topic"), v.get("partition"))
            isr = frozenset(as_int(x, -1) for x in v.get("isr") or ())
            self.answers.setdefault(tp, []).append((op.invoked, op.completed, epoch, leader, isr, op.indices))
            self.leaders.setdefault((*tp, epoch), leader)
        for items in self.answers.values():
            items.sort(key=lambda a: a[1])
        self.done = {tp: [a[1] for a in items] for tp, items in self.answers.items()}
        self.faults = fault_windows(records)
        self.known = bool(self.answers)

    def leader(self, tp: tuple, epoch: int) -> int | None:
        """The leader of `epoch` (an epoch has one leader; any broker's answer names it)."""
        return self.leaders.get((*tp, epoch))

    def chain(self, tp: tuple, epoch: int, leader: int, follower: int, answer: tuple) -> list[tuple]:
        """The answers, (invoked, completed, indices), from the last one completed before the
        follower's `answer` (invoked, completed) was invoked, as long as each names `leader` for
        `epoch` with `follower` in the ISR and they span less than `ISR_SPAN_NS`; up to the first
        one invoked `IMAGE_LAG_NS` after the answer was (it closes the proof for any report
        before the answer). Empty: no answer before the request."""
        items = self.answers.get(tp, [])
        i = bisect.bisect_left(self.done.get(tp, []), answer[0]) - 1
        out: list[tuple] = []
        for a in items[i:] if i >= 0 else ():
            if a[2] != epoch or a[3] != leader or follower not in a[4] or a[1] - items[i][0] >= ISR_SPAN_NS:
                break
            out.append((a[0], a[1], a[5]))
            if a[0] >= answer[0] + IMAGE_LAG_NS:
                break
        return out

    def faultless(self, begin: int, end: int) -> bool:
        """No fault touched any node in [begin, end]: no lost log, no new life, no fencing."""
        return not touched(self.faults, begin, end, None)


def _tiered_candidate(entry: dict, profile: str) -> bool:
    """An answer `tiered-read-out-of-range` may explain under `profile`: OFFSET_OUT_OF_RANGE with
    HWM and log start -1, no redirect (judged in `kip392-isr`, not in its broker's group)."""
    return (entry.get("error", NONE) == "OFFSET_OUT_OF_RANGE" and as_int(entry.get("high_watermark"), -1) == -1
            and as_int(entry.get("log_start_offset"), -1) == -1 and as_int(entry.get("preferred_read_replica"), -1) < 0
            and profiles.get(profile).allows(profiles.TIERED_READ_OUT_OF_RANGE))


def _hwms_by_life(views: dict) -> dict[tuple, Extremes]:
    """(broker, topic, partition, life) -> the HWMs that broker answered, any leader epoch, by
    completion (`Extremes`, max), from each broker's `_broker_view`."""
    points: dict[tuple, list] = {}
    for b, (_, _, _, series) in views.items():
        for (topic, part, _, life), items in series.items():
            points.setdefault((b, topic, part, life), []).extend((o.op.completed, o.hwm) for o in items)
    return {k: Extremes(v, max) for k, v in points.items()}


class _LocalStarts:
    """KIP-405 local log starts a partition's leader answered: per (topic, partition, leader epoch),
    the EARLIEST_LOCAL (-4) ListOffsets answers to consumers (error NONE, to a request naming that
    epoch as `current_leader_epoch`, which Kafka's leader checks), `(invoked, broker, life, offset,
    indices)` by invoke time, from each broker's `_broker_view`."""

    def __init__(self, views: dict):
        self.items: dict[tuple, list[tuple]] = {}
        for b, (ops, _, lives, _) in views.items():
            for op in ops:
                v = op.value
                epoch, life = as_int(v.get("current_leader_epoch"), -1), lives.of_op(op)
                if (op.f == "list_offsets" and as_int(v.get("timestamp")) == -4 and _is_consumer(v) and epoch >= 0
                        and v.get("error", NONE) == NONE and as_int(v.get("offset"), -1) >= 0 and life is not None):
                    self.items.setdefault((v.get("topic"), v.get("partition"), epoch), []).append(
                        (op.invoked, b, life, int(v["offset"]), op.indices))
        for items in self.items.values():
            items.sort(key=lambda a: a[0])

    def after(self, tp: tuple, epoch: int, leader: int, life: int, t: int) -> tuple | None:
        """(offset, indices) of `leader`'s first answer in `epoch` and `life` invoked at or after
        `t`; None if there is none."""
        items = self.items.get((*tp, epoch), [])
        for invoked, b, lf, offset, indices in items[bisect.bisect_left(items, t, key=lambda a: a[0]):]:
            if b == leader and lf == life:
                return offset, indices
        return None


class _Reports:
    """One leader's HWM answers in one epoch, `(completed, hwm, invoked, indices)`, by completion."""

    def __init__(self, answers: list[tuple]):
        self.items = sorted(answers, key=lambda a: a[0])
        self.done = [a[0] for a in self.items]

    def in_sync(self, isr: _IsrProof, tp: tuple, epoch: int, leader: int, follower: int,
                answer: tuple) -> tuple[int | None, tuple]:
        """The HWM of the latest report before the follower's `answer` (invoked, completed)
        after which `isr` proves the follower in the leader's ISR (`_IsrProof`): the latest the
        chain closes (its last answer invoked `IMAGE_LAG_NS` after the report completed) is best
        in every way, the highest HWM (a leader's never goes back in its epoch) and the shortest
        span to keep free of faults (from the report, or the chain's first answer, to the
        closing answer or the follower's answer). (HWM, the indices of the report and of the
        chain's first and closing answers); (None, ()): nothing proven."""
        chain = isr.chain(tp, epoch, leader, follower, answer)
        if not chain:
            return None, ()
        latest = min(chain[-1][0] - IMAGE_LAG_NS, answer[0] - 1)
        k = bisect.bisect_right(self.done, latest) - 1
        if k < 0:
            return None, ()
        done, hwm, invoked, indices = self.items[k]
        closing = next(a for a in chain if a[0] >= done + IMAGE_LAG_NS)
        if not isr.faultless(min(chain[0][0], invoked), max(closing[1], answer[1])):
            return None, ()
        return hwm, (*indices, *chain[0][2], *closing[2])


POLL_GROUP = "kip392-poll"


class _PollJudge:
    """KIP-392 "Follower Fetching" for consumer polls (`uncommitted-read`): a poll reports no
    HWM, but each record it returned was below the serving replica's HWM when read, and that
    HWM is at most what the partition's leader answered afterwards in the same leader epoch and
    life (a leader's HWM never goes back there; a follower's is one the leader sent it). So a
    polled record at offset k is proven uncommitted when read (`kip392.records_committed`, no
    reported HWM) if leader L of epoch E (any broker's metadata names it)
    - answered a consumer fetch in E (B) before the record's send was invoked: the record was
      written while L already led E, so no earlier epoch's leader committed it (every record
      such a leader commits after L's election is one L already held, appended before);
    - answered one in E invoked after the poll completed (A) with HWM <= k: the record was
      served between its send and the poll's completion, while L's HWM was <= k;
    - and no fault ran (any node) and no upgrade step, from B to A (plus `SETTLE_NS`): L kept
      its life, and no later epoch's leader committed the record meanwhile (L's ISR would have
      held it back: L, ignorant of that epoch, fetched nothing from it, and leaves its ISR only
      after `replica.lag.time.max.ms` (8 s) unseen, by fencing or by shutdown; L's metadata
      image lags less than that while no fault runs).
    Assumed: a non-transactional send's value is sent once (the workload's values are
    `process-n`; a transactional copier re-sends values, so those sends are not used).

    Streamed (the group is every send invoke and every poll that returned records): only sends invoked after a
    consumer fetch answer of their partition are remembered, until a poll reads them while no
    broker named the partition's leader that answered before the send last answered a HWM <=
    the offset (never a candidate then: in the span a proof needs, that broker's HWM only rose
    since); a polled record waits for each such broker's next answer asked after the poll, and
    is confirmed in `finish` (epochs, leader, faults)."""

    def __init__(self, profile: str = "kip"):
        self.profile = profile
        self.invoked: dict = {}  # (process, f) -> (index, time) of the pending invoke
        self.answers: dict[tuple, list] = {}  # (topic, partition, broker) -> [_Answer], by completion
        self.last_hwm: dict[tuple, int] = {}  # (topic, partition, broker) -> HWM of its latest answer
        self.first_done: dict[tuple, dict] = {}  # (topic, partition) -> {broker: first answer completed}
        self.metadata: list[Op] = []
        self.faults: list[dict] = []
        self.upgrades: list[tuple] = []  # (start, end, None) windows of upgrade steps
        self.leaders: dict[tuple, set] = {}  # (topic, partition) -> brokers metadata named its leader so far
        self.sent: dict[tuple, tuple] = {}  # (topic, partition, value) -> (invoke time, index)
        self.waiting: dict[tuple, deque] = {}  # (topic, partition, broker) -> [_Candidate], by poll completion
        self.found: list[tuple] = []  # (candidate, broker, answer A)

    def add(self, r: dict) -> None:
        f, kind, v, t = r["f"], r["type"], r.get("value") or {}, r.get("time", 0)
        if f == "fault":
            self.faults.append(r)
            return
        if f == "send":
            key = (v.get("topic"), v.get("partition"))
            if kind == "invoke" and "txn" not in v and key in self.first_done:
                self.sent.setdefault((*key, _plain(v.get("value"))), (t, r["index"]))
            return
        if f == "poll":
            if kind == "ok":
                self._poll((r["index"],), t, v.get("records") or [])
            return
        pending = (r.get("process"), f)
        if kind == "invoke":
            self.invoked[pending] = (r["index"], t)
            return
        index, invoked = self.invoked.pop(pending, (r["index"], t))
        if kind != "ok":
            return
        if f == "upgrade":
            self.upgrades.append((invoked, t + SETTLE_NS, None))
        elif f == "metadata":
            self.metadata.append(Op(index, r["index"], invoked, t, r.get("process"), f, v))
            if as_int(v.get("leader"), -1) >= 0:
                self.leaders.setdefault((v.get("topic"), v.get("partition")), set()).add(as_int(v["leader"]))
        elif f == "fetch" and v.get("top_error", NONE) in (NONE, None):
            for e in partitions_of(v):
                hwm = as_int(e.get("high_watermark"), -1)
                if _answered(e) and e.get("error", NONE) == NONE and hwm >= 0:
                    self._answer(_Answer(as_int(v.get("broker")), as_int(v.get("current_leader_epoch"), -1),
                                         invoked, t, hwm, (index, r["index"])), e.get("topic"), e.get("partition"))

    def _answer(self, a: "_Answer", topic, part) -> None:
        key = (topic, part, a.broker)  # as the partition's sends and polls name it
        self.answers.setdefault(key, []).append(a)
        self.last_hwm[key] = a.hwm
        self.first_done.setdefault(key[:2], {}).setdefault(a.broker, a.completed)
        waiting = self.waiting.get(key)
        while waiting and waiting[0].done < a.invoked:  # the polls completed before this answer was asked
            c = waiting.popleft()
            if a.hwm <= c.offset:
                self.found.append((c, a.broker, a))

    def _poll(self, poll: tuple, done: int, records: list) -> None:
        """Each polled record sent after an answer of its partition waits for the next answer
        (asked after the poll) of each broker named its leader that answered before the send
        and last answered a HWM <= its offset; a record no such broker waits for is forgotten."""
        sent, views = self.sent, {}
        if not sent:
            return
        for topic, part, offset, value in records:
            key = (topic, part, value if type(value) is str else _plain(value))
            send = sent.get(key)
            if send is None or type(offset) is not int:
                continue
            view = views.get(key[:2])
            if view is None:  # (broker, its first answer's completion, its last HWM)
                first = self.first_done.get(key[:2], {})
                view = views[key[:2]] = [(b, first[b], self.last_hwm[(*key[:2], b)])
                                         for b in self.leaders.get(key[:2], ()) if b in first]
            brokers = [b for b, first, hwm in view if first < send[0] and hwm <= offset]
            if not brokers:
                del sent[key]
                continue
            c = _Candidate(poll, done, key[:2], offset, value, send)
            for b in brokers:
                self.waiting.setdefault((*key[:2], b), deque()).append(c)

    def finish(self) -> list[Anomaly]:
        profile = self.profile
        epochs = EpochIndex(self.metadata)
        leaders: dict[tuple, int] = {}
        for op in self.metadata:
            epoch, leader = as_int(op.value.get("leader_epoch"), -1), as_int(op.value.get("leader"), -1)
            if epoch >= 0 and leader >= 0:
                leaders.setdefault((op.value.get("topic"), op.value.get("partition"), epoch), leader)
        windows = fault_windows(self.faults) + self.upgrades
        proven: dict[tuple, list] = {}  # (poll indices, topic, partition) -> [(candidate, B, A, epoch)]
        for c, broker, a in self.found:
            epoch = a.epoch(c.tp, epochs)
            if epoch is None or leaders.get((*c.tp, epoch)) != broker:
                continue
            b = self._before(c, broker, epoch, epochs)
            if b is None or touched(windows, b.invoked, a.completed, None):
                continue
            if verdict(lambda p: kip392.records_committed([c.offset], None, p, ((a.hwm, True),)), profile):
                proven.setdefault((c.poll, *c.tp), []).append((c, b, a, epoch))
        out: list[Anomaly] = []
        for (poll, topic, part), items in proven.items():
            items = sorted({id(i[0]): i for i in items}.values(), key=lambda i: i[0].offset)
            c, b, a, epoch = items[0]
            offsets = sorted({i[0].offset for i in items})
            out += _anomaly("anomaly", "uncommitted-read", "kip392.records_committed",
                            [*poll, *b.indices, *a.indices, *(i[0].send[1] for i in items)],
                            f"poll of {topic}/{part} returned offsets {offsets[:5]} ({c.value!r} at {c.offset}), at "
                            f"or above the HWM {a.hwm} its leader {a.broker} answered in epoch {epoch} after the poll "
                            f"(index {a.indices[-1]}), although {c.value!r} was sent (index {c.send[1]}) after that "
                            f"leader had answered in epoch {epoch} (index {b.indices[-1]}), with no fault between: "
                            f"not committed when the poll was served",
                            offsets=offsets[:20], high_watermark=a.hwm, leader=a.broker, leader_epoch=epoch)
        return out

    def _before(self, c: "_Candidate", broker: int, epoch: int, epochs: EpochIndex) -> "_Answer | None":
        """The leader's last answer completed before the record's send, if it proves `epoch`
        (epochs on one broker only rise: an earlier one in `epoch` would be no nearer)."""
        answers = self.answers[(*c.tp, broker)]
        i = bisect.bisect_left(answers, c.send[0], key=lambda x: x.completed)
        for b in reversed(answers[:i]):
            proven = b.epoch(c.tp, epochs)
            if proven is not None:
                return b if proven == epoch else None
        return None


class _Answer:
    """One consumer fetch answer of one partition (NONE, with a HWM) as `_PollJudge` keeps it."""

    __slots__ = ("broker", "leader_epoch", "invoked", "completed", "hwm", "indices", "_epoch")

    def __init__(self, broker, leader_epoch, invoked, completed, hwm, indices):
        self.broker, self.leader_epoch, self.invoked, self.completed = broker, leader_epoch, invoked, completed
        self.hwm, self.indices, self._epoch = hwm, indices, False

    def epoch(self, tp: tuple, epochs: EpochIndex) -> int | None:
        """The broker's proven leader epoch while it answered (`proven_epoch`)."""
        if self._epoch is False:
            op = Op(self.indices[0], self.indices[-1], self.invoked, self.completed, None, "fetch",
                    {"broker": self.broker, "current_leader_epoch": self.leader_epoch})
            self._epoch = proven_epoch(op, {"topic": tp[0], "partition": tp[1], "error": NONE}, epochs)
        return self._epoch


class _Candidate:
    """A polled record that may prove an uncommitted read: the poll (indices, completion), the
    record and its send (invoke time, index)."""

    __slots__ = ("poll", "done", "tp", "offset", "value", "send")

    def __init__(self, poll, done, tp, offset, value, send):
        self.poll, self.done, self.tp, self.offset, self.value, self.send = poll, done, tp, offset, value, send


def _poll_part(record: dict) -> dict:
    """What `_PollJudge` reads of a record: a send's partition and value, a poll's records, a
    consumer fetch's broker, epoch and per-partition error and HWM, a metadata answer's leader."""
    v, f = record.get("value") or {}, record.get("f")
    if f == "send":
        part = {"topic": v.get("topic"), "partition": v.get("partition"), "value": v.get("value")}
        if "txn" in v:
            part["txn"] = v["txn"]
    elif f == "poll":
        part = {"records": v.get("records")}
    elif f == "fetch":
        part = {k: v[k] for k in ("broker", "replica_id", "current_leader_epoch", "top_error") if k in v}
        if record.get("type") == "ok":
            part["partitions"] = [{k: e[k] for k in ("topic", "partition", "fetch_offset", "error", "high_watermark",
                                                     "omitted", "missing") if k in e} for e in partitions_of(v)]
    elif f == "metadata":
        part = {k: v[k] for k in ("broker", "topic", "partition", "leader", "leader_epoch") if k in v}
    elif f == "upgrade":
        part = {}
    else:
        return record
    return {**record, "value": part}


def _plain(value):
    """A record value as a hashable, comparable key (values are strings; anything else as JSON)."""
    return value if value is None or isinstance(value, str) else json.dumps(value, sort_keys=True)


def _entries(op: Op, topic, part) -> list[dict]:
    """`op`'s answered entries for one partition (not omitted, with a fetch offset)."""
    return [e for e in partitions_of(op.value) if (e.get("topic"), as_int(e.get("partition"))) == (topic, part)
            and _answered(e)]


def _answered(entry: dict) -> bool:
    """Whether a fetch entry is the broker's answer for a requested partition. Not when the
    answer left the partition out: `omitted` (incremental: KIP-227 allows it) or `missing`
    (a full response: `fetch-session-violation`, checks/rules/session_rules.py); such an
    entry carries no HWM or log start, so KIP-392 has nothing to judge in it."""
    return not (entry.get("omitted") or entry.get("missing")) and "fetch_offset" in entry


class HighWatermarkRule(BaseRule):
    """The HWM one broker reports for a partition never goes back within one leader
    epoch (KIP-392 "High watermark propagation"; docs/history.md). HWM observations: fetch
    responses, and ListOffsets latest for read_uncommitted clients. A request answered
    after another completed must see at least that HWM. State-losing faults on the
    broker start afresh. Under `follower-hwm-follows-leader` a follower may go back once
    per epoch, within the bound `kip392.hwm_may_go_back` states, and no deeper than the
    new leader's HWM could have been (`_leader_floor`: the new leader's own answers, so
    one group holds every broker's). Also: OffsetsForLeaderEpoch end offsets for
    consumers must not exceed the HWM (KIP-392 "Protocol Changes"), proven by a later,
    lower HWM."""

    anomalies = ("hwm-regression", "wrong-fetch-error")
    key = "hwm"
    fs = frozenset(("fetch", "list_offsets", "offsets_for_leader_epoch", "metadata", "fault"))

    def group_keys(self, record: dict) -> Iterable[str]:
        f = record.get("f")
        if f in ("fetch", "list_offsets", "offsets_for_leader_epoch", "metadata") or (
                f == "fault" and fault_brokers(record)):
            yield self.key

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        by_broker: dict[str, list[dict]] = {}
        for r in records:
            targets = fault_brokers(r) if r.get("f") == "fault" else [(r.get("value") or {}).get("broker")]
            for b in targets:
                by_broker.setdefault(str(b), []).append(r)
        views = {b: _BrokerHwm(rs) for b, rs in by_broker.items()}
        out = []
        for view in views.values():
            for key, items in view.series.items():
                out += self._regressions(key, items, view, views, profile)
            out += self._uncapped(view.caps, view.series, view.lives, profile)
        return out

    @staticmethod
    def _regressions(key, items: list, view: "_BrokerHwm", views: dict, profile: str) -> list[Anomaly]:
        topic, part, epoch, life = key
        series, epochs, life_start = view.series, view.epochs, view.lives.start_of(life)
        out = []
        highest_done = _PrefixMax(items)
        drop = None  # the first answer (by invoke) below an earlier one: where a follower copies the leader
        rose = changed = False
        for b in items:
            a = highest_done.before(b.op.invoked)
            if a is None or b.hwm >= a.hwm:
                continue
            broker = b.op.value.get("broker")
            leader = epochs.leader_of_epoch(broker, topic, part, epoch)
            if drop is None:
                drop = b
                rose = _rose([x for x in items if x.op.completed < drop.op.invoked])
                changed = any(k[:2] == (topic, part) and k[2] < epoch and k[3] == life for k in series) or \
                    epochs.earlier_epoch_seen(broker, topic, part, epoch, after=life_start, before=drop.op.invoked)
            back_again = b is not drop and any(x.hwm > b.hwm for x in items
                                               if x.op.invoked >= drop.op.invoked and x.op.completed < b.op.invoked)
            is_leader = None if leader is None else leader == as_int(broker, -2)
            floors: dict = {}

            def allowed(p):
                floors[p.name] = _leader_floor(views, leader, topic, part, epoch, b, p) if b is drop else None
                return kip392.hwm_may_go_back(is_leader, p, after_epoch_change=changed, rose_in_epoch=rose,
                                              back_in_epoch=back_again, to=b.hwm, leader_floor=floors[p.name])

            kind = verdict(allowed, profile)
            floor = max((f for f in floors.values() if f is not None), default=None)
            why = [n for n, c in (("no earlier leader epoch seen in this life", not changed),
                                  ("its HWM had already risen in this epoch", rose),
                                  ("it had already gone back in this epoch", back_again),
                                  (f"below the HWM {floor} its new leader {leader} had proven by then",
                                   floor is not None and b.hwm < floor)) if c]
            note = f" (a follower of {leader}" + (f": {'; '.join(why)})" if why and kind == "anomaly" else ")")
            out += _anomaly(kind, "hwm-regression", "kip392.hwm_may_go_back", a.op.indices + b.op.indices,
                            f"broker {broker} reported HWM {b.hwm} for {topic}/{part} in leader "
                            f"epoch {epoch} after it had reported {a.hwm}" + (note if is_leader is False else ""),
                            topic=topic, partition=part, leader_epoch=epoch, before=a.hwm, after=b.hwm)
        return out

    @staticmethod
    def _uncapped(caps, series: dict, lives: Lives, profile) -> list[Anomaly]:
        out = []
        for c in caps:
            op, topic, part, epoch, end = c
            same = series.get((topic, part, epoch, lives.of_op(op)), [])
            later = [o for o in same if o.op.invoked > op.completed and o.hwm < end]
            if not later:
                continue
            proof = min(later, key=lambda o: o.hwm)
            kind = verdict(lambda p: p.allows(profiles.OFFSETS_FOR_LEADER_EPOCH_UNCAPPED), profile)
            out += _anomaly(kind, "wrong-fetch-error", "kip392.epoch_end_offset_possible", op.indices + proof.op.indices,
                            f"OffsetsForLeaderEpoch told a consumer end offset {end} for {topic}/{part} epoch {epoch}, "
                            f"above the HWM ({proof.hwm} even later): KIP-392 caps it at the HWM",
                            end_offset=end, later_high_watermark=proof.hwm)
        return out


class _BrokerHwm:
    """One broker's HWM answers (`hwm_series`), leader epochs, lives and OffsetsForLeaderEpoch caps."""

    def __init__(self, records: Sequence[dict]):
        self.epochs = EpochIndex(answered(records, ["metadata"]))
        self.lives = Lives(records)
        ops = answered(records, ["fetch", "list_offsets", "offsets_for_leader_epoch"])
        self.series = hwm_series(ops, self.epochs, self.lives)
        self.caps = [(op, *value) for op in ops if op.f == "offsets_for_leader_epoch" and self.lives.of_op(op) is not None
                     for value in hwm_values(op, self.epochs)]
        self.floor = HwmFloor(ops, self.epochs, self.lives, self.series)


def _leader_floor(views: dict, leader, topic, part, epoch: int, drop, profile) -> int | None:
    """The least HWM the new `leader` of `epoch` had when the follower copied it: the HWM the
    leader held from `epoch` - 1 (`HwmFloor.held`: it carries its HWM into its epoch, and a
    leader's HWM never goes back; `epoch` - 1 so that no epoch it may have gone back in lies
    between), in its life at the drop. Not its answers in `epoch`: Kafka's leader reads a
    follower's fetch (`Partition.fetchRecords`: the HWM as it is) before that fetch advances its
    HWM (`updateFollowerFetchState`), so the HWM the follower copies may be older than any
    answer the leader gave meanwhile, by the response's time in flight, which nothing bounds
    (seed-25 run, docs/findings.md section 3). None: nothing proven (any depth)."""
    view = views.get(str(leader)) if leader is not None else None
    if view is None:
        return None
    life = view.lives.of(drop.op.invoked)
    if life != view.lives.of(drop.op.completed):
        return None

    def may_go_back(is_leader, changed, rose, back):
        return kip392.hwm_may_go_back(is_leader, profile, after_epoch_change=changed, rose_in_epoch=rose,
                                      back_in_epoch=back)

    return view.floor.held(leader, topic, part, epoch - 1, life, drop.op.completed, may_go_back)


class _PrefixMax:
    """The highest-HWM answer among those completed before a time (bisect on completions)."""

    def __init__(self, items: list):
        done = sorted(items, key=lambda o: o.op.completed)
        self.times = [o.op.completed for o in done]
        self.best, top = [], None
        for o in done:
            top = o if top is None or o.hwm > top.hwm else top
            self.best.append(top)

    def before(self, t: int):
        i = bisect.bisect_left(self.times, t)
        return self.best[i - 1] if i else None


def _rose(items: list) -> bool:
    """Whether some answer is higher than one completed before it was invoked."""
    lowest = Extremes(((o.op.completed, o.hwm) for o in items), min)
    return any((lo := lowest.before(y.op.invoked)) is not None and lo < y.hwm for y in items)
