"""Model-backed rules for raw-protocol fetches (KIP-392).

* `ConsumerFetchRule`: `uncommitted-read`, `wrong-fetch-error` (KIP-392 cases 1-4).
* `HighWatermarkRule`: `hwm-regression`, and OffsetsForLeaderEpoch answers above the
  HWM (`wrong-fetch-error`).
(`preferred-replica-violation` is `checks.rules.replica_rules`, `fetch-session-violation`
`checks.rules.session_rules`.)

Each rule builds model state only from what brokers answered and flags only what that
proves; a deviation the chosen profile accepts is reported with known=True.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from reference_model import kip392, profiles
from reference_model.state import NONE, Replica

from checks.rules.base import Anomaly
from checks.rules.observe import EpochIndex, Op, answered, as_int, broker_ids, partitions_of, proven_epoch, verdict

KIP392_ERRORS = {"NONE", "OFFSET_OUT_OF_RANGE", "OFFSET_NOT_AVAILABLE"}
#: faults that may cost a broker its in-memory state (HWM, sessions)
STATE_LOSING_FAULTS = {"kill", "wipe", "wipe-metadata", "truncate", "restart", "rolling-restart"}


def _is_consumer(value: dict) -> bool:
    return as_int(value.get("replica_id"), -1) < 0


def _offsets(entry: dict) -> list[int]:
    return [int(r[0]) for r in entry.get("records") or []]


def _anomaly(kind: str | None, name: str, indices, message: str, **details) -> list[Anomaly]:
    if kind is None:
        return []
    return [Anomaly(name, tuple(sorted(set(indices))), message, known=(kind == "known"), details=details)]


class ConsumerFetchRule:
    """KIP-392 "Follower Fetching" and "Out of range handling", judged per response.

    The replica state is what the response itself shows (HWM and log start when not -1;
    the LEO is never observed), so only answers that no LEO could explain are flagged."""

    anomalies = ("uncommitted-read", "wrong-fetch-error")

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        if record.get("f") == "fetch" and _is_consumer(v):
            yield f"kip392-fetch:{v.get('broker')}"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        out: list[Anomaly] = []
        for op in answered(records, ["fetch"]):
            if op.value.get("top_error", NONE) not in (NONE, None):
                continue
            for entry in partitions_of(op.value):
                out += self._judge(op, entry, profile)
        return out

    def _judge(self, op: Op, e: dict, profile: str) -> list[Anomaly]:
        if e.get("omitted") or "fetch_offset" not in e:
            return []
        err, offset = e.get("error", NONE), int(e["fetch_offset"])
        hwm, start = as_int(e.get("high_watermark"), -1), as_int(e.get("log_start_offset"), -1)
        where = f"{e.get('topic')}/{e.get('partition')} on broker {op.value.get('broker')} at offset {offset}"
        out = []
        above = [o for o in _offsets(e) if hwm >= 0 and o >= hwm]
        if err == NONE and above:
            kind = verdict(lambda p: kip392.records_committed(above, hwm, p), profile)
            out += _anomaly(kind, "uncommitted-read", op.indices,
                            f"fetch of {where} returned offsets {above[:5]} at or above the reported HWM {hwm}",
                            offsets=above[:20], high_watermark=hwm)
        if err not in KIP392_ERRORS or as_int(e.get("preferred_read_replica"), -1) >= 0:
            return out  # other errors belong to other KIPs; a redirect skips the read
        known = Replica(int(op.value.get("broker", -1)), log_start=start if start >= 0 else None,
                        leo=None, hwm=hwm if hwm >= 0 else None)

        def allowed(p):
            return any(o.matches(err, [], hwm, start) for o in kip392.consumer_fetch_outcomes(known, offset, p))

        kind = verdict(allowed, profile)
        return out + _anomaly(kind, "wrong-fetch-error", op.indices,
                              f"fetch of {where} answered {err} with HWM {hwm} and log start {start}, "
                              f"which no replica state allows (KIP-392 cases 1-4)",
                              error=err, fetch_offset=offset, high_watermark=hwm, log_start_offset=start)


class HighWatermarkRule:
    """The HWM one broker reports for a partition never goes back within one leader
    epoch (KIP-392 "High watermark propagation"; DESIGN.md). HWM observations: fetch
    responses, and ListOffsets latest for read_uncommitted clients. A request answered
    after another completed must see at least that HWM. State-losing faults on the
    broker start afresh. Also: OffsetsForLeaderEpoch end offsets for consumers must not
    exceed the HWM (KIP-392 "Protocol Changes"), proven by a later, lower HWM."""

    anomalies = ("hwm-regression", "wrong-fetch-error")

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        f = record.get("f")
        if f in ("fetch", "list_offsets", "offsets_for_leader_epoch", "metadata"):
            yield f"hwm:{v.get('broker')}"
        elif f == "fault":
            yield from (f"hwm:{b}" for b in broker_ids(v.get("targets")))

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        epochs = EpochIndex(answered(records, ["metadata"]))
        observations = []  # (op, topic, partition, epoch, hwm)
        caps = []  # OffsetsForLeaderEpoch claims: (op, topic, partition, epoch, end offset)
        for op in answered(records, ["fetch", "list_offsets", "offsets_for_leader_epoch"]):
            for topic, part, epoch, value in self._hwm_values(op, epochs):
                (caps if op.f == "offsets_for_leader_epoch" else observations).append((op, topic, part, epoch, value))
        resets = sorted(r.get("time", 0) for r in records
                        if r.get("f") == "fault" and (r.get("value") or {}).get("fault") in STATE_LOSING_FAULTS)
        out = self._regressions(observations, resets, epochs, profile)
        return out + self._uncapped(caps, observations, resets, profile)

    @staticmethod
    def _hwm_values(op: Op, epochs: EpochIndex):
        v = op.value
        if op.f == "fetch":
            if v.get("top_error", NONE) not in (NONE, None):
                return
            for e in partitions_of(v):
                hwm = as_int(e.get("high_watermark"), -1)
                if not e.get("omitted") and e.get("error", NONE) == NONE and hwm >= 0:
                    epoch = proven_epoch(op, e, epochs)
                    if epoch is not None:
                        yield e.get("topic"), e.get("partition"), epoch, hwm
        elif op.f == "list_offsets":
            if (as_int(v.get("timestamp")) == -1 and _is_consumer(v) and v.get("error", NONE) == NONE
                    and v.get("isolation_level", "read_uncommitted") == "read_uncommitted"
                    and as_int(v.get("offset"), -1) >= 0):
                epoch = as_int(v.get("leader_epoch"), -1)
                if epoch >= 0:
                    yield v.get("topic"), v.get("partition"), epoch, int(v["offset"])
        elif _is_consumer(v) and v.get("error", NONE) == NONE:
            epoch = as_int(v.get("current_leader_epoch"), -1)
            if epoch >= 0 and as_int(v.get("leader_epoch"), -2) == epoch and as_int(v.get("end_offset"), -1) >= 0:
                yield v.get("topic"), v.get("partition"), epoch, int(v["end_offset"])

    @staticmethod
    def _same_life(a: Op, b: Op, resets: list[int]) -> bool:
        """No state-losing fault on the broker between a's completion and b's invoke."""
        import bisect
        return bisect.bisect_right(resets, a.completed) == bisect.bisect_right(resets, b.invoked)

    def _regressions(self, obs, resets, epochs: EpochIndex, profile: str) -> list[Anomaly]:
        out = []
        by_key: dict[tuple, list] = {}
        for o in obs:
            by_key.setdefault(o[1:4], []).append(o)
        for (topic, part, epoch), items in by_key.items():
            done = sorted(items, key=lambda o: o[0].completed)
            for b in sorted(items, key=lambda o: o[0].invoked):
                earlier = [a for a in done if a[0].completed < b[0].invoked and self._same_life(a[0], b[0], resets)]
                if not earlier:
                    continue
                a = max(earlier, key=lambda o: o[4])
                if b[4] < a[4]:
                    broker = b[0].value.get("broker")
                    leader = epochs.leader_of_epoch(broker, topic, part, epoch)
                    is_leader = None if leader is None else leader == as_int(broker, -2)
                    kind = verdict(lambda p: kip392.hwm_may_go_back(is_leader, p), profile)
                    out += _anomaly(kind, "hwm-regression", a[0].indices + b[0].indices,
                                    f"broker {broker} reported HWM {b[4]} for {topic}/{part} in leader "
                                    f"epoch {epoch} after it had reported {a[4]}"
                                    + (f" (a follower of {leader})" if is_leader is False else ""),
                                    topic=topic, partition=part, leader_epoch=epoch, before=a[4], after=b[4])
        return out

    def _uncapped(self, caps, obs, resets, profile) -> list[Anomaly]:
        out = []
        for c in caps:
            later = [o for o in obs if o[1:4] == c[1:4] and o[0].invoked > c[0].completed
                     and self._same_life(c[0], o[0], resets) and o[4] < c[4]]
            if not later:
                continue
            proof = min(later, key=lambda o: o[4])
            kind = verdict(lambda p: p.allows(profiles.OFFSETS_FOR_LEADER_EPOCH_UNCAPPED), profile)
            out += _anomaly(kind, "wrong-fetch-error", c[0].indices + proof[0].indices,
                            f"OffsetsForLeaderEpoch told a consumer end offset {c[4]} for {c[1]}/{c[2]} epoch {c[3]}, "
                            f"above the HWM ({proof[4]} even later): KIP-392 caps it at the HWM",
                            end_offset=c[4], later_high_watermark=proof[4])
        return out
