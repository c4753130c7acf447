"""Model-backed rules for raw-protocol fetches (KIP-392 and KIP-227).

* `ConsumerFetchRule`: `uncommitted-read`, `wrong-fetch-error` (KIP-392 cases 1-4).
* `HighWatermarkRule`: `hwm-regression`, and OffsetsForLeaderEpoch answers above the
  HWM (`wrong-fetch-error`).
* `PreferredReplicaRule`: `preferred-replica-violation`.
* `FetchSessionRule`: `fetch-session-violation`.

Each rule builds model state only from what brokers answered and flags only what that
proves; a deviation the chosen profile accepts is reported with known=True.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from reference_model import kip227, kip392, profiles
from reference_model.state import NONE, Replica

from checks.rules.base import Anomaly
from checks.rules.observe import EpochIndex, Op, answered, as_int, broker_ids, partitions_of, proven_epoch, verdict

KIP392_ERRORS = {"NONE", "OFFSET_OUT_OF_RANGE", "OFFSET_NOT_AVAILABLE"}
SESSION_ERRORS = {"FETCH_SESSION_ID_NOT_FOUND", "INVALID_FETCH_SESSION_EPOCH"}
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


class PreferredReplicaRule:
    """KIP-392 "Finding the preferred follower", as far as static facts prove it: a
    preferred read replica (not -1) is only sent to a client with a rack, only when the
    answering leader is not in that rack, must be in the client's rack, and must be an
    assigned replica (per the broker's metadata answers on both sides of the fetch)."""

    anomalies = ("preferred-replica-violation",)

    def group_keys(self, record: dict) -> Iterable[str]:
        v = record.get("value") or {}
        if record.get("f") == "metadata":
            yield f"prr:{v.get('topic')}/{v.get('partition')}"
        elif record.get("f") == "fetch" and _is_consumer(v):
            for e in partitions_of(v):
                yield f"prr:{e.get('topic')}/{e.get('partition')}"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        meta = answered(records, ["metadata"])
        racks: dict[int, str] = {}
        for m in meta:
            for b, r in (m.value.get("racks") or {}).items():
                if r:
                    racks[int(b)] = r
        out = []
        for op in answered(records, ["fetch"]):
            for e in partitions_of(op.value):
                pref = as_int(e.get("preferred_read_replica"), -1)
                if e.get("omitted") or pref < 0:
                    continue
                reason = self._reason(op, e, pref, racks, meta)
                if reason:
                    out.append(Anomaly("preferred-replica-violation", op.indices,
                                       f"broker {op.value.get('broker')} sent preferred read replica {pref} for "
                                       f"{e.get('topic')}/{e.get('partition')}: {reason}",
                                       details={"preferred_read_replica": pref, "client_rack": op.value.get("rack")}))
        return out

    @staticmethod
    def _reason(op: Op, e: dict, pref: int, racks: dict, meta: list[Op]) -> str | None:
        client_rack = op.value.get("rack") or ""
        broker = as_int(op.value.get("broker"))
        if not client_rack:
            return "the client gave no rack, so the selector must return the leader (-1)"
        if pref in racks and racks[pref] != client_rack:
            return f"it is in rack {racks[pref]!r}, not the client's rack {client_rack!r}"
        if broker in racks and racks[broker] == client_rack:
            return "the answering broker is in the client's rack (a leader there is preferred; a follower selects nothing)"
        same = [m for m in meta if m.value.get("broker") == op.value.get("broker")]
        before = [m for m in same if m.completed < op.invoked]
        after = [m for m in same if m.invoked > op.completed]
        if before and after:
            b, a = max(before, key=lambda m: m.completed), min(after, key=lambda m: m.invoked)
            if b.value.get("leader_epoch") == a.value.get("leader_epoch") and all(
                pref not in (m.value.get("replicas") or [pref]) for m in (b, a)
            ):
                return "it is not an assigned replica of the partition"
        return None


class FetchSessionRule:
    """KIP-227 per client and broker: the session id/epoch table, both error codes,
    top-level error semantics, full responses carrying every partition, incremental
    responses carrying only session partitions and not omitting one with data proven
    available (fetch offset below the HWM the session last sent, and no records at all
    in the response)."""

    anomalies = ("fetch-session-violation",)

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") == "fetch":
            yield f"session:{(record.get('value') or {}).get('broker')}:{record.get('process')}"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        sessions: dict[int, dict] = {}  # id -> {"epoch", "parts": {key: {...}}}
        dead: set[int] = set()
        out: list[Anomaly] = []
        for op in answered(records, ["fetch"]):
            out += self._step(op, sessions, dead, profile)
        return out

    def _flag(self, op: Op, message: str, kind: str | None = "anomaly") -> list[Anomaly]:
        return _anomaly(kind, "fetch-session-violation", op.indices, message,
                        session_id=op.value.get("session_id"), session_epoch=op.value.get("session_epoch"))

    def _step(self, op: Op, sessions: dict, dead: set, profile: str) -> list[Anomaly]:
        v = op.value
        sid, epoch = as_int(v.get("session_id"), 0), as_int(v.get("session_epoch"), -1)
        top, rid = v.get("top_error", NONE) or NONE, as_int(v.get("response_session_id"), 0)
        if as_int(v.get("version"), 7) < 7:
            return []
        entries = partitions_of(v)
        out = []
        if top != NONE:
            if any(e.get("records") or e.get("error", top) != top for e in entries):
                out += self._flag(op, f"top-level error {top} but a partition carries records or another error")
        kind = kip227.request_kind(sid, epoch)
        if kind != kip227.INCREMENTAL:
            if sid:
                sessions.pop(sid, None)
                dead.add(sid)
            if top in SESSION_ERRORS:
                out += self._flag(op, f"full request ({sid}/{epoch}) answered {top}")
            if top == NONE and any(e.get("omitted") for e in entries):
                out += self._flag(op, "a full response left out a requested partition")
            if kind in (kip227.SESSIONLESS, kip227.CLOSE) and rid != 0:
                out += self._flag(op, f"request {sid}/{epoch} creates no session, but the response has session id {rid}")
            if kind in (kip227.NEW, kip227.CLOSE_AND_NEW) and top == NONE and rid != 0:
                sessions[rid] = {"epoch": kip227.next_epoch(0), "parts": {}}
                self._absorb(sessions[rid], entries)
            return out
        s = sessions.get(sid)
        if top == "FETCH_SESSION_ID_NOT_FOUND":
            sessions.pop(sid, None)
            dead.add(sid)
            return out + (self._flag(op, f"FETCH_SESSION_ID_NOT_FOUND with response session id {rid}") if rid else [])
        if s is None:
            if sid in dead and top == NONE:
                out += self._flag(op, f"session {sid} was closed or not found earlier, yet an incremental request succeeded")
            return out
        if epoch != s["epoch"]:
            if top == NONE:
                out += self._flag(op, f"epoch {epoch} answered NONE; the session expected {s['epoch']}")
            elif top == "INVALID_FETCH_SESSION_EPOCH" and rid not in (0, sid):
                out += self._flag(op, f"INVALID_FETCH_SESSION_EPOCH with foreign session id {rid}")
            return out
        if top == "INVALID_FETCH_SESSION_EPOCH":
            return out + self._flag(op, f"INVALID_FETCH_SESSION_EPOCH although epoch {epoch} was the expected one")
        if top != NONE:
            return out
        s["epoch"] = kip227.next_epoch(epoch)
        for e in entries:
            if "fetch_offset" in e:
                s["parts"].setdefault((e.get("topic"), e.get("partition")), {})["fetch_offset"] = int(e["fetch_offset"])
        for t, p in v.get("forgotten") or []:
            s["parts"].pop((t, p), None)
        if rid != sid:
            if rid == 0 and not s["parts"]:
                out += self._flag(op, "the session was closed when its last partition was forgotten",
                                  verdict(lambda pr: pr.allows(profiles.EMPTY_SESSION_CLOSED), profile))
            else:
                out += self._flag(op, f"incremental response has session id {rid}, not {sid}")
            sessions.pop(sid, None)
            return out
        present = {(e.get("topic"), e.get("partition")) for e in entries if not e.get("omitted")}
        strangers = present - set(s["parts"])
        if strangers:
            out += self._flag(op, f"incremental response carries partitions outside the session: {sorted(strangers)[:5]}")
        if not any(e.get("records") for e in entries):
            for key, c in s["parts"].items():
                if key in present or "hwm" not in c or "fetch_offset" not in c:
                    continue
                readable_below = c["hwm"] if c.get("lso", -1) < 0 else min(c["hwm"], c["lso"])
                if c["fetch_offset"] < readable_below:
                    local = c.get("max_seen", -1) >= c["fetch_offset"]
                    kind = verdict(lambda pr: not (local or pr.allows(profiles.HWM_CAPPED_AT_LEO)), profile)
                    out += self._flag(op, f"incremental response left out {key[0]}/{key[1]} although committed data "
                                          f"was available at its fetch offset {c['fetch_offset']} (HWM {c['hwm']})",
                                      kind if kind != "known" else None)
        self._absorb(s, entries)
        return out

    @staticmethod
    def _absorb(session: dict, entries: list[dict]) -> None:
        """KIP-227 "Cached data about each partition": remember the fetch offset, and
        the HWM / log start last sent (unknown after an error)."""
        for e in entries:
            key = (e.get("topic"), e.get("partition"))
            c = session["parts"].setdefault(key, {})
            if "fetch_offset" in e:
                c["fetch_offset"] = int(e["fetch_offset"])
            if e.get("omitted"):
                continue
            if e.get("error", NONE) == NONE and as_int(e.get("high_watermark"), -1) >= 0:
                c["hwm"] = int(e["high_watermark"])
                c["lso"] = as_int(e.get("last_stable_offset"), -1)
            else:
                c.pop("hwm", None)
            seen = _offsets(e)
            if seen:
                c["max_seen"] = max(seen + [c.get("max_seen", -1)])
