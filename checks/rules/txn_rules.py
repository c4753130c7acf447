"""Transactions as read_committed readers and fetch answers show them (KIP-98 / KIP-447 / KIP-890).

One rule, one group for the run, judged as it streams by: it needs every transaction's
sends, ends and reads across partitions, but keeps only a small entry per transactional send
(its transaction, partition, offset, whether a read_committed reader saw it), the earliest
read_committed read of each transaction and, per partition, the LSO answers that could show a
transaction hanging. The judgements are `reference_model.transactions`'s:

* `aborted-read`, `precommitted-read`: a read_committed poll returned a record of an aborted
  transaction, or returned it before the transaction's commit was called (or it never was);
  `aborted-read` too: a read_committed fetch answer returned a record of an aborted transaction
  that its aborted-transaction list does not cover (no entry of the batch's producer id with a
  first offset at or below it), so a consumer would have kept it;
* `torn-transaction`: a committed transaction some of whose acknowledged records
  read_committed readers never returned, although they read others of it and read that
  partition past them; or a read_committed fetch answer that returned some of its records in
  a partition and, within the offsets it covered, left out others there;
* `lso-violation`: a fetch answer whose LSO is above its HWM, that went back within one
  broker's leader epoch and life, or a read_committed fetch answer with records at or above it;
* `hanging-transaction` (liveness): a fetch answer asked later than the transaction's end (or
  its start plus transaction.timeout.ms) plus the bound whose LSO still sits on one of its
  records, asked while no fault was on and the last heal was more than the bound ago (a
  follower cut off keeps a stale LSO for as long as the fault lasts, and catches up after);
  and, from the coordinators' own answers (KIP-664 DescribeTransactions), one transaction (producer
  id, epoch, start time) described `Ongoing` for longer than its timeout plus the bound, the later
  answer asked under the same quiet condition.

`lost-write` for committed transactions and the gaps read_committed readers leave over
aborted records are the history rule's (checks/rules/history_rules.py).
"""
from __future__ import annotations

from typing import Iterable

from kipcheck import effects
from kipcheck.reference_model import profiles, transactions as model

from kipcheck.checks.rules.base import DEVIATIONS, RULE, Anomaly, BaseRule
from kipcheck.checks.rules.log_bounds import fault_brokers
from kipcheck.checks.rules.observe import partitions_of

TXN_ANOMALIES = ("aborted-read", "precommitted-read", "torn-transaction", "lso-violation", "hanging-transaction")
TXN_OPS = ("txn-begin", "txn-commit", "txn-abort")
GROUP = "transactions"
#: the deviation alone, to tell a record the sampled LSO explains from one beyond its bound
_SAMPLED = profiles.Profile("sampled-lso", frozenset({profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ}), "")
#: Kafka's transaction.abort.timed.out.transaction.cleanup.interval.ms (TransactionStateManager
#: default): a timed-out transaction is aborted at the next of these sweeps
CLEANUP_INTERVAL_NS = 10_000_000_000


def _tp(topic, partition) -> str:
    return f"{topic}/{partition}"


class _Txn:
    __slots__ = ("commit", "abort", "commit_began", "end_began", "end_index", "end_time", "first_ack", "timeout_ms",
                 "sends", "first_read")

    def __init__(self):
        self.commit, self.abort = [], []
        self.commit_began = self.end_began = self.end_index = self.end_time = self.first_ack = self.timeout_ms = None
        self.sends = []  # [tp, offset, read, completion index]
        self.first_read = None  # (index, process, tp, offset) of the earliest read_committed read


class TransactionRule(BaseRule):
    """See the module docstring. `bound` (seconds): how long past its deadline a transaction
    may still hold the LSO (the run's liveness bound; a coordinator may have to move first)."""

    anomalies = TXN_ANOMALIES
    key = GROUP
    streams = True

    def __init__(self, bound: float = 60.0):
        self.bound = float(bound)

    fs = frozenset((*TXN_OPS, "send", "fetch", "describe_transactions", "poll", "fault"))

    def reads(self, f: str, type_: str) -> bool:
        return f in self.fs and (f != "poll" or type_ == "ok") and (f != "fault" or type_ != "invoke")

    def group_keys(self, record: dict) -> Iterable[str]:
        return (GROUP,) if self.split(record) else ()

    def split(self, record: dict) -> list[tuple[str, dict]]:
        f, v = record["f"], record["value"]
        if f in TXN_OPS or (f == "send" and "txn" in v) or f in ("fetch", "describe_transactions"):
            return [(GROUP, record)]
        if f == "poll":
            if record["type"] == "ok" and v.get("isolation") == model.READ_COMMITTED and v.get("records"):
                return [(GROUP, {**record, "value": {"isolation": model.READ_COMMITTED, "records": v["records"]}})]
            return []
        if f == "fault" and record["type"] != "invoke":
            return [(GROUP, record)]
        return []

    def start(self, key: str, profile: str) -> "_Judge":
        return _Judge(int((self.bound * 1e9) + CLEANUP_INTERVAL_NS), profile)


class _Judge:
    def __init__(self, bound_ns: int, profile: str = "kip"):
        self.bound_ns, self.profile = bound_ns, profile
        self.above: list = []  # (index, broker, tp, lso, [(offset, txn or None)]): rc records at/above the LSO
        self.txns: dict[str, _Txn] = {}
        self.by_value: dict = {}  # sent value -> (txn, its send entry)
        self.rc_top: dict[str, tuple[int, int]] = {}  # tp -> (highest offset read_committed, index)
        self.lives: dict[int, int] = {}
        self.lso: dict = {}  # (broker, tp, epoch, life) -> (lso, index)
        #: answers whose LSO exceeded their own HWM, accepted (sampled HWM) unless a later HWM of
        #: the same broker, epoch and life is below it: (broker, tp, epoch, life) -> [(lso, hwm, index)]
        self.lso_over_hwm: dict = {}
        self.held: dict[str, dict[int, tuple[int, int]]] = {}  # tp -> {lso: (latest ask time, index)}
        self.asked: dict = {}  # process -> its fetch invoke time
        self.uncovered: list = []  # (txn, index, tp, offset, producer id): rc fetch records the list left out
        self.answers: list = []  # (txn, index, tp, first, last, offsets of it returned): rc fetch answers
        self.faults_on = 0  # faults started and not yet healed
        self.healed = None  # when the last heal completed
        #: (transactional id, producer id, epoch, start time ms) -> (first described: ask time, index);
        #: None once reported
        self.described: dict = {}
        self.out: list[Anomaly] = []

    def _txn(self, txn) -> _Txn:
        t = self.txns.get(txn)
        if t is None:
            t = self.txns[txn] = _Txn()
        return t

    def add(self, r: dict) -> None:
        f, t, v, i = r["f"], r["type"], r["value"], r["index"]
        if f == "send":
            txn = self._txn(v["txn"])
            if t == "invoke":
                entry = [_tp(v.get("topic"), v.get("partition")), None, False, None]
                txn.sends.append(entry)
                self.by_value[v.get("value")] = (v["txn"], entry)
                return
            found = self.by_value.get(v.get("value"))
            if found is None:
                return
            entry = found[1]
            entry[3] = i
            off = v.get("offset")
            if t == "ok" and type(off) is int and off >= 0:
                entry[1] = off
                if txn.first_ack is None:
                    txn.first_ack = r["time"]
        elif f == "poll":
            for rec in v["records"]:
                found = self.by_value.get(rec[3]) if len(rec) > 3 else None
                tp = _tp(rec[0], rec[1])
                top = self.rc_top.get(tp)
                if type(rec[2]) is int and (top is None or rec[2] > top[0]):
                    self.rc_top[tp] = (rec[2], i)
                if found is None:
                    continue
                txn_id, entry = found
                entry[2] = True
                txn = self.txns[txn_id]
                if txn.first_read is None:
                    txn.first_read = (i, r["process"], tp, rec[2])
        elif f in TXN_OPS:
            txn = self._txn(v.get("txn"))
            if f == "txn-begin":
                if t == "invoke" and type(v.get("transaction_timeout_ms")) is int:
                    txn.timeout_ms = v["transaction_timeout_ms"]
                return
            if t == "invoke":
                if f == "txn-commit" and txn.commit_began is None:
                    txn.commit_began = i
                if txn.end_began is None:
                    txn.end_began = i
                return
            (txn.commit if f == "txn-commit" else txn.abort).append(t)
            if t == "ok" and txn.end_time is None:
                txn.end_time, txn.end_index = r["time"], i
        elif f in ("fetch", "describe_transactions"):
            if t == "invoke":
                self.asked[r["process"]] = r["time"]
            elif t == "ok":
                asked = self.asked.pop(r["process"], r["time"])
                (self._fetched if f == "fetch" else self._described)(r, v, asked)
        elif f == "fault":
            if effects.LOSES_STATE in effects.of(v):
                for b in fault_brokers(r):
                    self.lives[b] = self.lives.get(b, 0) + 1
            if v.get("phase") == "start":
                self.faults_on += 1
            elif v.get("phase") == "stop":
                self.faults_on = 0 if v.get("fault") == "heal-all" else max(0, self.faults_on - 1)
                self.healed = r["time"]

    def _fetched(self, r: dict, v: dict, asked: int) -> None:
        broker, epoch, i = v.get("broker"), v.get("current_leader_epoch"), r["index"]
        committed = v.get("isolation_level") in (1, model.READ_COMMITTED)
        for e in partitions_of(v):
            lso, hwm = e.get("last_stable_offset"), e.get("high_watermark")
            if e.get("error") != "NONE" or type(lso) is not int or type(hwm) is not int or lso < 0:
                continue
            tp = _tp(e.get("topic"), e.get("partition"))
            where = {"topic": e.get("topic"), "partition": e.get("partition"), "broker": broker}
            life_key = (broker, tp, epoch, self.lives.get(broker, 0)) if type(epoch) is int and epoch >= 0 else None
            self._judge_lso_over_hwm(life_key, hwm, i, where)
            if not model.lso_within_hwm(lso, hwm):
                sampled = profiles.get(self.profile).allows(profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ)
                if life_key is not None and sampled:
                    self.lso_over_hwm.setdefault(life_key, []).append((lso, hwm, i))
                else:  # a session fetch names no leader epoch: no later HWM can be matched to it
                    self.out.append(self._lso_over_hwm(lso, hwm, i, where, known=sampled))
            if committed and e.get("batches") is not None:
                self._covered(e, tp, i)
            if committed and e.get("records"):
                self._answered(e, tp, i)
            if committed:
                above = [(rec[0], (self.by_value.get(rec[1]) or (None,))[0]) for rec in e.get("records") or ()
                         if type(rec) is list and len(rec) > 1 and type(rec[0]) is int and rec[0] >= lso]
                if above:  # judged in `finish`, once every transaction's end call is known
                    self.above.append((i, broker, tp, lso, above))
            if type(epoch) is int and epoch >= 0:
                key = (broker, tp, epoch, self.lives.get(broker, 0))
                prev = self.lso.get(key)
                # a follower's HWM may go back once (profile deviation follower-hwm-follows-leader) and
                # drag a capped LSO with it: only an LSO below its own answer's HWM is judged
                if prev is not None and not model.lso_may_follow(prev[0], lso) and lso < hwm:
                    self.out.append(Anomaly("lso-violation", (prev[1], i), f"broker {broker} answered {tp} LSO "
                                            f"{prev[0]} (index {prev[1]}) then {lso} (index {i}) in leader epoch {epoch}",
                                            details={**where, RULE: "transactions.lso_may_follow", "from": prev[0],
                                                     "to": lso, "leader_epoch": epoch}))
                if prev is None or lso >= prev[0]:
                    self.lso[key] = (lso, i)
            if lso < hwm and self._quiet(asked):
                seen = self.held.setdefault(tp, {})
                if lso not in seen or seen[lso][0] < asked:
                    seen[lso] = (asked, i)

    def _quiet(self, asked: int) -> bool:
        """No fault on, and the last heal more than the bound before `asked`."""
        return not self.faults_on and (self.healed is None or asked - self.healed > self.bound_ns)

    def _described(self, r: dict, v: dict, asked: int) -> None:
        """A coordinator's DescribeTransactions answer: each open transaction it names is one
        (producer id, epoch, start time), first seen at its first answer; whether a later answer
        shows it hanging is the model's (`described_hanging`: still Ongoing past the deadline)."""
        i = r["index"]
        for d in v.get("transactions") or ():
            if d.get("error") != "NONE" or type(d.get("timeout_ms")) is not int:
                continue
            key = (d.get("transactional_id"), d.get("producer_id"), d.get("producer_epoch"), d.get("start_time_ms"))
            first = self.described.setdefault(key, (asked, i))
            if first is None or not self._quiet(asked):
                continue
            if model.described_hanging(first[0], d["state"], d["timeout_ms"], self.bound_ns, asked):
                self.described[key] = None
                self.out.append(Anomaly("hanging-transaction", (first[1], i),
                                        f"coordinator {v.get('broker')} described transaction {key[0]} (producer id "
                                        f"{key[1]}, epoch {key[2]}) as Ongoing at index {first[1]} and still "
                                        f"{(asked - first[0]) / 1e9:.1f} s later (index {i}; timeout {d['timeout_ms']} "
                                        f"ms, bound {self.bound_ns / 1e9:.0f} s)",
                                        details={"txn": key[0], "producer_id": key[1], "producer_epoch": key[2],
                                                 "start_time_ms": key[3], "broker": v.get("broker"),
                                                 "partitions": d.get("partitions"), RULE: "transactions.described_hanging"}))

    def _covered(self, e: dict, tp: str, i: int) -> None:
        """Records of transactions in a read_committed answer that its aborted list leaves out
        (judged in `finish`, once the transactions' outcomes are known)."""
        batches = [b for b in e["batches"] if type(b) is list and len(b) == 3]
        aborted = tuple(tuple(a) for a in e.get("aborted_transactions") or () if type(a) is list and len(a) == 2)
        for rec in e.get("records") or ():
            found = self.by_value.get(rec[1]) if type(rec) is list and len(rec) > 1 else None
            pid = next((b[2] for b in batches if b[0] <= rec[0] <= b[1]), None) if found else None
            if pid is not None and not model.aborted_record_covered(pid, rec[0], aborted):
                self.uncovered.append((found[0], i, tp, rec[0], pid))

    def _answered(self, e: dict, tp: str, i: int) -> None:
        """Which transactions a read_committed answer returned records of, and the span it covered."""
        mine: dict = {}
        last = e.get("fetch_offset", 0)
        for rec in e["records"]:
            if type(rec) is list and len(rec) > 1 and type(rec[0]) is int:
                last = max(last, rec[0])
                found = self.by_value.get(rec[1])
                if found:
                    mine.setdefault(found[0], []).append(rec[0])
        for txn, offsets in mine.items():
            self.answers.append((txn, i, tp, e.get("fetch_offset", 0), last, tuple(offsets)))

    @staticmethod
    def _lso_over_hwm(lso: int, hwm: int, i: int, where: dict, known: bool, later: tuple | None = None) -> Anomaly:
        tp = f"{where['topic']}/{where['partition']}"
        return Anomaly("lso-violation", (i,) if later is None else (i, later[1]),
                       f"broker {where['broker']} answered {tp} with LSO {lso} above its high watermark {hwm} "
                       f"(index {i})" + (f", and later HWM {later[0]} (index {later[1]}) of the same leader epoch "
                                         f"and life is below that LSO" if later else ""),
                       known=known, details={**where, RULE: "transactions.lso_within_hwm", "lso": lso, "hwm": hwm,
                                             **({DEVIATIONS: [profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ]} if known else {})})

    def _judge_lso_over_hwm(self, life_key, hwm: int, i: int, where: dict) -> None:
        """`response-lso-sampled-before-read`'s other face: `Partition.readRecords` samples the HWM
        before the LSO, so an answer's LSO may exceed its HWM by what the HWM advanced in between;
        the LSO is still at most the HWM when it was sampled, so every later HWM of that broker
        in the same epoch and life is at least it. One that is lower proves the LSO wrong."""
        for lso, own, j in self.lso_over_hwm.pop(life_key, ()) if life_key is not None else ():
            self.out.append(self._lso_over_hwm(lso, own, j, where, known=hwm >= lso,
                                               later=None if hwm >= lso else (hwm, i)))

    def _lso_answers(self, out: list) -> None:
        """rc answers with records at or above their LSO: allowed only as the profile's sampled LSO."""
        for i, broker, tp, lso, above in self.above:
            offsets = tuple(o for o, _ in above)
            ended = tuple(None if t is None or t not in self.txns else
                          (self.txns[t].end_began is not None and self.txns[t].end_began < i) for _, t in above)
            strict = model.read_committed_offsets_allowed(offsets, lso)
            bad = model.read_committed_offsets_allowed(offsets, lso, ended, _SAMPLED)
            if not strict:
                continue
            wrong = model.read_committed_offsets_allowed(offsets, lso, ended, self.profile)
            known = not wrong
            out.append(Anomaly("lso-violation", (i,), f"read_committed fetch of {tp} from broker {broker} returned "
                               f"offsets {list(strict[:5])} at or above its LSO {lso} (index {i})"
                               + ("" if bad else ", all of transactions whose end was called before the answer"),
                               known=known,
                               details={"topic": tp.rpartition("/")[0], "partition": int(tp.rpartition("/")[2]),
                                        "broker": broker, RULE: "transactions.read_committed_offsets_allowed",
                                        "lso": lso, "offsets": list(strict),
                                        **({DEVIATIONS: [profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ]} if known else {})}))

    def finish(self) -> list[Anomaly]:
        out = self.out
        for (broker, tp, _, _), pending in self.lso_over_hwm.items():  # nothing later contradicted them
            topic, _, partition = tp.rpartition("/")
            where = {"topic": topic, "partition": int(partition), "broker": broker}
            out.extend(self._lso_over_hwm(lso, hwm, j, where, known=True) for lso, hwm, j in pending)
        self.lso_over_hwm = {}
        self._lso_answers(out)
        for name, i, tp, first, last, returned in self.answers:
            txn = self.txns[name]
            if model.transaction_outcome(tuple(txn.commit), tuple(txn.abort)) != model.COMMITTED:
                continue
            offsets = tuple(sorted(o for t, o, _, _ in txn.sends if t == tp and o is not None))
            missing = model.visible_all_or_nothing(offsets, returned, first, last)
            if missing:
                out.append(Anomaly("torn-transaction", (i,), f"read_committed fetch (index {i}) of {tp} covered offsets "
                                   f"{first}-{last} and returned {list(returned[:5])} of committed transaction {name}, "
                                   f"but not its offsets {list(missing[:5])}",
                                   details={"txn": name, "topic_partition": tp, "missing": list(missing),
                                            RULE: "transactions.visible_all_or_nothing", "records": self._records(txn)}))
        for name, i, tp, offset, pid in self.uncovered:
            txn = self.txns[name]
            if model.transaction_outcome(tuple(txn.commit), tuple(txn.abort)) == model.ABORTED:
                out.append(Anomaly("aborted-read", tuple(sorted({i, *(x for x in (txn.end_index,) if x is not None)})),
                                   f"read_committed fetch (index {i}) returned {tp} offset {offset} of aborted "
                                   f"transaction {name} (producer id {pid}) without an aborted-transaction entry "
                                   f"covering it: a consumer would keep it",
                                   details={"txn": name, "outcome": model.ABORTED, "topic_partition": tp,
                                            "offset": offset, "producer_id": pid,
                                            RULE: "transactions.aborted_record_covered", "records": self._records(txn)}))
        for name, txn in self.txns.items():
            outcome = model.transaction_outcome(tuple(txn.commit), tuple(txn.abort))
            if txn.first_read is not None:
                read_index, process, tp, offset = txn.first_read
                what = model.read_committed_verdict(outcome, read_index, txn.commit_began)
                if what:
                    proof = tuple(sorted({read_index, *(x for x in (txn.commit_began, txn.end_index) if x is not None)}))
                    why = ("was aborted" + (f" (index {txn.end_index})" if txn.end_index is not None else "")
                           if what == "aborted-read" else
                           f"had not been asked to commit yet (commit called at index {txn.commit_began})"
                           if txn.commit_began is not None else "was never asked to commit")
                    out.append(Anomaly(what, proof, f"process {process} read {tp} offset {offset} of transaction "
                                       f"{name} read_committed (index {read_index}), but the transaction {why}",
                                       details={"txn": name, "outcome": outcome, RULE: "transactions.read_committed_verdict",
                                                "topic_partition": tp, "offset": offset,
                                                "records": self._records(txn)}))
            if outcome == model.COMMITTED and txn.first_read is not None:
                self._torn(name, txn, out)
            self._hanging(name, txn, outcome, out)
        return out

    @staticmethod
    def _records(txn: _Txn) -> list:
        """The transaction's records across partitions: [tp, offset (None: unknown), read]."""
        return [[tp, off, read] for tp, off, read, _ in txn.sends[:50]]

    def _torn(self, name: str, txn: _Txn, out: list) -> None:
        by_tp: dict[str, tuple[list, set]] = {}
        for tp, off, read, done in txn.sends:
            if off is not None:
                offs, got = by_tp.setdefault(tp, ([], set()))
                offs.append(off)
                if read:
                    got.add(off)
        for tp, (offs, got) in sorted(by_tp.items()):
            top = self.rc_top.get(tp)
            missing = model.torn_offsets(tuple(sorted(offs)), got, top[0] if top else None)
            if missing:
                done = [d for t, o, _, d in txn.sends if t == tp and o in missing and d is not None]
                out.append(Anomaly("torn-transaction", tuple(sorted({txn.first_read[0], top[1], *done[:5]}
                                                                    - {None})),
                                   f"committed transaction {name}: read_committed readers read some of its records "
                                   f"(first at index {txn.first_read[0]}) but never {tp} offsets {list(missing[:5])}, "
                                   f"although they read that partition up to offset {top[0]} (index {top[1]})",
                                   details={"txn": name, "topic_partition": tp, "missing": list(missing),
                                            RULE: "transactions.torn_offsets", "records": self._records(txn)}))

    def _hanging(self, name: str, txn: _Txn, outcome: str, out: list) -> None:
        if txn.first_ack is None or (txn.timeout_ms is None and txn.end_time is None):
            return
        timeout = txn.timeout_ms if txn.timeout_ms is not None else 1 << 40
        for tp, off, _, _ in txn.sends:
            seen = self.held.get(tp, {}).get(off) if off is not None else None
            if seen and model.hanging(txn.first_ack, txn.end_time, timeout, self.bound_ns, seen[0], off, off):
                out.append(Anomaly("hanging-transaction", (seen[1],),
                                   f"transaction {name} ({outcome}) still held {tp}'s LSO at its offset {off} "
                                   f"{(seen[0] - txn.first_ack) / 1e9:.1f} s after its first acknowledged send "
                                   f"(index {seen[1]}; timeout {timeout} ms, bound {self.bound_ns / 1e9:.0f} s)",
                                   details={"txn": name, "topic_partition": tp, "offset": off, "outcome": outcome,
                                            RULE: "transactions.hanging"}))
                return
