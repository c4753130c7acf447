"""KIP-227 fetch sessions: `fetch-session-violation`.

Porcupine style: the rule steps `reference_model.kip227` state — the sessions this client
holds on one broker (`SessionCache`) and the ids it saw closed or not found — through the
client's fetches in history order. For each answer the model says which top-level
answers are allowed (`kip227.observer_outcomes`) and, for incremental responses, which
partitions must or may appear (`must_include`, `may_omit`); the rule only reads the
requests and answers, asks, and reports. The next state follows the observed answer.
Under a release profile, what only that profile allows is reported as known.

One group per broker: every client's fetches (each client's sessions stepped apart), and
the broker's other answers, metadata and faults, which prove the least HWM it had while it
answered a request (`log_bounds.HwmFloor`): a partition left out of an incremental
response although the broker had reported, before the request was sent, an HWM above the
one the session last sent (or served records past it) is a KIP-227 violation
(`kip227.hwm_changed_since_sent`), across the session's requests and other clients' answers,
while the broker stayed in that answer's leader epoch and life (its metadata around the
request, or its first fetch answer accepted after it, proves the epoch).

A partition with committed data at its fetch offset left out of an incremental response is
excused only by the response's size limits as Kafka reads them ("Handling Partition Size
Limits", `_Walk._size_limits`): the read order is inferred (the request's, then the session's,
rotated after each incremental response that returned records), not observed, since the
history lists a response's partitions in the session's sorted order; the bytes each read
charged and the size of the first batch it returned are the prober's record (`bytes`,
`first_batch_bytes`), else bounded by the broker's other reads at that offset (`_Reads`), and a
partition read from remote storage (the metadata log and ListOffsets say) is excused.

What cannot be judged from the history (docs/checker.md): evicting one of the prober's
sessions (a consumer's: any follower's new session may evict it once the cache is full,
and the cache's other sessions are not observed).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from kipcheck.reference_model import kip227, kip392
from kipcheck.reference_model.state import FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, NONE, \
    CachedPartition, Session, SessionCache

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.log_bounds import HwmFloor, fault_brokers
from kipcheck.checks.rules.observe import as_int, known_as, partitions_of, verdict

SESSION_ANSWERS = {NONE, FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH}
NAME = "fetch-session-violation"
#: The size limits of a raw fetch whose invoke does not record them (histories before
#: 2026-11-28): harness/clients/prober.py asked max_bytes 1 MiB, PARTITION_MAX_BYTES each
MAX_BYTES = 1 << 20
PARTITION_MAX_BYTES = 16384
LATEST_TIERED = -5  # ListOffsets timestamp: the last offset in remote storage (-1: none, KIP-1005)
#: The topic Kafka's remote log metadata manager (TopicBasedRemoteLogMetadataManager, the only
#: one Kafka ships) creates on a cluster with remote storage (remote.log.storage.system.enable)
REMOTE_LOG_METADATA_TOPIC = "__remote_log_metadata"
#: Errors Kafka's KafkaApis answers a partition with before reading (unknown, unauthorized): it
#: puts them after the partitions it read, in the response and in a new session's order
UNREAD_ERRORS = {"UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID", "TOPIC_AUTHORIZATION_FAILED"}


def _key(e: dict) -> tuple:
    return (e.get("topic"), e.get("partition"))


def _requested(inv: dict) -> tuple:
    """(topic, partition, fetch offset) of each partition the request carried."""
    return tuple((e.get("topic"), e.get("partition"), int(e["fetch_offset"]))
                 for e in partitions_of(inv) if as_int(e.get("fetch_offset")) is not None)


def _returned(e: dict) -> tuple:
    """The offsets of the records and markers an answer carried for a partition: its read's
    bytes (empty: none, or an error)."""
    if e.get("omitted") or e.get("missing") or e.get("error", NONE) != NONE:
        return ()
    return tuple(sorted(int(r[0]) for r in (e.get("records") or []) + (e.get("markers") or [])
                        if as_int(r[0]) is not None))


def _response(e: dict) -> kip227.PartitionResponse:
    return kip227.PartitionResponse(e.get("error", NONE), as_int(e.get("high_watermark"), -1),
                                    as_int(e.get("log_start_offset"), -1), bool(e.get("records") or e.get("markers")),
                                    as_int(e.get("preferred_read_replica"), -1))


class FetchSessionRule(BaseRule):
    anomalies = (NAME,)
    fs = frozenset(("fetch", "list_offsets", "metadata", "fault", "partition_change"))

    def group_keys(self, record: dict) -> Iterable[str]:
        f = record.get("f")
        if f in ("fetch", "list_offsets", "metadata"):
            yield f"session:{(record.get('value') or {}).get('broker')}"
        elif f == "fault":
            yield from (f"session:{b}" for b in fault_brokers(record))
        elif f == "partition_change" and (record.get("value") or {}).get("kind") == "create":
            # the metadata log's partition creations, to the brokers that host the partition (`_Reads.local`)
            yield from (f"session:{b}" for b in (record.get("value") or {}).get("replicas") or ())

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        floor = HwmFloor.of(records)
        reads = _Reads(records, floor)
        walks: dict = {}  # process -> its sessions on this broker
        pending: dict = {}
        for r in records:
            if r.get("f") != "fetch":
                continue
            if r.get("type") == "invoke":
                pending[r.get("process")] = r
            elif r.get("type") in ("ok", "fail", "info"):
                inv = pending.pop(r.get("process"), None)
                if r.get("type") == "ok" and inv is not None:
                    walks.setdefault(r.get("process"), _Walk(profile, floor, reads)).step(inv, r)
        return [a for w in walks.values() for a in w.out]


class _Reads:
    """What one broker's answers (the group's) prove about its reads, for KIP-227 "Handling
    Partition Size Limits": its non-empty reads at each fetch offset, whether each ignored the
    size limits, and whether a partition may have been read from remote storage.

    A read ignored the limits (Kafka `ReplicaManager.readFromLog`: `minOneMessage`) iff no
    partition read before it in the same request returned bytes. The read order is the
    request's own (the invoke's) without a session's rotation, else the session's order
    as the client's walk tracks it (`orders`; unknown: nothing said)."""

    def __init__(self, records: Sequence[dict], floor: HwmFloor):
        self.floor = floor
        self.answers: dict = {}  # completion index -> (invoked, completed, indices, named epoch by key, read order, bytes by key)
        self.at: dict = {}  # (topic, partition, fetch offset) -> completion indices of non-empty reads there
        self.orders: dict = {}  # completion index -> an incremental answer's read order (`_Walk`)
        self.tiered: set = set()  # topics the broker answered some data in remote storage for
        self.created: set = set()  # (topic, partition) the metadata log created with a replica here
        pending: dict = {}
        for r in records:
            f = r.get("f")
            if f == "partition_change":
                v = r.get("value") or {}
                if v.get("kind") == "create":
                    self.created.add((v.get("topic"), v.get("partition")))
                continue
            if f not in ("fetch", "list_offsets"):
                continue
            if r.get("type") == "invoke":
                pending[(r.get("process"), f)] = r
                continue
            inv = pending.pop((r.get("process"), f), None)
            if r.get("type") == "ok" and inv is not None:
                (self._fetch if f == "fetch" else self._offsets)(inv, r)

    def _fetch(self, inv: dict, done: dict) -> None:
        v, iv = done.get("value") or {}, inv.get("value") or {}
        if v.get("top_error", NONE) not in (NONE, None):
            return
        ordered = kip227.request_kind(as_int(iv.get("session_id"), 0), as_int(iv.get("session_epoch"), -1)) \
            != kip227.INCREMENTAL
        got = {_key(e): (as_int(e.get("fetch_offset")), _returned(e), as_int(e.get("first_batch_bytes")))
               for e in partitions_of(v)}
        top_named = as_int(iv.get("current_leader_epoch"), -1)  # a sessionless fetch names one epoch
        named = {_key(e): as_int(e.get("current_leader_epoch"), top_named) for e in partitions_of(iv)}
        self.answers[done["index"]] = (inv.get("time", 0), done.get("time", 0), (inv["index"], done["index"]),
                                       named if named else {_key(e): top_named for e in partitions_of(v)},
                                       tuple(_key(e) for e in partitions_of(iv)) if ordered else None, got)
        for (topic, partition), (offset, returned, _) in got.items():
            if returned and offset is not None:
                self.at.setdefault((topic, partition, offset), []).append(done["index"])

    def _offsets(self, inv: dict, done: dict) -> None:
        v = done.get("value") or {}
        if as_int(v.get("timestamp")) == LATEST_TIERED and v.get("error", NONE) == NONE \
                and as_int(v.get("offset"), -1) >= 0:
            self.tiered.add(v.get("topic"))

    def min_one_message(self, index: int, key) -> bool | None:
        """Whether answer `index` read `key` ignoring the size limits (None: not known)."""
        *_, order, got = self.answers[index]
        order = order or self.orders.get(index)
        if order is None or key not in order:
            return None
        return not any(got.get(k, (None, ()))[1] for k in order[:order.index(key)])

    def epoch(self, broker, topic, partition, invoked: int, completed: int, named: int = -1) -> tuple | None:
        """(leader epoch, life, indices proving the epoch) `broker` was in for the partition
        throughout [invoked, completed] (None: not proven): the epoch the request named when
        answered NONE (Kafka `Partition.checkCurrentLeaderEpoch`), its metadata bracketing it,
        or its first accepted fetch answer after it when an answer of that epoch completed
        before (`HwmFloor.epoch_after`: a broker's epochs never go back)."""
        lives = self.floor.lives
        life = lives.of(invoked)
        if life != lives.of(completed):
            return None
        if named >= 0:
            return named, life, ()
        during = self.floor.epochs.epoch_during(broker, topic, partition, invoked, completed)
        if during is not None:
            return during, life, ()
        after = self.floor.epoch_after(broker, topic, partition, completed, life)
        if after is None:
            return None
        anchor = next((p[4] for p in self.floor.points.get((topic, partition, after[0], life), ()) if p[1] < invoked),
                      None)
        return None if anchor is None else (after[0], life, after[1] + anchor)

    def first_batch(self, broker, topic, partition, offset: int, invoked: int, completed: int,
                    limit: int, named: int = -1) -> tuple | None:
        """(a bound on the size of the first batch at `offset` of `broker`'s log for the
        partition, the indices proving it) while it answered a request made in [invoked,
        completed] (None: not proven), from its non-empty reads at that offset, before or after,
        in the same leader epoch and life (in which a committed batch does not change): the size
        a read recorded (`first_batch_bytes`), else `limit` where
        `kip227.first_batch_within_limit` proves the batch within it."""
        at = self.epoch(broker, topic, partition, invoked, completed, named)
        if at is None:
            return None
        same = []
        for index in self.at.get((topic, partition, offset), ()):
            inv_t, done_t, indices, named, _, got = self.answers[index]
            read = self.epoch(broker, topic, partition, inv_t, done_t, named.get((topic, partition), -1))
            if read is not None and read[:2] == at[:2]:
                _, returned, size = got[(topic, partition)]
                if size is not None:
                    return size, at[2] + indices + read[2]
                same.append((self.min_one_message(index, (topic, partition)), returned, indices + read[2]))
        witnesses = kip227.first_batch_within_limit([(one, returned) for one, returned, _ in same])
        return (limit, at[2] + tuple(i for w in witnesses for i in same[w][2])) if witnesses else None

    def local(self, topic, partition) -> bool:
        """Whether the broker read the partition from its local log, never from remote storage:
        Kafka reads remote storage (KIP-405) only on a cluster with remote storage, and such a
        read may come back empty (`ReplicaManager.fetchMessages` fetches only a request's first
        remote partition; `DelayedRemoteFetch` expires). Proven by the metadata log (appended to
        the history, docs/history.md) creating the partition on this broker while creating no
        partition of `REMOTE_LOG_METADATA_TOPIC` here (its replicas span the brokers: kipcheck's
        tiered clusters replicate it on each), and by no LATEST_TIERED answer of the broker
        showing data of the topic in remote storage."""
        return (topic, partition) in self.created and not any(t == REMOTE_LOG_METADATA_TOPIC for t, _ in self.created) \
            and topic not in self.tiered


class _Walk:
    """The client's model state on one broker and the anomalies found so far."""

    def __init__(self, profile: str, floor: HwmFloor | None = None, reads: _Reads | None = None):
        self.profile = profile
        self.floor = floor
        self.reads = reads
        self.known = SessionCache()
        self.gone: frozenset = frozenset()
        self.seen: dict = {}  # (session id, partition key) -> highest offset returned in it
        self.sent_at: dict = {}  # (session id, partition key) -> index of the answer that last sent it
        self.in_order: dict = {}  # session id -> whether its partitions are in the broker's read order
        self.rotated_at: dict = {}  # session id -> the answer whose records last rotated its order
        self.named: dict = {}  # session id -> {partition key: the leader epoch the session holds for it}
        self.out: list[Anomaly] = []

    def flag(self, kind: str | None, rule: str, indices, message: str, **details) -> None:
        """`rule`: the judged model rule (checks.coverage.OBSERVED) the answer broke."""
        if kind is not None:
            self.out.append(Anomaly(NAME, tuple(sorted(set(indices))), message, known=(kind == "known"),
                                    details={**details, **known_as(kind), RULE: rule}))

    def step(self, inv: dict, done: dict) -> None:
        v, iv = done.get("value") or {}, inv.get("value") or {}
        if as_int(v.get("version"), 7) < 7:
            return  # no sessions before Fetch v7
        indices = (inv["index"], done["index"])
        sid, epoch = as_int(iv.get("session_id"), 0), as_int(iv.get("session_epoch"), -1)
        top, rid = v.get("top_error", NONE) or NONE, as_int(v.get("response_session_id"), 0)
        entries = partitions_of(v)
        req = kip227.FetchRequest(sid, epoch, as_int(iv.get("replica_id"), -1) >= 0, _requested(iv),
                                  tuple((t, p) for t, p in iv.get("forgotten") or []), inv.get("time", 0) // 10**6)
        kind = kip227.request_kind(sid, epoch)
        where = {"session_id": sid, "session_epoch": epoch}
        if top != NONE:
            view = kip227.top_level_error_view(top, tuple(_key(e) for e in entries))
            if any(e.get("records") or e.get("error", top) != view[_key(e)] for e in entries):
                self.flag("anomaly", "kip227.top_level_error_view", indices, f"top-level error {top} but a partition carries records or another "
                                              f"error (KIP-227 \"Top-level error code\")", **where)
        if top not in SESSION_ANSWERS:
            return
        before = self.known.get(sid)
        created = kind in (kip227.NEW, kip227.CLOSE_AND_NEW) and top == NONE and rid
        if created:
            self.in_order.pop(rid, None)
            self.rotated_at.pop(rid, None)
        chosen = self._judge_answer(kind, req, top, rid, indices, where)
        if top != NONE:
            return
        named = {_key(e): as_int(e.get("current_leader_epoch"), -1) for e in partitions_of(iv)}
        if created:  # Kafka's new session holds the partitions in the order it read them
            self.in_order.setdefault(rid, not any(e.get("error") in UNREAD_ERRORS for e in entries))
        if kind != kip227.INCREMENTAL:
            answered = {_key(e) for e in entries if not (e.get("omitted") or e.get("missing"))}
            gaps = sorted((kip227.full_response_partitions(req) | {_key(e) for e in entries}) - answered)
            if gaps:
                self.flag("anomaly", "kip227.full_response_partitions", indices,
                          f"the response to a full ({kind}) fetch request {sid}/{epoch} left out requested "
                          f"partitions {gaps[:5]}: only an incremental response may omit partitions (KIP-227 "
                          f"\"Full Fetch Responses\", \"FetchRequest Metadata meaning\")", **where,
                          left_out=[list(g) for g in gaps[:20]])
        elif before is not None and rid == sid:
            if self.reads is not None and self.in_order.get(sid):
                self.reads.orders[done["index"]] = tuple(c.key for c in kip227.update_session_partitions(before, req))
            self._judge_incremental(before, req, entries, indices, where, (iv.get("broker"), inv, done))
        if chosen is not None and rid:
            held = {} if created else self.named.get(rid, {})
            self.named[rid] = {**held, **named}  # Kafka's CachedPartition keeps the epoch last sent
            self._absorb(rid, entries, done["index"], rotate=kind == kip227.INCREMENTAL)

    def _judge_answer(self, kind, req, top, rid, indices, where):
        """The top-level answer against the model; steps the state. Returns the session
        the answer leaves (None when no session)."""
        def outcomes(p):
            return kip227.observer_outcomes(self.known, self.gone, req, p, new_id=rid or None)

        current = outcomes(self.profile)
        if current is None:  # an id this client never saw: someone else's, maybe
            return None
        observed = (top, rid)

        def allowed(p):
            return any((r.error, r.session_id) == observed for r, _, _ in outcomes(p))

        k = verdict(allowed, self.profile)
        if k is not None:
            shown = sorted({(r.error, r.session_id) for r, _, _ in current})
            self.flag(k, "kip227.observer_outcomes", indices, f"{kind} request {req.session_id}/{req.epoch} answered {top} with session id "
                                  f"{rid}; KIP-227 allows {shown}", **where, response_session_id=rid)
        match = [(c, g) for r, c, g in current if (r.error, r.session_id) == observed]
        if match:
            self.known, self.gone = match[0]
        else:
            self._resync(kind, req, top, rid)
        return self.known.get(rid) if rid else None

    def _resync(self, kind, req, top, rid) -> None:
        """After an answer the model does not allow, follow what the broker said."""
        if top == FETCH_SESSION_ID_NOT_FOUND or (top == NONE and rid == 0 and req.session_id):
            self.known, self.gone = self.known.without(req.session_id), self.gone | {req.session_id}
        elif top == NONE and rid:
            self.in_order[rid] = False
            old = self.known.get(rid)
            parts = kip227.update_session_partitions(old, req) if old else tuple(
                CachedPartition(t, p, o) for t, p, o in req.partitions)
            epoch = kip227.next_epoch(req.epoch if old and req.epoch > 0 else 0)  # the epoch it accepted
            self.known = self.known.with_session(Session(rid, epoch, req.privileged, parts, req.now_ms, req.now_ms))
            self.gone = self.gone - {rid}

    def _hwm_floor(self, at, c, profile, named: int = -1) -> tuple | None:
        """The least HWM the broker had for `c` while it answered and the indices of the
        answer that proves it (`log_bounds.HwmFloor.proof_at`; None: nothing proven)."""
        if self.floor is None:
            return None
        broker, inv, done = at
        return self.floor.proof_at(broker, c.topic, c.partition, inv.get("time", 0), done.get("time", 0),
                                   lambda leader, changed, rose, back: kip392.hwm_may_go_back(
                                       leader, profile, after_epoch_change=changed, rose_in_epoch=rose,
                                       back_in_epoch=back), named)

    def _judge_incremental(self, before: Session, req, entries, indices, where, at=None) -> None:
        session = replace(before, partitions=kip227.update_session_partitions(before, req))
        cached = {c.key: c for c in session.partitions}
        present = [e for e in entries if not e.get("omitted")]
        strangers = sorted({_key(e) for e in present} - set(cached))
        if strangers:
            self.flag("anomaly", "kip227.may_omit", indices, f"incremental response carries partitions outside the session: "
                                          f"{strangers[:5]} (KIP-227 \"Incremental Fetch Responses\")", **where)
        for e in present:
            c = cached.get(_key(e))
            if c is None:
                continue
            k = verdict(lambda p: kip227.must_include(c, _response(e), p), self.profile)
            self.flag(k, "kip227.may_omit", indices, f"incremental response carries {c.topic}/{c.partition} with nothing new: HWM "
                                  f"{e.get('high_watermark')} and log start {e.get('log_start_offset')} as last sent, "
                                  f"no records, error {e.get('error', NONE)}", **where)
        for e in entries:
            c = cached.get(_key(e))
            if not e.get("omitted") or c is None:
                continue
            seen = self.seen.get((before.id, c.key), -1) >= c.fetch_offset
            # left out without an error: the read passed the check of the epoch the session holds for it
            held = self.named.get(before.id, {})
            named = held.get(c.key, -1)
            may_be_full, room, read = self._size_limits(c, session, entries, at, self.in_order.get(before.id, False),
                                                        held)
            floors = {}

            def omit(p):
                floors[p.name] = self._hwm_floor(at, c, p, named) if at else None
                return kip227.may_omit(c, may_be_full, seen, p, floors[p.name][0] if floors[p.name] else None)

            k = verdict(omit, self.profile)
            floor, proof = max((f for f in floors.values() if f is not None), default=(None, ()))
            last_sent = self.sent_at.get((before.id, c.key))  # where the session's HWM came from
            sent = () if last_sent is None else (last_sent,)
            if kip227.hwm_changed_since_sent(c, floor):
                shown = indices + proof + sent
                why = (f"its HWM had changed since the session last sent it ({c.hwm}): broker {at[0]} had proven "
                       f"an HWM of at least {floor} in the same leader epoch before the request was sent")
            else:
                shown = indices + room + sent
                why = (f"committed data was available at its fetch offset {c.fetch_offset} (HWM {c.hwm}), so its read "
                       f"returned records: {read}")
            self.flag(k, "kip227.may_omit", shown,
                      f"incremental response left out {c.topic}/{c.partition} although {why}", **where)

    def _size_limits(self, c, session: Session, entries, at, order_known: bool,
                     named: dict | None = None) -> tuple[bool, tuple, str]:
        """Whether the response's size limits may have left `c`'s read empty (KIP-227 "Handling
        Partition Size Limits"), and the indices of the answers proving they did not. Not when
        no other partition returned bytes (read with minOneMessage); else only when the first
        batch at its fetch offset (`_Reads.first_batch`) fits what the partitions read before it
        left: `kip227.read_has_room` on the bytes each charged where the answer records them,
        `kip227.size_limits_may_empty_read` on their first batches' bounds where not; and only
        for a partition read from the local log (`_Reads.local`) up to the HWM
        (read_uncommitted). `order_known`: the session's partitions are in the broker's read
        order (else any other may have been read first). `named`: the leader epoch the session holds
        for each partition, which a read answered without an error passed. Returns (may be full, the indices proving
        it was not, the sentence saying why it returned records)."""
        got = {_key(e): bool(_returned(e)) or (as_int(e.get("bytes")) or 0) > 0 for e in entries}
        if not any(returned for key, returned in got.items() if key != c.key):
            return False, (), "no other partition returned any, so it was read ignoring the size limits"
        keys = [x.key for x in session.partitions]
        if self.reads is None or at is None or any(got[k] for k in set(got) - set(keys)):
            return True, (), ""
        earlier = [k for k in (keys[:keys.index(c.key)] if order_known else keys) if k != c.key and got.get(k)]
        rotated = self.rotated_at.get(session.id)
        if not earlier:
            return False, () if rotated is None else (rotated,), (
                "it was the first in the session's read order to return bytes" + (
                    f" (rotated after answer {rotated})" if rotated is not None else "")
                + ", so it was read ignoring the size limits")
        broker, inv, done = at
        iv = inv.get("value") or {}
        limit, budget = as_int(iv.get("partition_max_bytes"), PARTITION_MAX_BYTES), as_int(iv.get("max_bytes"), MAX_BYTES)
        cached = {x.key: x for x in session.partitions}
        clean = {_key(e) for e in entries if e.get("error", NONE) in (NONE, None)}
        batches = {k: self.reads.first_batch(broker, *k, cached[k].fetch_offset, inv.get("time", 0), done.get("time", 0),
                                             limit, (named or {}).get(k, -1) if k in clean else -1)
                   for k in [c.key, *earlier]}
        charged = {_key(e): as_int(e.get("bytes")) for e in entries}
        own = batches[c.key]
        if own is None:
            return True, (), ""
        if all(charged.get(k) is not None for k in earlier):  # the answer says what each earlier read charged
            room, proofs = kip227.read_has_room(own[0], sum(charged[k] for k in earlier), limit, budget), [own]
            read = (f"its first batch ({own[0]} bytes) fitted the partition limit ({limit}) and what the "
                    f"{sum(charged[k] for k in earlier)} bytes read before it left of {budget}")
        else:
            room = not kip227.size_limits_may_empty_read(own[0], [(batches[k] or (None,))[0] for k in earlier],
                                                         limit, budget, order_known)
            proofs = [b for b in batches.values() if b]
            read = "its first batch fitted the partition limit and the partitions read before it left room"
        if not room or not self.reads.local(c.topic, c.partition) \
                or iv.get("isolation_level", "read_uncommitted") != "read_uncommitted":
            return True, (), ""
        shown = tuple(i for _, indices in proofs for i in indices) + (() if rotated is None else (rotated,))
        return False, shown, f"{read} (answers {sorted(set(shown))})"

    def _absorb(self, sid: int, entries, index=None, rotate: bool = False) -> None:
        """KIP-227 "Cached data about each partition": the session now holds what this
        response sent (`kip227.after_response`); after an incremental response the partitions
        that returned bytes move to the end of its order ("Handling Partition Size Limits")."""
        session = self.known.get(sid)
        if session is None:
            return
        sent = {_key(e): e for e in entries if not e.get("omitted") and not e.get("missing")}
        parts = tuple(kip227.after_response(c, _response(sent[c.key])) if c.key in sent else c
                      for c in session.partitions)
        if rotate:
            self.rotated_at[sid] = index
            by_key = {c.key: c for c in parts}
            order = kip227.rotate(tuple(by_key), tuple(k for k in by_key if k in sent and _returned(sent[k])))
            parts = tuple(by_key[k] for k in order)
        self.known = self.known.with_session(replace(session, partitions=parts))
        for key, e in sent.items():
            self.sent_at[(sid, key)] = index
            offsets = [int(r[0]) for r in e.get("records") or [] if as_int(r[0]) is not None]
            if offsets:
                self.seen[(sid, key)] = max(offsets + [self.seen.get((sid, key), -1)])
