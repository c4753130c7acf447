"""Mutation operators: each plants one change in a real history at a seeded position.

A violating operator breaks one KIP or contract sentence (`breaks`) and must be named as
`anomaly` at the records it returns as `planted`; a benign one (`anomaly` None) makes a
change a correct Kafka could produce (`breaks` then says why it is legal), and must leave
the verdict valid. An operator returns None when the history holds no position for it.
"""
from __future__ import annotations

import bisect
import copy
import random
from dataclasses import dataclass
from typing import Callable

from kipcheck import effects
from kipcheck.reference_model import kip455

from kipcheck.checks.mutate.history import Edit, History, Mutation, consumer_answers, fetch_entries, tp_of
from kipcheck.checks.rules.observe import as_int
from kipcheck.checks.rules.reassignment_rules import replay
from kipcheck.checks.rules.timestamp_rules import BY_TIME_TOLERANCE_MS
from kipcheck.checks.rules.txn_rules import CLEANUP_INTERVAL_NS

#: a broker id no kipcheck cluster has (the preferred replica "no replica at all")
UNKNOWN_BROKER = 99
#: a LogAppendTime stamp moved this far ahead: beyond every skew a clock fault applies
STAMP_AHEAD_MS = 3_600_000
#: how late one broker sees every metadata change: well past KIP-1166's bound
PROPAGATION_LATE_NS = 30_000_000_000
#: a follower's HWM trails its leader's by at most a fetch round (`replica.fetch.wait.max.ms`, 500 ms)
FETCH_WAIT_NS = 500_000_000
#: KIP-1166's parking window W: how long a broker may stay parked before it learns a change
PARKING_WINDOW_NS = 500_000_000


@dataclass(frozen=True)
class Operator:
    name: str
    anomaly: str | None  # None: benign
    breaks: str
    plant: Callable[[History, random.Random], Mutation | None]


OPERATORS: dict[str, Operator] = {}


def operator(name: str, anomaly: str | None, breaks: str):
    def register(fn):
        OPERATORS[name] = Operator(name, anomaly, breaks, fn)
        return fn
    return register


def _pick(rng: random.Random, candidates: list):
    return rng.choice(candidates) if candidates else None


def _drop_poll_record(r: dict, k: int) -> None:
    """Remove record k of a poll value, with its stamp."""
    v = r["value"]
    del v["records"][k]
    if isinstance(v.get("append_ms"), list) and len(v["append_ms"]) > k:
        del v["append_ms"][k]


# -- the history contract (checks/rules/history_rules.py) -----------------------------------

@operator("acked-record-never-read", "lost-write",
          "an acknowledged send at offset k that no read returned, although reads returned offsets past k")
def _lost_write(h: History, rng: random.Random):
    seen = h.read_values()
    top = {}
    for t, p, o in seen:
        top[(t, p)] = max(o, top.get((t, p), -1))
    acked = h.acked(transactional=False)  # a transaction's records: torn-transaction's
    key = _pick(rng, sorted(k for k in acked if k in seen and top[k[:2]] > k[2]))
    if key is None:
        return None
    e = Edit(h)
    for r in h.records:
        if r["type"] != "ok":
            continue
        if r["f"] == "poll":
            hits = [i for i, rec in enumerate(r["value"].get("records") or []) if tuple(rec[:3]) == key]
            for i in reversed(hits):
                _drop_poll_record(e.take(r["index"]), i)
        elif r["f"] == "fetch" and any(tp_of(x) == key[:2] and any(rec[0] == key[2] for rec in x.get("records") or [])
                                       for x in fetch_entries(r["value"])):
            for x in fetch_entries(e.take(r["index"])["value"]):
                if tp_of(x) == key[:2] and x.get("records"):
                    x["records"] = [rec for rec in x["records"] if rec[0] != key[2]]
    return e.done("acked-record-never-read", h.proof(acked[key]), f"{key} dropped from every read")


def _polls_with_records(h: History, least: int = 1) -> list:
    return [r for r in h.ok("poll") if len(r["value"].get("records") or []) >= least]


@operator("value-at-two-offsets", "duplicate", "one sent value appears at more than one offset")
def _duplicate(h: History, rng: random.Random):
    polls = _polls_with_records(h, 2)
    r = _pick(rng, polls)
    if r is None:
        return None
    recs = r["value"]["records"]
    pairs = [(i, j) for i in range(len(recs) - 1) for j in (i + 1,) if recs[i][:2] == recs[j][:2]]
    if not pairs:
        return None
    i, j = rng.choice(pairs)
    e = Edit(h)
    e.take(r["index"])["value"]["records"][j][3] = recs[i][3]
    return e.done("value-at-two-offsets", h.proof(r["index"]), f"value {recs[i][3]!r} also at offset {recs[j][2]}")


@operator("other-value-at-offset", "inconsistent-offset", "two different values observed at one offset")
def _inconsistent(h: History, rng: random.Random):
    r = _pick(rng, _polls_with_records(h))
    if r is None:
        return None
    k = rng.randrange(len(r["value"]["records"]))
    e = Edit(h)
    rec = e.take(r["index"])["value"]["records"][k]
    rec[3] = f"{rec[3]}~mutated"
    return e.done("other-value-at-offset", h.proof(r["index"]), f"value at {rec[:3]} changed")


def _consecutive_polls(h: History) -> list:
    """(earlier poll, later poll) of one consumer with no other operation of it between."""
    last, out = {}, []
    for r in h.records:
        p = r.get("process")
        if r["f"] != "poll":
            if r["type"] != "invoke" or r["f"] != "send":
                last.pop(p, None)
            continue
        if r["type"] != "ok":
            if r["type"] != "invoke":
                last.pop(p, None)
            continue
        if r["value"].get("records"):
            if p in last:
                out.append((last[p], r))
            last[p] = r
    return out


@operator("poll-goes-back", "nonmonotonic-poll", "a consumer's offsets went backwards without an assign, seek or rebalance")
def _nonmonotonic(h: History, rng: random.Random):
    cands = []
    for a, b in _consecutive_polls(h):
        lasts = {}
        for rec in a["value"]["records"]:
            lasts[tuple(rec[:2])] = rec
        for rec in b["value"]["records"]:
            if tuple(rec[:2]) in lasts:
                cands.append((a, b, lasts[tuple(rec[:2])]))
                break
    pick = _pick(rng, cands)
    if pick is None:
        return None
    a, b, rec = pick
    e = Edit(h)
    v = e.take(b["index"])["value"]
    v["records"].insert(0, list(rec))
    if isinstance(v.get("append_ms"), list):
        ams = a["value"].get("append_ms") or []
        v["append_ms"].insert(0, ams[a["value"]["records"].index(rec)] if ams else v["append_ms"][0])
    return e.done("poll-goes-back", h.proof(b["index"]), f"{rec[:3]} read again after {a['index']}")


@operator("offset-skipped-in-poll", "poll-skip", "a consumer skipped offsets that exist in the log")
def _poll_skip(h: History, rng: random.Random):
    cands = []
    for r in _polls_with_records(h, 3):
        recs = r["value"]["records"]
        cands += [(r, k) for k in range(1, len(recs) - 1)
                  if recs[k - 1][:2] == recs[k + 1][:2] and recs[k - 1][2] + 2 == recs[k + 1][2]]
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, k = pick
    e = Edit(h)
    _drop_poll_record(e.take(r["index"]), k)
    return e.done("offset-skipped-in-poll", h.proof(r["index"]), f"{r['value']['records'][k][:3]} skipped")


# -- KIP-392 ------------------------------------------------------------------------------

@operator("record-returned-at-hwm", "uncommitted-read",
          "KIP-392: a replica returns only committed records, those below its high watermark")
def _uncommitted(h: History, rng: random.Random):
    seen = h.read_values()
    cands = []
    for r, x in consumer_answers(h):
        hw, recs = as_int(x.get("high_watermark"), -1), x.get("records") or []
        if x.get("error", "NONE") == "NONE" and hw >= 0 and (x["topic"], x["partition"], hw) in seen \
                and (recs[-1][0] == hw - 1 if recs else as_int(x.get("fetch_offset")) == hw):
            cands.append((r, x))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, x = pick
    hw = x["high_watermark"]
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            y["records"] = [*(y.get("records") or []), [hw, seen[(x["topic"], x["partition"], hw)]]]
    return e.done("record-returned-at-hwm", h.proof(r["index"]), f"record {hw} returned at HWM {hw}")


@operator("poll-returns-unwritten-record", "uncommitted-read",
          "KIP-392: a consumer reads only committed records; this one was sent after the poll ended")
def _poll_future(h: History, rng: random.Random):
    seen = h.read_values()
    sends = {(v["topic"], v["partition"], v["offset"]): h.invoke_of.get(r["index"], r["index"])
             for r in h.ok("send") if as_int((v := r["value"]).get("offset")) is not None}
    cands = []
    for r in _polls_with_records(h):
        last = r["value"]["records"][-1]
        nxt = (last[0], last[1], last[2] + 1)
        if nxt in seen and nxt in sends and sends[nxt] > r["index"]:
            cands.append((r, nxt))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, nxt = pick
    e = Edit(h)
    v = e.take(r["index"])["value"]
    v["records"].append([*nxt, seen[nxt]])
    if isinstance(v.get("append_ms"), list) and v["append_ms"]:
        v["append_ms"].append(v["append_ms"][-1])
    return e.done("poll-returns-unwritten-record", h.proof(r["index"]), f"{nxt} read before its send")


def _same_epoch_pairs(h: History) -> list:
    """(earlier, later) consumer answers of one broker, partition and leader epoch, no fault
    between them, the later one's HWM at least the earlier's."""
    last, out = {}, []
    for r in h.records:
        if r["f"] == "fault":
            last.clear()
            continue
        if r["f"] != "fetch" or r["type"] != "ok" or as_int(r["value"].get("replica_id"), -1) >= 0:
            continue
        v = r["value"]
        if v.get("top_error", "NONE") != "NONE":
            continue
        for x in fetch_entries(v):
            hw = as_int(x.get("high_watermark"), -1)
            if x.get("omitted") or x.get("error", "NONE") != "NONE" or hw < 0:
                continue
            k = (v.get("broker"), tp_of(x), v.get("current_leader_epoch"))
            if k in last and last[k][1] >= 2 and hw >= last[k][1] and as_int(v.get("current_leader_epoch"), -1) >= 0:
                out.append((last[k], r, x))
            last[k] = (r, hw)
    return out


@operator("hwm-lowered-in-one-answer", "hwm-regression",
          "KIP-392: a broker's high watermark never goes back within one leader epoch")
def _hwm_lowered(h: History, rng: random.Random):
    pick = _pick(rng, _same_epoch_pairs(h))
    if pick is None:
        return None
    (a, hw_a), r, x = pick
    low = hw_a - 2
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            y["high_watermark"] = low
            y["last_stable_offset"] = min(as_int(y.get("last_stable_offset"), low), low)
            y["records"] = [rec for rec in y.get("records") or [] if rec[0] < low]
    return e.done("hwm-lowered-in-one-answer", h.proof(r["index"]), f"HWM {low} after {hw_a} at {a['index']}")


@operator("in-range-fetch-answered-out-of-range", "wrong-fetch-error",
          "KIP-392: a fetch at an offset between log start and the high watermark returns records, not OFFSET_OUT_OF_RANGE")
def _in_range_oor(h: History, rng: random.Random):
    cands = [(r, x) for r, x in consumer_answers(h) if x.get("error", "NONE") == "NONE" and x.get("records")
             and as_int(x.get("log_start_offset"), -1) >= 0
             and as_int(x["log_start_offset"]) <= as_int(x.get("fetch_offset"), -1) < as_int(x.get("high_watermark"), -1)]
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, x = pick
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            y["error"], y["records"] = "OFFSET_OUT_OF_RANGE", []
    return e.done("in-range-fetch-answered-out-of-range", h.proof(r["index"]), f"fetch at {x['fetch_offset']}")


@operator("preferred-replica-not-a-replica", "preferred-replica-violation",
          "KIP-392: the preferred read replica is one of the partition's in-sync replicas")
def _prr_unknown(h: History, rng: random.Random):
    cands = [(r, x) for r, x in consumer_answers(h) if x.get("error", "NONE") == "NONE" and r["value"].get("rack")]
    return _set_preferred(h, rng, cands, lambda r, x: UNKNOWN_BROKER, "preferred-replica-not-a-replica")


def _set_preferred(h, rng, cands, choose, name):
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, x = pick
    pref = choose(r, x)
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            y["preferred_read_replica"], y["records"] = pref, []
    return e.done(name, h.proof(r["index"]), f"preferred read replica {pref} at {r['index']}")


def _racks(h: History) -> dict:
    racks = {}
    for r in h.ok("metadata"):
        racks.update({int(b): rack for b, rack in (r["value"].get("racks") or {}).items() if rack})
    return racks


@operator("preferred-replica-in-other-rack", "preferred-replica-violation",
          "KIP-392 (RackAwareReplicaSelector): a replica in the client's rack is preferred when one is in sync")
def _prr_other_rack(h: History, rng: random.Random):
    racks = _racks(h)
    cands = []
    for r, x in consumer_answers(h):
        pref, rack, broker = as_int(x.get("preferred_read_replica"), -1), r["value"].get("rack"), r["value"].get("broker")
        if pref >= 0 and pref != broker and racks.get(pref) == rack:
            others = sorted(b for b in racks if racks[b] != rack and b != broker)
            if others:
                cands.append((r, x, others))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    return _set_preferred(h, rng, [pick[:2]], lambda r, x: rng.choice(pick[2]), "preferred-replica-in-other-rack")


#: a killed broker is fenced once its session expires (`broker.session.timeout.ms`, 9 s in
#: kipcheck's clusters); after this long every broker's metadata shows it offline
FENCED_AFTER_NS = 12_000_000_000


@operator("preferred-replica-killed", "preferred-replica-violation",
          "KIP-392: the preferred read replica is in sync; a killed, fenced broker is not")
def _prr_killed(h: History, rng: random.Random):
    replicas = {}
    for m in h.ok("metadata"):
        v = m["value"]
        replicas.setdefault((v.get("topic"), v.get("partition")), set()).update(v.get("replicas") or [])
    kills, cands = {}, []
    for r in h.records:
        v = r.get("value") or {}
        stops = effects.has(r, effects.STOPS_NODE)  # its node down from the start's completion to the stop
        if r["f"] == "fault" and r["type"] != "invoke" and (stops or v.get("fault") == "heal-all"):
            for b in v.get("targets") or []:
                if v.get("phase") == "start" and stops:
                    kills[b] = r["time"]
                else:
                    kills.pop(b, None)
            if v.get("fault") == "heal-all":
                kills.clear()
        elif r["f"] == "fetch" and r["type"] == "ok" and v.get("rack") and as_int(v.get("replica_id"), -1) < 0 \
                and v.get("top_error", "NONE") == "NONE":
            dead = [b for b, t in kills.items() if h.records[h.invoke_of[r["index"]]]["time"] - t > FENCED_AFTER_NS]
            for x in fetch_entries(v):
                if x.get("error", "NONE") == "NONE" and not x.get("omitted"):
                    cands += [(r, x, b) for b in dead if b in replicas.get(tp_of(x), ()) and b != v.get("broker")]
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, x, b = pick
    return _set_preferred(h, rng, [(r, x)], lambda *_: b, "preferred-replica-killed")


# -- KIP-227 ------------------------------------------------------------------------------

def _sessions_sent_hwm(h: History) -> list:
    """(answer, entry) of each incremental consumer answer's partition that returned records at a
    fetch offset below the HWM its session last sent for that partition (the session itself
    proves committed data there). Elsewhere the returned records are the only proof of new data,
    and with them gone a correct Kafka may have answered the same: its HWM reached the data just
    after the read, so that change would plant nothing a history shows."""
    sent: dict = {}  # (broker, process, session id) -> {partition: HWM last sent}
    out = []
    for r in h.ok("fetch"):
        v = r["value"]
        if v.get("top_error", "NONE") != "NONE" or as_int(v.get("replica_id"), -1) >= 0:
            continue
        incremental = as_int(v.get("session_epoch"), 0) > 0
        key = (v.get("broker"), r.get("process"), as_int(v.get("session_id" if incremental else "response_session_id"), 0))
        if not incremental:
            sent[key] = {}
        last = sent.setdefault(key, {})
        for x in fetch_entries(v):
            if x.get("omitted") or x.get("error", "NONE") != "NONE":
                continue
            if x.get("records") and incremental and last.get(tp_of(x), -1) > as_int(x.get("fetch_offset"), 1 << 62):
                out.append((r, x))
            if as_int(x.get("high_watermark")) is not None:
                last[tp_of(x)] = as_int(x.get("high_watermark"))
    return out


@operator("incremental-response-omits-new-data", "fetch-session-violation",
          "KIP-227: an incremental response includes every partition with new data or a changed high watermark")
def _session_omit(h: History, rng: random.Random):
    pick = _pick(rng, _sessions_sent_hwm(h))
    if pick is None:
        return None
    r, x = pick
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            for k in ("error", "high_watermark", "last_stable_offset", "log_start_offset", "preferred_read_replica", "records"):
                y.pop(k, None)
            y["omitted"] = True
    return e.done("incremental-response-omits-new-data", h.proof(r["index"]), f"{tp_of(x)} omitted")


def _session_requests(h: History) -> list:
    """Incremental requests answered without error, each with the session's previous epoch."""
    prev, out = {}, []
    for r in h.ok("fetch"):
        v = r["value"]
        sid, epoch = as_int(v.get("session_id"), 0), as_int(v.get("session_epoch"), 0)
        if sid and epoch > 0 and v.get("top_error", "NONE") == "NONE":
            k = (v.get("broker"), r.get("process"), sid)
            if prev.get(k) == epoch - 1 and epoch > 1:
                out.append(r)
            prev[k] = epoch
    return out


def _set_epoch(h, rng, delta: int, name: str):
    r = _pick(rng, _session_requests(h))
    if r is None:
        return None
    e = Edit(h)
    epoch = r["value"]["session_epoch"] + delta
    for i in h.proof(r["index"]):
        e.take(i)["value"]["session_epoch"] = epoch
    return e.done(name, h.proof(r["index"]), f"session epoch {epoch} answered NONE")


@operator("session-epoch-skipped", "fetch-session-violation",
          "KIP-227: a request whose epoch is not the session's next gets INVALID_FETCH_SESSION_EPOCH")
def _epoch_skipped(h: History, rng: random.Random):
    return _set_epoch(h, rng, 1, "session-epoch-skipped")


@operator("session-epoch-reused", "fetch-session-violation",
          "KIP-227: a request repeating the session's last epoch gets INVALID_FETCH_SESSION_EPOCH")
def _epoch_reused(h: History, rng: random.Random):
    return _set_epoch(h, rng, -1, "session-epoch-reused")


# -- KIP-932 share sessions (checks/rules/share_session_rules.py) ----------------------------

_SHARE_REQUESTS = ("share_fetch", "share_acknowledge")


def _share_answers(h: History, answer: str, f: str | None = None) -> list:
    """The prober's answered share-session requests (of `f`, else both kinds) answered `answer`."""
    return [r for g in ((f,) if f else _SHARE_REQUESTS) for r in h.ok(g) if r["value"].get("top_error") == answer]


def _share_answered(h: History, rng: random.Random, candidates: list, name: str, note: str):
    r = _pick(rng, sorted(candidates, key=lambda r: r["index"]))
    if r is None:
        return None
    e = Edit(h)
    e.take(r["index"])["value"]["top_error"] = "NONE"
    return e.done(name, h.proof(r["index"]), f"{r['f']} epoch {r['value'].get('session_epoch')} {note}")


@operator("share-wrong-epoch-accepted", "share-session-violation",
          "KIP-932: a ShareFetch or ShareAcknowledge whose epoch is not the session's next gets "
          "INVALID_SHARE_SESSION_EPOCH")
def _share_wrong_epoch(h: History, rng: random.Random):
    return _share_answered(h, rng, [r for r in _share_answers(h, "INVALID_SHARE_SESSION_EPOCH")
                                    if as_int(r["value"].get("session_epoch"), 0) != 0],
                           "share-wrong-epoch-accepted", "answered NONE, not INVALID_SHARE_SESSION_EPOCH")


@operator("share-acknowledge-opens-session", "share-session-violation",
          "KIP-932: a ShareAcknowledge of epoch 0 cannot open a share session: INVALID_SHARE_SESSION_EPOCH")
def _share_ack_opens(h: History, rng: random.Random):
    return _share_answered(h, rng, [r for r in _share_answers(h, "INVALID_SHARE_SESSION_EPOCH", "share_acknowledge")
                                    if as_int(r["value"].get("session_epoch")) == 0],
                           "share-acknowledge-opens-session", "answered NONE: an acknowledgement opened a session")


@operator("share-closed-session-continued", "share-session-violation",
          "KIP-932: after a close (epoch -1) the member has no share session: SHARE_SESSION_NOT_FOUND")
def _share_closed_continued(h: History, rng: random.Random):
    return _share_answered(h, rng, _share_answers(h, "SHARE_SESSION_NOT_FOUND"), "share-closed-session-continued",
                           "answered NONE for a session that was gone")


@operator("share-session-lost-on-its-connection", "share-session-violation",
          "Kafka 4.3.1 drops a live share session only with the connection that opened it or its broker's cache (it "
          "never evicts): a continuation on the opening connection, no fault since, gets no SHARE_SESSION_NOT_FOUND")
def _share_lost_on_its_connection(h: History, rng: random.Random):
    r = _pick(rng, sorted((r for r in _share_answers(h, "NONE") if as_int(r["value"].get("session_epoch"), 0) > 0),
                          key=lambda r: r["index"]))
    if r is None:
        return None
    e = Edit(h)
    v = e.take(r["index"])["value"]
    v["top_error"] = "SHARE_SESSION_NOT_FOUND"
    v.update({"partitions": []} if r["f"] == "share_fetch" else {"partition_errors": {}})
    return e.done("share-session-lost-on-its-connection", h.proof(r["index"]),
                  f"{r['f']} epoch {v.get('session_epoch')} answered SHARE_SESSION_NOT_FOUND on its session's connection")


@operator("share-session-dropped-unseen", None,
          "a share-partition leader drops a share session when the connection that opened it closes (Kafka "
          "4.3.1's cache never evicts one): every later request of it, up to the member's next open, goes on a "
          "new connection and is answered SHARE_SESSION_NOT_FOUND")
def _share_dropped(h: History, rng: random.Random):
    def member(r):
        return (r["value"].get("broker"), r["value"].get("group"), r["value"].get("member_id"))
    requests = sorted((r for f in _SHARE_REQUESTS for r in h.ok(f)), key=lambda r: r["index"])
    r = _pick(rng, [r for r in requests if r["value"].get("top_error") == "NONE"
                    and as_int(r["value"].get("session_epoch"), 0) > 0])
    if r is None:
        return None
    e, changed = Edit(h), []
    reconnected = 1 + max((as_int(r["value"].get("connection"), 0) for r in requests), default=0)
    for later in requests:
        if later["index"] < r["index"] or member(later) != member(r):
            continue
        if later["index"] > r["index"] and as_int(later["value"].get("session_epoch")) == 0:
            if later["f"] == "share_fetch":
                break  # the member opens a new session
            continue  # an acknowledgement of epoch 0 is refused either way
        for i in (later["index"], h.invoke_of.get(later["index"])):
            if i is not None:
                e.take(i)["value"]["connection"] = reconnected
        v = e.take(later["index"])["value"]
        v["top_error"] = "SHARE_SESSION_NOT_FOUND"
        v.update({"partitions": []} if later["f"] == "share_fetch" else {"partition_errors": {}})
        changed.append(later["index"])
    return e.done("share-session-dropped-unseen", (), f"session dropped before {r['index']}: {len(changed)} answers")


# -- KIP-98 / KIP-32 / KIP-966 / KIP-1166 ----------------------------------------------------

@operator("lso-above-later-hwm", "lso-violation",
          "KIP-98: the last stable offset never exceeds the high watermark (under a release profile: not even the "
          "broker's next one in the epoch, which bounds when the LSO was sampled)")
def _lso_above(h: History, rng: random.Random):
    pick = _pick(rng, [(a, r) for (a, _), r, _ in _same_epoch_pairs(h)])
    if pick is None:
        return None
    a, r = pick
    later = {tp_of(x): x["high_watermark"] for x in fetch_entries(r["value"]) if "high_watermark" in x}
    e = Edit(h)
    for y in fetch_entries(e.take(a["index"])["value"]):
        if tp_of(y) in later and as_int(y.get("high_watermark"), -1) >= 0:
            y["last_stable_offset"] = later[tp_of(y)] + 1
    return e.done("lso-above-later-hwm", h.proof(a["index"]), f"LSO past {r['index']}'s HWM")


@operator("append-stamp-moved-ahead", "append-time-violation",
          "KIP-32: a LogAppendTime stamp is the leader's clock while it appended the record")
def _stamp_moved(h: History, rng: random.Random):
    r = _pick(rng, [r for r in _polls_with_records(h) if isinstance(r["value"].get("append_ms"), list)
                    and len(r["value"]["append_ms"]) == len(r["value"]["records"])])
    if r is None:
        return None
    k = rng.randrange(len(r["value"]["records"]))
    e = Edit(h)
    e.take(r["index"])["value"]["append_ms"][k] += STAMP_AHEAD_MS
    return e.done("append-stamp-moved-ahead", h.proof(r["index"]), f"stamp of {r['value']['records'][k][:3]} +1 h")


@operator("time-offset-one-past", "time-offset-violation",
          "KIP-79: ListOffsets by time answers the first offset stamped at or after the time")
def _time_offset(h: History, rng: random.Random):
    stamps = {}  # (topic, partition, offset) -> the broker's Unix ms stamp, as consumers read it
    for r in _polls_with_records(h):
        v = r["value"]
        if isinstance(v.get("append_ms"), list) and isinstance(v.get("wall_minus_history_ms"), int):
            for rec, ms in zip(v["records"], v["append_ms"]):
                stamps[tuple(rec[:3])] = ms + v["wall_minus_history_ms"]
    # only where the record the answer names is stamped past the rule's tolerance after the
    # target: an answer one further then provably skips a record stamped at or after it
    cands = [r for r in h.ok("list_offsets") if as_int((v := r["value"]).get("timestamp"), -1) >= 0
             and v.get("error", "NONE") == "NONE" and as_int(v.get("offset"), -1) >= 0
             and stamps.get((v["topic"], v["partition"], v["offset"]), -1) >= v["timestamp"] + BY_TIME_TOLERANCE_MS]
    r = _pick(rng, cands)
    if r is None:
        return None
    e = Edit(h)
    e.take(r["index"])["value"]["offset"] += 1
    return e.done("time-offset-one-past", h.proof(r["index"]), f"offset {r['value']['offset'] + 1}")


@operator("leader-outside-isr-and-elr", "ineligible-leader",
          "KIP-966: a clean election picks a leader from the ISR or the ELR")
def _ineligible(h: History, rng: random.Random):
    cands = [r for r in h.ok("partition_change") if r["value"].get("kind") != "create"
             and as_int(r["value"].get("leader"), -1) >= 0]
    r = _pick(rng, cands)
    if r is None:
        return None
    e = Edit(h)
    e.take(r["index"])["value"]["leader"] = UNKNOWN_BROKER
    return e.done("leader-outside-isr-and-elr", (r["index"],), f"leader {UNKNOWN_BROKER}")


@operator("every-change-seen-late", "hwm-propagation-delay",
          "KIP-1166: every broker sees a committed metadata change within the bound")
def _propagation(h: History, rng: random.Random):
    probes = [r for r in h.ok("metadata_propagation") if r["value"].get("seen_by")]
    if not probes:
        return None
    broker = rng.choice(sorted({b for r in probes for b in r["value"]["seen_by"]}))
    e = Edit(h)
    for r in probes:
        v = e.take(r["index"])["value"]
        if v["seen_by"].get(broker) is not None:  # it answered without the change until just before
            v["seen_by"][broker] += PROPAGATION_LATE_NS
            v.setdefault("unseen_until", {})[broker] = v["seen_by"][broker] - 1_000_000
    return e.done("every-change-seen-late", [r["index"] for r in probes], f"broker {broker} 30 s late")


# -- benign: what a correct Kafka (or the recorder) may produce ----------------------------

@operator("completions-swapped", None,
          "two operations both in flight may complete in either order (each keeps its slot's time)")
def _swap(h: History, rng: random.Random):
    recs = h.records
    cands = [i for i in range(len(recs) - 1) if recs[i]["type"] != "invoke" and recs[i + 1]["type"] != "invoke"
             and recs[i].get("process") != recs[i + 1].get("process")
             and recs[i]["f"] not in ("fault",) and recs[i + 1]["f"] not in ("fault",)
             and recs[i]["index"] in h.invoke_of and recs[i + 1]["index"] in h.invoke_of]
    i = _pick(rng, cands)
    if i is None:
        return None
    e = Edit(h)
    a, b = dict(recs[i]), dict(recs[i + 1])
    a["index"], a["time"], b["index"], b["time"] = recs[i + 1]["index"], recs[i + 1]["time"], recs[i]["index"], recs[i]["time"]
    e.records[i], e.records[i + 1] = b, a
    return e.done("completions-swapped", (), f"{i} and {i + 1} swapped")


@operator("poll-split-in-two", None, "a consumer may return one fetch's records over two polls")
def _split(h: History, rng: random.Random):
    r = _pick(rng, _polls_with_records(h, 2))
    if r is None:
        return None
    k = rng.randrange(1, len(r["value"]["records"]))
    e = Edit(h)
    first = e.take(r["index"])
    second = {**first, "value": {**first["value"]}}
    second["value"]["records"] = first["value"]["records"][k:]
    first["value"]["records"] = first["value"]["records"][:k]
    if isinstance(first["value"].get("append_ms"), list):
        ams = first["value"]["append_ms"]
        first["value"]["append_ms"], second["value"]["append_ms"] = ams[:k], ams[k:]
    invoke = {k2: v for k2, v in h.records[h.invoke_of[r["index"]]].items()}
    invoke = {**invoke, "time": r["time"], "value": dict(invoke["value"])}
    e.insert_after(r["index"], [invoke, second])
    return e.done("poll-split-in-two", (), f"poll {r['index']} split after {k} records")


@operator("metadata-answer-a-parking-window-stale", None,
          "KIP-1166: a broker may learn a committed metadata change up to one parked KRaft FETCH (500 ms) after "
          "another broker showed it: until then it answers its previous state")
def _stale_metadata(h: History, rng: random.Random):
    def state(v):
        return tuple(str(v.get(k)) for k in ("leader", "leader_epoch", "isr", "replicas", "offline", "error"))

    previous, first_seen, cands = {}, {}, []
    for r in h.ok("metadata"):
        v = r["value"]
        k = (v.get("broker"), v.get("topic"), v.get("partition"))
        now = (v.get("topic"), v.get("partition"), state(v))
        first_seen.setdefault(now, r["time"])
        old = previous.get(k)
        previous[k] = r
        if old is not None and state(old["value"]) != state(v) \
                and h.records[h.invoke_of[r["index"]]]["time"] - first_seen[now] < PARKING_WINDOW_NS:
            cands.append((old, r))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    old, r = pick
    e = Edit(h)
    v = e.take(r["index"])["value"]
    v.update({k: old["value"].get(k) for k in ("leader", "leader_epoch", "isr", "replicas", "offline", "error")})
    return e.done("metadata-answer-a-parking-window-stale", (), f"metadata {r['index']} as {old['index']}")


@operator("follower-hwm-lags", None,
          "a follower learns the leader's high watermark a fetch later: its answer may show the HWM it had before")
def _follower_lag(h: History, rng: random.Random):
    leaders = {(m["value"].get("topic"), m["value"].get("partition"), m["value"].get("leader_epoch")): m["value"].get("leader")
               for m in h.ok("metadata")}
    reported: dict = {}  # (broker, topic, partition) -> [(completion index, HWM)] of every fetch answer
    for r in h.ok("fetch"):
        for y in fetch_entries(r["value"]):
            if as_int(y.get("high_watermark"), -1) >= 0 and y.get("error", "NONE") == "NONE":
                reported.setdefault((r["value"].get("broker"), *tp_of(y)), []).append((r["index"], y["high_watermark"]))
    cands = []
    for (a, hw_a), r, x in _same_epoch_pairs(h):
        # not below what it returned, nor at or below the fetch offset (then KIP-392 case 1 applies),
        # nor below any HWM the broker had answered before the request (the HWM it had then)
        before = [hw for i, hw in reported.get((r["value"].get("broker"), *tp_of(x)), ()) if i < h.invoke_of[r["index"]]]
        low = max(hw_a, as_int(x.get("fetch_offset"), 0) + 1, *(rec[0] + 1 for rec in x.get("records") or [(-1,)]),
                  *before)
        leader = leaders.get((*tp_of(x), r["value"].get("current_leader_epoch")))
        if low < x["high_watermark"] and leader is not None and r["value"].get("broker") != leader \
                and h.records[h.invoke_of[r["index"]]]["time"] - a["time"] < FETCH_WAIT_NS:
            cands.append((r, x, low))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    r, x, low = pick
    e = Edit(h)
    for y in fetch_entries(e.take(r["index"])["value"]):
        if tp_of(y) == tp_of(x):
            y["high_watermark"] = low
            y["last_stable_offset"] = min(as_int(y.get("last_stable_offset"), low), low)
    return e.done("follower-hwm-lags", (), f"follower HWM {low} for {x['high_watermark']}")



# -- KIP-98 transactions (checks/rules/txn_rules.py) ---------------------------------------

def _transactions(h: History) -> dict:
    """txn id -> {"records": [(topic, partition, offset, value, send's ok index)], "commit": ok index or
    None, "commit_invoked": time or None, "abort": ok index or None}"""
    out = {}
    for r in h.records:
        v = r.get("value") or {}
        txn = v.get("txn")
        if txn is None:
            continue
        t = out.setdefault(txn, {"records": [], "commit": None, "commit_invoked": None, "abort": None})
        if r["f"] == "send" and r["type"] == "ok" and as_int(v.get("offset")) is not None:
            t["records"].append((v["topic"], v["partition"], v["offset"], v["value"], r["index"]))
        elif r["f"] == "txn-commit":
            if r["type"] == "invoke" and t["commit_invoked"] is None:
                t["commit_invoked"] = r["time"]
            elif r["type"] == "ok":
                t["commit"] = r["index"]
        elif r["f"] == "txn-abort" and r["type"] == "ok":
            t["abort"] = r["index"]
    return out


def _committed_polls(h: History) -> list:
    return [r for r in h.ok("poll") if r["value"].get("isolation") == "read_committed"]


def _add_to_poll(h: History, poll: dict, rec: tuple, name: str, planted, note: str) -> Mutation:
    e = Edit(h)
    v = e.take(poll["index"])["value"]
    v["records"] = [*(v.get("records") or []), list(rec[:4])]
    if isinstance(v.get("append_ms"), list):
        v["append_ms"].append(v["append_ms"][-1] if v["append_ms"] else poll["time"] // 1_000_000)
    return e.done(name, planted, note)


@operator("read-committed-returns-aborted", "aborted-read",
          "KIP-98: a read_committed consumer never returns a record of an aborted transaction")
def _aborted_read(h: History, rng: random.Random):
    txns = _transactions(h)
    aborted = [rec for t in txns.values() if t["abort"] is not None and t["commit"] is None for rec in t["records"]]
    rec = _pick(rng, aborted)
    if rec is None:
        return None
    polls = [r for r in _committed_polls(h) if r["index"] > rec[4]]
    return _read_in_some_poll(h, rng, polls, rec, "read-committed-returns-aborted", f"{rec[:3]} read")


@operator("read-committed-returns-before-commit", "precommitted-read",
          "KIP-98: a read_committed consumer returns a transaction's records only once it commits")
def _precommitted_read(h: History, rng: random.Random):
    txns = _transactions(h)
    cands = []
    polls = _committed_polls(h)
    times = [r["time"] for r in polls]
    for t in txns.values():
        if t["commit"] is None or t["commit_invoked"] is None:
            continue
        for rec in t["records"]:
            sent = h.records[h.invoke_of.get(rec[4], rec[4])]["time"]
            if bisect.bisect_left(times, t["commit_invoked"]) > bisect.bisect_right(times, sent):
                cands.append((rec, t["commit_invoked"]))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    rec, invoked = pick
    sent = h.invoke_of.get(rec[4], rec[4])  # read after its send was called, before its commit was
    polls = [r for r in _committed_polls(h) if r["index"] > sent and r["time"] < invoked]
    return _read_in_some_poll(h, rng, polls, rec, "read-committed-returns-before-commit", f"{rec[:3]} read early")


def _read_in_some_poll(h: History, rng: random.Random, polls: list, rec, name: str, note: str):
    """`rec` added to one of `polls` (drawn), the proof that poll (None: no poll to add it to)."""
    poll = _pick(rng, polls)
    if poll is None:
        return None
    return _add_to_poll(h, poll, rec, name, h.proof(poll["index"]), note)


@operator("committed-transaction-read-in-part", "torn-transaction",
          "KIP-98: read_committed readers see all of a committed transaction or none of it")
def _torn(h: History, rng: random.Random):
    txns = _transactions(h)
    seen = {}
    for r in _committed_polls(h):
        for rec in r["value"].get("records") or []:
            seen.setdefault(tuple(rec[:3]), []).append(r["index"])
    cands = [(txn, rec) for txn, t in txns.items() if t["commit"] is not None and t["abort"] is None
             and len({rec[:2] for rec in t["records"]}) > 1 for rec in t["records"] if rec[:3] in seen]
    pick = _pick(rng, cands)
    if pick is None:
        return None
    txn, rec = pick
    e = Edit(h)
    for i in seen[rec[:3]]:
        r = e.take(i)
        hits = [k for k, x in enumerate(r["value"]["records"]) if tuple(x[:3]) == rec[:3]]
        for k in reversed(hits):
            _drop_poll_record(r, k)
    return e.done("committed-transaction-read-in-part", h.proof(rec[4], txns[txn]["commit"]),
                  f"{rec[:3]} of {txn} dropped from read_committed reads")


# -- KIP-1023 -----------------------------------------------------------------------------

@operator("log-start-above-later-hwm", "tiered-offset-violation",
          "KIP-1023 (List Offsets API): log start <= local log start <= last tiered + 1 <= HWM, none going back "
          "within a leader epoch")
def _tiered_order(h: History, rng: random.Random):
    lower, cands = {}, []
    for r in h.records:
        if r["f"] == "fault":
            lower.clear()
            continue
        if r["f"] != "list_offsets" or r["type"] != "ok":
            continue
        v = r["value"]
        if v.get("error", "NONE") != "NONE" or as_int(v.get("offset"), -1) < 0 or as_int(v.get("replica_id"), -1) >= 0:
            continue
        k = (v.get("broker"), v.get("topic"), v.get("partition"), v.get("current_leader_epoch"))
        ts = as_int(v.get("timestamp"))
        if ts in (-2, -4, -5):
            lower[k] = r
        elif ts == -1 and k in lower and h.invoke_of.get(r["index"], -1) > lower[k]["index"]:
            cands.append((lower[k], r))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    a, b = pick
    e = Edit(h)
    e.take(a["index"])["value"]["offset"] = b["value"]["offset"] + 1
    return e.done("log-start-above-later-hwm", h.proof(a["index"]),
                  f"timestamp {a['value']['timestamp']} answered past {b['index']}'s HWM")


# -- liveness (checks/rules/liveness_rules.py) ---------------------------------------------

#: clients crashed in a row by `clients-crash-in-a-row`: one more than the default `--crash-loop`
CRASHES_IN_A_ROW = 6


@operator("clients-crash-in-a-row", "client-crash-loop",
          "a client library that keeps dying: more than --crash-loop clients of one operation end fatally with no success between")
def _crash_loop(h: History, rng: random.Random):
    sends = [r for r in h.records if r["f"] == "send" and r["type"] != "invoke" and r["index"] in h.invoke_of]
    if len(sends) <= CRASHES_IN_A_ROW:
        return None
    start = rng.randrange(len(sends) - CRASHES_IN_A_ROW)
    e = Edit(h)
    for n, r in enumerate(sends[start:start + CRASHES_IN_A_ROW]):
        c = e.take(r["index"])
        c["type"] = "info"
        c["value"].pop("offset", None)
        c["value"].update({"fatal": True, "client": f"mutated-client-{n}", "error": "mutated fatal error"})
    return e.done("clients-crash-in-a-row", [r["index"] for r in sends[start:start + CRASHES_IN_A_ROW]],
                  f"{CRASHES_IN_A_ROW} sends from {sends[start]['index']} fatal")


@operator("partition-never-acknowledges-after-heal", "slow-recovery",
          "after a heal every partition acknowledges sends again within the recovery bound")
def _slow_recovery(h: History, rng: random.Random):
    faults = [r for r in h.records if r["f"] == "fault" and r["type"] != "invoke"]
    cands = []
    for a, b in zip(faults, faults[1:] + [None]):
        end = b["time"] if b else h.records[-1]["time"]
        if (a["value"] or {}).get("phase") == "stop" and a["value"].get("fault") != "heal-all" \
                and end - a["time"] > (h.liveness_bound_s + 5) * 1e9:
            cands += [(a, end, tp) for tp in sorted({(v["topic"], v["partition"]) for r in h.ok("send")
                                                     if a["time"] < r["time"] < end for v in (r["value"],)})]
    pick = _pick(rng, cands)
    if pick is None:
        return None
    heal, end, tp = pick
    # from the heal's invoke: the liveness rule measures from when the heal began, and a restarted
    # node's heal completes only once its JVM listens, while the others already acknowledge
    began = h.records[h.invoke_of.get(heal["index"], heal["index"])]["time"]
    e = Edit(h)
    for r in h.ok("send"):
        if began < r["time"] < end and (r["value"]["topic"], r["value"]["partition"]) == tp:
            c = e.take(r["index"])
            c["type"] = "info"
            c["value"].pop("offset", None)
    return e.done("partition-never-acknowledges-after-heal", h.proof(heal["index"]), f"{tp} silent after {heal['index']}")


@operator("transaction-described-ongoing-past-timeout", "hanging-transaction",
          "KIP-98 (transaction timeout): the coordinator aborts a transaction open past transaction.timeout.ms")
def _hanging(h: History, rng: random.Random):
    described = [r for r in h.ok("describe_transactions")]
    faults = [(r["time"], r["value"].get("phase")) for r in h.records if r["f"] == "fault" and r["type"] != "invoke"]
    bound_ns = (h.liveness_bound_s + 1) * 1e9 + CLEANUP_INTERVAL_NS  # the rule's bound, and a second

    def quiet(t: int) -> bool:
        """As the rule judges an answer asked at `t` (faults by their completions): no fault on,
        the last heal more than its bound before."""
        before = [phase for time, phase in faults if time < t]
        last_stop = max((time for time, phase in faults if time < t and phase == "stop"), default=None)
        return (not before or before[-1] == "stop") and (last_stop is None or t - last_stop > bound_ns)

    cands = []
    for a in described:
        for t in a["value"].get("transactions") or []:
            if t.get("state") != "Ongoing" or not isinstance(t.get("timeout_ms"), int):
                continue
            due = a["time"] + (t["timeout_ms"] / 1e3 + h.liveness_bound_s + CLEANUP_INTERVAL_NS / 1e9 + 1) * 1e9
            later = [b for b in described if (asked := h.records[h.invoke_of[b["index"]]]["time"]) > due and quiet(asked)
                     and t["transactional_id"] in (b["value"].get("transactional_ids") or [])]
            if later:
                cands.append((a, t, later[0]))
    pick = _pick(rng, cands)
    if pick is None:
        return None
    a, t, b = pick
    e = Edit(h)
    v = e.take(b["index"])["value"]
    v["transactions"] = [x for x in v.get("transactions") or [] if x.get("transactional_id") != t["transactional_id"]] + [dict(t)]
    return e.done("transaction-described-ongoing-past-timeout", h.proof(a["index"], b["index"]),
                  f"{t['transactional_id']} still Ongoing at {b['index']}")


# -- consumer groups (checks/rules/group_rules.py) -----------------------------------------------

def _handoffs(h: History) -> list[tuple[dict, dict]]:
    """(the owner's revoke invoke, the next member's assign invoke) of each partition that went from
    one member of a group to another by an ordinary revocation."""
    from kipcheck.checks.rules.group_rules import REVOKE, is_group_assign
    last_revoke: dict[tuple, dict] = {}
    out = []
    for r in h.records:
        v = r["value"]
        if r["type"] != "invoke":
            continue
        if r["f"] == REVOKE and not v.get("lost"):
            for t, p in v.get("partitions") or ():
                last_revoke[(v.get("group"), t, p)] = r
        elif is_group_assign(r):
            for t, p in v.get("partitions") or ():
                revoke = last_revoke.pop((v["group"], t, p), None)
                if revoke is not None and revoke["process"] != r["process"]:
                    out.append((revoke, r))
    return out


@operator("partition-given-before-revoked", "group-ownership-violation",
          "KIP-848 \"Reconciliation\": a partition is revoked from its owner before another member of the "
          "group is given it (here the owner's revocation moved after the other member's assignment)")
def _given_before_revoked(h: History, rng: random.Random):
    pick = _pick(rng, _handoffs(h))
    if pick is None:
        return None
    revoke, given = pick
    completion = {inv: i for i, inv in h.invoke_of.items()}
    given_done = completion.get(given["index"], given["index"])
    moved = [revoke["index"], *([completion[revoke["index"]]] if revoke["index"] in completion else [])]
    at = h.records[given_done]["time"]
    kept = [r for r in h.records if r["index"] not in moved]
    place = next(k for k, r in enumerate(kept) if r["index"] == given_done) + 1
    shifted = [{**copy.deepcopy(h.records[i]), "time": at + 1 + n} for n, i in enumerate(sorted(moved))]
    e = Edit(h)
    e.records = kept
    e.insert_after(place - 1, shifted)
    planted_revoke = place  # the revoke's invoke lands right after the assign's completion
    planted_given = next(k for k, r in enumerate(e.records) if r is given)
    return e.done("partition-given-before-revoked", (planted_given, planted_revoke),
                  f"{revoke['value'].get('group')}: the owner's revoke of record {revoke['index']} "
                  f"moved after the assign of record {given['index']}")


def _move_completions(h: History) -> list[tuple[dict, dict, list[int]]]:
    """(the record before, the completing record, the ISR it leaves) of every reassignment the
    metadata log completed with more than one replica in sync (one can be taken out)."""
    return [(previous, r, list(after.isr)) for previous, r, before, after in replay(h.ok("partition_change"))
            if before is not None and kip455.completes(before, after) and len(after.isr) > 1]


@operator("move-completed-short-of-a-target", "premature-reassignment-completion",
          "KIP-455: a reassignment completes once every target replica is in the ISR (here one target "
          "replica taken out of the ISR the completing record leaves)")
def _move_completed_short(h: History, rng: random.Random):
    pick = _pick(rng, _move_completions(h))
    if pick is None:
        return None
    before, completing, isr = pick
    dropped = isr.pop(rng.randrange(len(isr)))
    e = Edit(h)
    e.take(completing["index"])["value"]["isr"] = isr  # a record that left the ISR as it was now sets it
    return e.done("move-completed-short-of-a-target", (before["index"], completing["index"]),
                  f"broker {dropped} out of the ISR of metadata log offset {completing['value'].get('offset')}")
