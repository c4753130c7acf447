"""KIP-392 "Finding the preferred follower": `preferred-replica-violation`.

The model (`kip392.preferred_read_replica_outcomes`) says which PreferredReadReplica a
broker may answer from a partition state; this rule only builds that state from what the
history proves and reports answers the model does not allow:

* the client's rack comes from the request, every broker's rack from `metadata` answers;
* the leader: the answering broker, unless its own metadata answers on both sides of the
  fetch name another leader for one leader epoch (an epoch has one leader, so the broker
  was a follower throughout, and only a leader selects) — and the epoch the request
  named, when the broker accepted it, is that one (Kafka's `BrokerMetadataPublisher`
  sets the metadata cache's image before `ReplicaManager.applyDelta` moves the
  partition: for a moment the cache runs ahead of the partition's epoch);
* the ISR: every replica, unless the answering broker's own metadata answers around the
  fetch all show the preferred replica out of the ISR or offline (see `isr_proven_without`),
  or every broker's answers do, a chain of them around the fetch with no gap as long as a
  rejoin-and-leave (see `isr_proven_out_by_all`: a killed replica), and no broker showed it
  in an ISR of that leader and epoch before the answer: a leader's
  `Partition` takes the ISR of its own AlterPartition responses, which can run ahead of its
  metadata image for good when it is cut off from the quorum right after (seen live: an
  isolated leader named a rejoined follower for 13 s while its own metadata never showed it
  back; see `isr_seen_with`) — and also without the named replica while its node is down (a fault with `effects.STOPS_NODE`) when the
  answering broker's own metadata showed it offline before the fetch (`offline_while_down`:
  only its own heartbeat brings it back, and a fenced broker has no endpoint to be chosen by),
  or the answering broker leads the epoch that took leadership off it (`displaced_while_down`:
  the electing record drops it from the ISR, and a down node never fetches to rejoin); no
  AlterPartition response puts such a replica back (KIP-841: the controller rejects a fenced
  one, and the leader proposes only replicas that fetched);
* the replicas: those the broker's metadata lists around the fetch, and the named one unless
  no broker's metadata answer of that leader epoch ever listed it (`never_a_replica`) — the
  span's epoch, or without a span the epoch the broker accepted, while no reassignment ran
  (`reassigned_during`);
* log start and LEO of the replicas are never observed: unknown, so any may qualify.

One group holds every consumer fetch and metadata answer; the judge keeps only a compact
tuple per metadata answer, the fault records, and the answers that named a replica.
"""
from __future__ import annotations

import bisect
from typing import Iterable

from kipcheck import effects
from kipcheck.reference_model import kip392
from kipcheck.reference_model.state import PartitionState, Replica

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.observe import as_int, partitions_of

#: The metadata answers that prove a replica out of the ISR must span less than this:
#: a replica that rejoins the ISR leaves it again only after `replica.lag.time.max.ms`
#: (8 s in kipcheck's clusters, 30 s by default) of lag or after being fenced
#: (`broker.session.timeout.ms`, 9 s) — or through a fault, which voids the span.
ISR_SPAN_NS = 6_000_000_000
#: The leader's `Partition` learns an ISR expansion from the AlterPartition response, its
#: metadata cache when it replays the committed record, usually milliseconds later. So
#: the proof also needs an answer invoked at least this long after the fetch completed.
IMAGE_LAG_NS = 1_000_000_000

GROUP = "prr"


class PreferredReplicaRule(BaseRule):
    anomalies = ("preferred-replica-violation",)
    streams = True  # one group, judged as it streams by; `check`/`check_group` are BaseRule's
    one_pass = True
    key = GROUP
    fs = frozenset(("metadata", "fault", "fetch"))

    def group_keys(self, record: dict) -> Iterable[str]:
        f = record.get("f")
        if f in ("metadata", "fault") or (f == "fetch" and as_int((record.get("value") or {}).get("replica_id"), -1) < 0):
            return (GROUP,)
        return ()

    def start(self, key: str, profile: str) -> "_Judge":
        return _Judge()


class _Judge:
    def __init__(self):
        self.racks: dict[int, str] = {}
        # (broker, topic, partition) -> [(invoked, completed, epoch, leader, in_isr, replicas, offline)]
        self.meta: dict[tuple, list[tuple]] = {}
        self.faults: list[int] = []
        self.fault_records: list[tuple] = []  # (time, kind, phase, targets, invoked) of each fault completion
        self.invoked: dict = {}  # (process, f) -> (index, time) of the pending invoke
        self.named: list[tuple] = []  # (indices, invoked, completed, value, entry, preferred)

    def add(self, r: dict) -> None:
        f, v = r["f"], r.get("value") or {}
        k = (r.get("process"), f)
        if f == "fault":
            self.faults.append(r.get("time", 0))
            if r["type"] == "invoke":
                self.invoked[k] = (r["index"], r.get("time", 0))
            else:  # the completion names the targets
                self.fault_records.append((r.get("time", 0), v.get("fault"), v.get("phase"),
                                           frozenset(as_int(b) for b in v.get("targets") or []),
                                           self.invoked.pop(k, (None, r.get("time", 0)))[1], effects.of(v)))
            return
        if r["type"] == "invoke":
            self.invoked[k] = (r["index"], r.get("time", 0))
            return
        inv_index, inv_time = self.invoked.pop(k, (r["index"], r.get("time", 0)))
        if r["type"] != "ok":
            return
        indices = tuple(sorted({inv_index, r["index"]}))
        if f == "metadata":
            for b, rack in (v.get("racks") or {}).items():
                if rack and as_int(b) is not None:
                    self.racks[int(b)] = rack
            epoch = as_int(v.get("leader_epoch"), -1)
            if epoch >= 0 and v.get("error", "NONE") == "NONE":
                offline = frozenset(as_int(b) for b in v.get("offline") or [])
                in_isr = frozenset(as_int(b) for b in v.get("isr") or [] if as_int(b) not in offline)
                replicas = tuple(as_int(b) for b in v.get("replicas") or [])
                self.meta.setdefault((v.get("broker"), v.get("topic"), v.get("partition")), []).append(
                    (inv_time, r.get("time", 0), epoch, as_int(v.get("leader"), -1), in_isr, replicas, offline))
            return
        if v.get("top_error", "NONE") not in ("NONE", None):
            return
        for e in partitions_of(v):
            pref = as_int(e.get("preferred_read_replica"), -1)
            if not e.get("omitted") and pref >= 0:  # kept without the records it returned
                request = {k: v.get(k) for k in ("broker", "rack", "current_leader_epoch")}
                answer = {"topic": e.get("topic"), "partition": e.get("partition"),
                          "fetch_offset": e.get("fetch_offset"), "error": e.get("error", "NONE")}
                self.named.append((indices, inv_time, r.get("time", 0), request, answer, pref))

    def finish(self) -> list[Anomaly]:
        # (topic, partition, epoch, leader, replica) -> the first completion of any broker's answer
        # showing that replica in that leader's ISR in that epoch (`isr_seen_with`)
        self.first_in_isr: dict[tuple, int] = {}
        # (topic, partition, epoch) -> every broker any answer listed as a replica in that epoch
        self.replicas_in_epoch: dict[tuple, set[int]] = {}
        # (topic, partition) -> every broker's answers, by completion (`isr_proven_out_by_all`)
        self.by_partition: dict[tuple, list[tuple]] = {}
        # (topic, partition, epoch, leader) -> when answers naming that leader were asked, and
        # (topic, partition, epoch) -> the first replica of each answer (`displaced_while_down`)
        self.leader_seen: dict[tuple, list[int]] = {}
        self.first_replicas: dict[tuple, set[int]] = {}
        # (topic, partition, epoch) -> when the first answer listing replicas was asked
        self.epoch_first_asked: dict[tuple, int] = {}
        for (_, topic, partition), answers in self.meta.items():
            self.by_partition.setdefault((topic, partition), []).extend(answers)
            answers.sort(key=lambda a: a[1])
            for asked, done, epoch, leader, in_isr, replicas, _ in answers:
                for replica in in_isr:
                    key = (topic, partition, epoch, leader, replica)
                    self.first_in_isr[key] = min(done, self.first_in_isr.get(key, done))
                if replicas:
                    self.replicas_in_epoch.setdefault((topic, partition, epoch), set()).update(replicas)
                    self.first_replicas.setdefault((topic, partition, epoch), set()).add(replicas[0])
                    key = (topic, partition, epoch)
                    self.epoch_first_asked[key] = min(asked, self.epoch_first_asked.get(key, asked))
                self.leader_seen.setdefault((topic, partition, epoch, leader), []).append(asked)
        for answers in self.by_partition.values():
            answers.sort(key=lambda a: a[1])
        for asked in self.leader_seen.values():
            asked.sort()
        self.fault_spans = self._fault_spans()
        self.faults.sort()
        out = []
        for indices, invoked, completed, v, e, pref in self.named:
            a = self._judge(indices, invoked, completed, v, e, pref)
            if a:
                out.append(a)
        return out

    # -- building the state the history proves ---------------------------------------------
    def _around(self, broker, topic, partition, invoked: int, completed: int):
        """The broker's metadata answers for the partition from the last one completed
        before `invoked` to the first one invoked `IMAGE_LAG_NS` after `completed`
        (None when either end is missing)."""
        answers = self.meta.get((broker, topic, partition), [])
        done = [a[1] for a in answers]
        i = bisect.bisect_left(done, invoked) - 1
        if i < 0:
            return None
        for j in range(i + 1, len(answers)):
            if answers[j][0] > completed + IMAGE_LAG_NS:
                return answers[i:j + 1]
        return None

    def leader_proven(self, span) -> int | None:
        """The leader the answering broker named throughout, when its first and last
        answers of the span are one leader epoch (epochs on a broker never go back)."""
        first, last = span[0], span[-1]
        if first[2] == last[2] and first[3] == last[3] and first[3] >= 0:
            return first[3]
        return None

    def isr_proven_without(self, span, replica: int) -> bool:
        """`replica` was out of the leader's ISR (or offline) during the whole span: every
        answer shows it out, all in one leader epoch, within `ISR_SPAN_NS`, and no fault
        happened in between (a fault could have let it in and out again)."""
        start, end = span[0][0], span[-1][1]
        if end - start >= ISR_SPAN_NS or any(a[2] != span[0][2] for a in span) or self.fault_between(start, end):
            return False
        return all(replica not in a[4] for a in span)

    def fault_between(self, start: int, end: int) -> bool:
        k = bisect.bisect_left(self.faults, start)
        return k < len(self.faults) and self.faults[k] <= end

    def _fault_spans(self) -> list[tuple]:
        """(start, end, effects, targets, start_invoked, stop_invoked) of each fault: from the
        completion of its start to the completion of its stop (same kind and targets; `heal-all`
        stops all), or to the end of the history; the invoke times of both besides."""
        spans, running = [], {}
        for t, kind, phase, targets, invoked, fx in sorted(self.fault_records, key=lambda x: x[0]):
            if phase == "start":
                running.setdefault((kind, targets), (t, invoked, fx))
            elif kind == "heal-all":
                spans += [(s, t, sfx, ts, si, invoked) for (_, ts), (s, si, sfx) in running.items()]
                running.clear()
            elif (kind, targets) in running:
                s, si, sfx = running.pop((kind, targets))
                spans.append((s, t, sfx, targets, si, invoked))
        inf = float("inf")
        return spans + [(s, inf, sfx, ts, si, inf) for (_, ts), (s, si, sfx) in running.items()]

    def other_fault_running(self, start: int, end: int, replica: int) -> bool:
        """Whether a fault other than one on `replica`'s own node alone (`effects.OWN_NODE`) ran
        at some time in [start, end]: while only such a fault runs, the leader is not cut off from
        the controller by it, so other brokers' metadata answers still say what the leader replays."""
        return any(s <= end and e >= start and not (effects.OWN_NODE in fx and ts == {replica})
                   for s, e, fx, ts, *_ in self.fault_spans)

    def down_throughout(self, replica: int, since: int, until: int) -> float | None:
        """When the fault keeping `replica`'s node down (`effects.STOPS_NODE`) from `since` to `until`
        was invoked: its start completed by `since` and its stop was not invoked before `until`
        (None: no such fault)."""
        return next((si for s, _, fx, ts, si, stop in self.fault_spans
                     if effects.STOPS_NODE in fx and replica in ts and s <= since and stop >= until), None)

    def offline_while_down(self, broker, topic, partition, replica: int, invoked: int, completed: int) -> bool:
        """`broker`'s own metadata answer, completed before the fetch was invoked, showed `replica`
        offline (`KRaftMetadataCache`: fenced, unregistered, or its log directory offline), and
        its node was down from `IMAGE_LAG_NS` before that answer was asked (a heartbeat it sent
        before going down is answered within it) until the fetch completed. The cache's image only
        moves forward, and only the replica's own heartbeat (`BrokerHeartbeatManager`) or
        registration brings it back, so the cache still showed it offline at the fetch:
        `ReplicaManager.findPreferredReadReplica` takes endpoints from that cache
        (`getPartitionReplicaEndpoints` skips fenced and unknown brokers), and the controller drops
        a replica from every ISR before fencing it or marking its directory offline."""
        answers = self.meta.get((broker, topic, partition), [])
        i = bisect.bisect_left([a[1] for a in answers], invoked) - 1  # its last answer before the fetch
        return i >= 0 and replica in answers[i][6] and self.down_throughout(
            replica, answers[i][0] - IMAGE_LAG_NS, completed) is not None

    def displaced_while_down(self, topic, partition, epoch: int, leader: int, replica: int,
                             invoked: int, completed: int) -> bool:
        """`leader`'s `epoch` took leadership off `replica` after its node went down, and it stayed
        down until the fetch completed, so it was out of every ISR of `epoch`. Proven when an
        answer of any broker showed `replica` leading `epoch - 1`, no answer of either epoch lists
        `leader` first among the replicas (a preferred election moves leadership only to the first
        replica, keeping the old leader in the ISR), and no fault but the one keeping `replica`
        down ran from `IMAGE_LAG_NS` before that answer was asked (its cache may lag a replay) to
        the fetch: a live leader keeps its controller session, so only its node going down made
        the controller move leadership, and `ReplicationControlManager.generateLeaderAndIsrUpdates`
        drops a fenced or shutting-down leader from the ISR in the electing record. Nothing puts
        it back: `Partition.maybeExpandIsr` runs on the replica's own fetches."""
        down = self.down_throughout(replica, invoked, completed)
        led = self.leader_seen.get((topic, partition, epoch - 1, replica), [])
        k = bisect.bisect_right(led, invoked)  # the answers asked before the fetch
        firsts = self.first_replicas.get((topic, partition, epoch - 1), set()) | self.first_replicas.get(
            (topic, partition, epoch), set())
        if down is None or not k or not firsts or leader in firsts:
            return False
        since = led[k - 1] - IMAGE_LAG_NS
        return not (self.fault_between(since, down - 1) or self.other_fault_running(since, completed, replica))

    def isr_proven_out_by_all(self, topic, partition, epoch: int | None, leader: int, replica: int,
                              invoked: int, completed: int) -> bool:
        """`replica` was out of `leader`'s ISR (or offline) in `epoch` while the fetch was
        answered, by every broker's metadata answers for the partition (a killed replica: the
        controller fenced it; the leader's own answers may be missing or sparse). A chain of
        answers, from one completed `IMAGE_LAG_NS` before the fetch was invoked (the leader
        replays what another broker's cache shows later than it does) to one invoked
        `IMAGE_LAG_NS` after it completed, every answer between them of `epoch` under
        `leader` showing it out, consecutive answers less than `ISR_SPAN_NS` apart (a rejoin
        stays in the ISR at least `replica.lag.time.max.ms` or until fenced, so every cache
        would show it in some answer of the chain), no fault record in the chain's span, and
        no fault running during it but one on the replica's own node alone (a fault that cuts
        the leader off from the controller freezes its image while the others' move on)."""
        if epoch is None:
            return False
        answers = self.by_partition.get((topic, partition), [])
        done = [a[1] for a in answers]
        i = bisect.bisect_right(done, invoked - IMAGE_LAG_NS) - 1
        if i < 0:
            return False
        prev = None
        for a in answers[i:]:
            if a[2] != epoch or a[3] != leader or replica in a[4]:
                return False
            if prev is not None and a[1] - prev[0] >= ISR_SPAN_NS:
                return False
            if a[0] >= completed + IMAGE_LAG_NS:
                return not (self.fault_between(answers[i][0], a[1])
                            or self.other_fault_running(answers[i][0] - IMAGE_LAG_NS, a[1], replica))
            prev = a
        return False

    def isr_seen_with(self, topic, partition, epoch: int, leader: int, replica: int, before: int) -> bool:
        """Whether any broker's metadata answer completed before `before` showed `replica` in
        the ISR of `topic`/`partition` in `epoch` under `leader`: a committed ISR of that epoch,
        which the leader may hold from its own AlterPartition response. The history carries no
        partition epochs to order committed ISRs, so any of that epoch may be the one it holds."""
        first = self.first_in_isr.get((topic, partition, epoch, leader, replica))
        return first is not None and first < before

    def reassigned_during(self, start: float, end: float) -> bool:
        """Whether a fault that moves replicas (`effects.MOVES_REPLICAS`; nothing else in kipcheck's
        clusters changes a partition's replica set) ran at some time in [start, end], from the
        invoke of its start (the reassignment is written before the start completes)."""
        return any(si <= end and e >= start and effects.MOVES_REPLICAS in fx for _, e, fx, _, si, _ in self.fault_spans)

    def never_a_replica(self, topic, partition, epoch: int, replica: int) -> bool:
        """No metadata answer of any broker in `epoch` listed `replica` among the partition's
        replicas, and some answer listed them: a reassignment that adds or drops it shows it
        in some answer of the epoch, so only a broker that never was one is proven so."""
        listed = self.replicas_in_epoch.get((topic, partition, epoch))
        return listed is not None and replica not in listed

    def _judge(self, indices, invoked, completed, v, e, pref) -> Anomaly | None:
        broker, topic, partition = as_int(v.get("broker")), e.get("topic"), e.get("partition")
        client_rack = v.get("rack") or None
        if broker is None:
            return None
        # an unknown rack may be any: the client's for the named replica, another for the broker
        racks = {**self.racks}
        racks.setdefault(pref, client_rack)
        racks.setdefault(broker, None)
        span = self._around(v.get("broker"), topic, partition, invoked, completed)
        leader = self.leader_proven(span) if span else None
        cle = as_int(v.get("current_leader_epoch"), -1)
        if leader is not None and cle >= 0 and e.get("error", "NONE") == "NONE" and cle != span[0][2]:
            # Kafka accepted the request's epoch, so its `Partition` was in epoch `cle`, not
            # (yet) in the one its metadata cache showed: the leader of `cle` is not proven
            leader = None
        leader = broker if leader is None else leader
        one_epoch = span[0][2] if span and all(a[2] == span[0][2] for a in span) else None
        # the leader epoch the answer was made in: the request's when accepted, else the span's
        epoch = cle if cle >= 0 and e.get("error", "NONE") == "NONE" else one_epoch
        # not a replica in the span's epoch, or without a span in the epoch the broker accepted (its
        # `Partition` was in it): within one leader epoch the replica set only grows (a reassignment
        # that drops a replica bumps the epoch: `PartitionChangeBuilder.
        # triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`), and one adding it after the epoch's
        # answers were made is a fault running from a replay before the first of them to the fetch
        replica_epoch = one_epoch if span else epoch
        not_one = replica_epoch is not None and self.never_a_replica(topic, partition, replica_epoch, pref)
        if not_one and not span:
            first = self.epoch_first_asked[(topic, partition, replica_epoch)]
            not_one = not self.reassigned_during(first - IMAGE_LAG_NS, completed)
        listed = self.replicas_in_epoch.get((topic, partition, epoch), set()) if not span else set()
        replicas = set(a for s in (span or ()) for a in s[5]) | listed | {broker, leader} | (set() if not_one else {pref})
        own = bool(span) and self.isr_proven_without(span, pref)
        by_all = not own and self.isr_proven_out_by_all(topic, partition, epoch, leader, pref, invoked, completed)
        if (own or by_all) and self.isr_seen_with(
                topic, partition, span[0][2] if own else epoch, leader, pref, completed + IMAGE_LAG_NS):
            own = by_all = False
        fenced = self.offline_while_down(v.get("broker"), topic, partition, pref, invoked, completed)
        displaced = not fenced and leader == broker and epoch is not None and self.displaced_while_down(
            topic, partition, epoch, leader, pref, invoked, completed) and not self.isr_seen_with(
            topic, partition, epoch, leader, pref, completed + IMAGE_LAG_NS)
        isr = frozenset(replicas - {pref}) if own or by_all or fenced or displaced else frozenset(replicas)
        state = PartitionState(leader, span[0][2] if span else 0, isr, tuple(
            Replica(b, racks.get(b), log_start=None, leo=None, hwm=None) for b in sorted(replicas)))
        offset = as_int(e.get("fetch_offset"), 0)
        allowed = kip392.preferred_read_replica_outcomes(state, broker, -1, client_rack, offset)
        if pref in allowed:
            return None
        facts = [f"client rack {client_rack!r}", f"broker racks {dict(sorted(self.racks.items()))}"]
        if leader != broker:
            facts.append(f"broker {broker}'s own metadata names leader {leader} in epoch {span[0][2]} around the answer")
        if not_one:
            facts.append(f"no metadata answer in epoch {replica_epoch} lists {pref} among the replicas "
                         f"{sorted(self.replicas_in_epoch[(topic, partition, replica_epoch)])}")
        elif pref not in isr and fenced:
            facts.append(f"broker {broker}'s metadata showed {pref} offline before the answer, "
                         f"while {pref}'s node was down until after it")
        elif pref not in isr and displaced:
            facts.append(f"{pref} led epoch {epoch - 1} and its node went down before epoch {epoch} "
                         f"moved leadership to {broker}, and stayed down until after the answer")
        elif pref not in isr and by_all:
            facts.append(f"every broker's metadata shows {pref} out of the ISR or offline in epoch {epoch} around the answer")
        elif pref not in isr:
            facts.append(f"broker {broker}'s metadata shows {pref} out of the ISR or offline around the answer")
        return Anomaly("preferred-replica-violation", indices,
                       f"broker {broker} sent preferred read replica {pref} for {topic}/{partition}, which KIP-392 "
                       f"does not allow ({'; '.join(facts)}; allowed: {sorted(allowed)})",
                       details={"topic": topic, "partition": partition, "preferred_read_replica": pref,
                                "client_rack": client_rack, "leader": leader, "allowed": sorted(allowed),
                                RULE: "kip392.preferred_read_replica_outcomes"})
