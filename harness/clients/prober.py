"""The raw-protocol prober: Fetch, ListOffsets and OffsetsForLeaderEpoch straight to each replica.

It asks the questions the KIPs answer and clients never ask on purpose:
- KIP-392: consumer fetches (replica id -1) with a rack id, to the leader (which may
  name a preferred read replica) and to followers, at offsets chosen around the HWM, at batch edges and at the log start,
  between a follower's HWM and the leader's (case 1 on an in-sync follower), far above
  the log end and below the log start (cases 1-4).
- KIP-227: a full fetch session, incremental fetches with and without changes, a wrong
  epoch, an unknown session id, a forgotten partition, and a close by ID/-1.
- KIP-1023: ListOffsets with timestamps -1 to -6 (on a tiered topic -4..-6 mean something).
- KIP-392: OffsetsForLeaderEpoch with replica id -1, to leaders and followers.
- KIP-932 (a share workload's run only): a share session of the prober's own share-group member,
  with a wrong epoch, an acknowledgement, a close and the closed session asked again
  (harness.clients.share_prober).
- KIP-664: ListTransactions to every broker, then DescribeTransactions of the open ones to the
  broker that listed them (their coordinator): how long the coordinator has kept each open.

Every request is one history operation (docs/history.md `fetch`, `list_offsets`,
`offsets_for_leader_epoch`): an answered request is `ok` whatever its error code, a lost
connection or timeout is `info`, after which the prober continues as a new process.
An exception of the prober itself (a response it cannot decode, a bug) ends that one
operation `info` with the exception's name in `error`, its traceback goes to the harness
log (harness.runlog), and the prober reconnects as a new process: it never ends the run.
Probes the cluster cannot answer (an API or a version its ApiVersions lack) are left out,
and named in config.json `skipped` (harness.clients.capabilities).
"""
from __future__ import annotations

import itertools
import random
import threading
import time

from kafka.protocol.admin import DescribeTransactionsRequest, ListTransactionsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest

from kipcheck.rundir.writer import History
from kipcheck.harness.runlog import internal_error
from kipcheck.harness.clients.wire import BrokerConnection, MetadataView, UnsupportedVersion, WireError, decode_fetched, \
    error_name, first_batch_bytes, metadata
from kipcheck.harness.clients.workload import Worker

FETCH_MIN_VERSION = 11  # KIP-392: rack id and preferred read replica
LIST_OFFSETS_TIMESTAMPS = (-1, -2, -3, -4, -5, -6)  # latest .. earliest pending upload (KIP-1023)
#: ListOffsets by a real timestamp asks for the first offset stamped at or after this long before now
#: (ms): with steady sends, an offset in the log's middle; under a skewed leader, anywhere
BY_TIME_LOOKBACK_MS = (500, 2000, 8000)
ISOLATION = {0: "read_uncommitted", 1: "read_committed"}
#: how long the settled round asks again for a withheld largest-timestamp answer, and how often
SETTLE_S, SETTLE_PAUSE_S = 20.0, 0.5
FAR_ABOVE = 1_000_000_000  # KIP-392 case: above both HWM and LEO
PARTITION_MAX_BYTES = 16384
MAX_BYTES = 1 << 20
#: the size limits every consumer fetch asks (the invoke records them: KIP-227 "Handling
#: Partition Size Limits" judges an incremental response by them)
LIMITS = {"max_bytes": MAX_BYTES, "partition_max_bytes": PARTITION_MAX_BYTES}
UNKNOWN = {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "preferred_read_replica": -1,
           "records": []}


class Indeterminate(Exception):
    """An operation ended `info`: the process must not issue anything more."""


class Prober(Worker):
    """Cycles through probe rounds over `topics` until stopped, one request at a time."""

    def __init__(self, bootstrap: str, topics: list[str], history: History, stop: threading.Event,
                 pause: float = 0.05, seed: int = 0, timeout: float = 5.0, skip: frozenset[str] = frozenset(),
                 share_group: str | None = None):
        super().__init__("prober", history, stop)
        self.share_group = share_group  # the run's share group (a share workload), else None
        self.skip = skip  # probe rounds the cluster cannot answer (see harness.clients.capabilities)
        self.bootstrap = [a for a in bootstrap.split(",") if a]
        self.topics, self.pause, self.timeout = list(topics), pause, timeout
        self.random = random.Random(seed)
        self.probes = 0
        self.process = history.new_process()
        self._connections: dict[int, BrokerConnection] = {}
        self._opened = itertools.count(1)  # numbers the connections it opens, for the records that name them
        self._view: MetadataView | None = None
        self._hwm: dict[tuple, int] = {}  # (broker, topic, partition) -> last HWM it reported
        self._log_start: dict[tuple, int] = {}  # (topic, partition) -> last log start offset seen
        self.skipped: dict[str, str] = {}  # probe -> why no broker was asked it (a release lacks it)

    # -- the loop ----------------------------------------------------------------------
    def rounds(self):
        # a share workload's run asks share sessions second: its first round waits on the group's share state
        every = [self.kip392_cases, *([self.share_session] if self.share_group else []), self.fetch_session,
                 self.list_offsets, self.offsets_for_leader_epoch, self.read_committed, self.transactions]
        return [r for r in every if r.__name__ not in self.skip]

    def work(self):
        try:
            rounds = self.rounds()
            for n in itertools.count():
                if self.stop_event.is_set() or not rounds:
                    return
                self.run_round(rounds[n % len(rounds)])
                self.stop_event.wait(self.pause)
        finally:
            self.close()

    def settled_round(self, within: float = SETTLE_S) -> None:
        """ListOffsets on every partition, after the workload has stopped (`list_offsets`), asked
        again on a partition until its largest-timestamp answer is decided, for `within` seconds.
        Under load the record with the largest timestamp is mostly the newest, above the HWM, and
        the leader withholds it (offset -1: 17 of 22 answers in a 40 s run of 4.3.1, 2026-11-28);
        settled, the followers catch up, the HWM passes it and the answer names it, for the final
        reads to stamp (KIP-734). A loaded machine may need a second ask (2026-11-29: one ask,
        withheld, left a run `unknown`)."""
        if "list_offsets" in self.skip:
            return
        deadline = time.monotonic() + within
        pending = self.partitions()
        while pending is None and time.monotonic() < deadline:
            time.sleep(SETTLE_PAUSE_S)  # no broker answered Metadata: asked again
            pending = self.partitions()
        while pending:
            pending = [key for key in pending if not self.run_round(self.list_offsets, key)]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(SETTLE_PAUSE_S)
        self.close()

    def partitions(self) -> list[tuple[str, int]] | None:
        """The probed topics' partitions, from a fresh view (None when no broker answers)."""
        try:
            self.refresh()
        except (WireError, UnsupportedVersion):
            return None
        return sorted(key for key in self._view.partitions if key[0] in self.topics)

    def run_round(self, probe, key=None):
        """Run one probe (on `key`, or a partition drawn by the seed) on a fresh view of the
        partitions; what the probe returns (None when it failed); an `info` starts a new process."""
        try:
            self.refresh()
            targets = [key] if key is not None else sorted(k for k in self._view.partitions if k[0] in self.topics)
            if targets:
                return probe(self.random.choice(targets))
        except Indeterminate:
            self.process = self.history.new_process()
            self.close()
        except (WireError, UnsupportedVersion):
            self.close()  # an unrecorded lookup failed: nothing to record, try again later
            self.stop_event.wait(0.5)
        except Exception as e:  # our own bug outside a request (every request is closed by `call`)
            internal_error(self.name, f"round {probe.__name__} failed; reconnecting", e)
            self.process = self.history.new_process()
            self.close()
            self.stop_event.wait(0.5)

    def refresh(self) -> None:
        errors = []
        for address in self._addresses():
            try:
                with BrokerConnection(address, timeout=self.timeout) as conn:
                    self._view = metadata(conn, self.topics)
                    return
            except (WireError, UnsupportedVersion) as e:
                errors.append(str(e))
        raise WireError("no broker answered Metadata: " + "; ".join(errors))

    def _addresses(self) -> list[str]:
        known = [addr for addr, _ in self._view.brokers.values()] if self._view else []
        return list(dict.fromkeys([*known, *self.bootstrap]))

    def connection(self, broker: int) -> BrokerConnection:
        conn = self._connections.get(broker)
        if conn is None:
            conn = BrokerConnection(self._view.brokers[broker][0], timeout=self.timeout)
            conn.number = next(self._opened)
            self._connections[broker] = conn
        return conn

    def connection_number(self, broker: int) -> int:
        """The number of the connection to `broker` the next request goes on (opening it if none is):
        KIP-932's leader drops a share session when the connection that opened it closes."""
        return self.connection(broker).number

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def speaks(self, broker: int, message_class, lowest: int, probe: str) -> bool:
        """Whether `broker` (its ApiVersions) answers `message_class` at version `lowest` or newer.

        A probe of a feature the broker's release lacks (e.g. ListOffsets -6 before KIP-1023's
        v11) is not made at all, so absence is never recorded as a failed request; it is noted
        once in `skipped`. A lost connection here raises WireError (nothing was recorded)."""
        try:
            self.connection(broker).version_for(message_class, lowest)
            return True
        except UnsupportedVersion as e:
            self.skipped.setdefault(probe, str(e))
            return False

    def rack_of(self, broker: int) -> str | None:
        return self._view.brokers.get(broker, (None, None))[1]

    def call(self, f: str, value: dict, broker: int, send):
        """Invoke, send via `send(conn)`, complete: ok with `send`'s fields, info on a lost answer."""
        op = self.history.invoke(self.process, f, value)
        try:
            extra = send(self.connection(broker))
        except (WireError, OSError) as e:
            self._connections.pop(broker, None)
            op.info(error=str(e)[:200])
            raise Indeterminate from None
        except UnsupportedVersion as e:  # checked before anything was written
            op.fail(error=str(e))
            return None
        except Exception as e:  # the request may have been sent: indeterminate, and our bug to debug
            # its connection is closed with the others by run_round
            op.info(error=internal_error(self.name, f"{f} to broker {broker} failed", e), internal=True)
            raise Indeterminate from None
        self.probes += 1
        return op.ok(**extra)["value"]

    # -- KIP-392 ---------------------------------------------------------------------
    def kip392_cases(self, key) -> None:
        """Consumer fetches around one partition's HWM, on the leader and each follower."""
        state = self._view.partitions[key]
        followers = [b for b in state.replicas if b != state.leader and b in self._view.brokers]
        if state.leader < 0:
            return
        for follower in followers:
            rack = self.rack_of(follower)
            start = max(self._log_start.get(key, 0), self._hwm.get((state.leader, *key), 0) - 20)
            # the leader, asked by a client in the follower's rack, should name that follower
            self.fetch_batch_edge(state.leader, key, self.fetch_one(state.leader, key, start, rack, state.leader_epoch),
                                  rack, state.leader_epoch)
            answer = self.fetch_one(follower, key, start, rack, state.leader_epoch)
            self.fetch_batch_edge(follower, key, answer, rack, state.leader_epoch)
            self.fetch_one(follower, key, FAR_ABOVE, rack, state.leader_epoch)  # above both HWM and LEO (case 4)
            hwm = answer and answer.get("high_watermark", -1)
            if hwm is None or hwm < 0:
                continue
            # at the HWM and just above it (often below the follower's LEO)
            for offset in (hwm, hwm + 1, hwm + 5):
                self.fetch_one(follower, key, offset, rack, state.leader_epoch)
            # KIP-392 case 1 on an in-sync follower: between its HWM and the leader's HWM now (its LEO
            # reached the leader's HWM while it is in the ISR), so never out of range
            lead = self.fetch_one(state.leader, key, hwm, None, state.leader_epoch)
            leader_hwm = (lead or {}).get("high_watermark", -1)
            if lead and lead.get("error") == "NONE" and leader_hwm > hwm + 1:
                for offset in ((hwm + leader_hwm) // 2, leader_hwm - 1):
                    self.fetch_one(follower, key, offset, rack, state.leader_epoch)
            log_start = self._log_start.get(key, 0)
            # a client in the follower's rack re-reading from the log start: the follower holds that
            # offset whether or not it is in the ISR, so only the ISR may rule it out (KAFKA-14372)
            self.fetch_one(state.leader, key, log_start, rack, state.leader_epoch)
            self.fetch_one(follower, key, log_start, rack, state.leader_epoch)  # on a tiered topic: remote data
            if log_start > 0:
                self.fetch_one(follower, key, log_start - 1, rack, state.leader_epoch)
        self.fetch_one(state.leader, key, self._hwm.get((state.leader, *key), 0), None, state.leader_epoch)

    def read_committed(self, key) -> None:
        """KIP-98: read_committed fetches of one partition's last records, on the leader and
        each follower; the answers carry the LSO, the aborted transactions and the
        transactional batches (with their producer ids)."""
        state = self._view.partitions[key]
        if state.leader < 0:
            return
        start = max(self._log_start.get(key, 0), self._hwm.get((state.leader, *key), 0) - 50)
        for broker in [state.leader, *(b for b in state.replicas if b != state.leader and b in self._view.brokers)]:
            self.fetch_batch_edge(broker, key, self.fetch_one(broker, key, start, None, state.leader_epoch, isolation=1),
                                  None, state.leader_epoch, isolation=1)

    # -- KIP-932 ---------------------------------------------------------------------
    def share_session(self, key) -> None:
        """One share session's life, as a member of the prober's own share group (`key` is unused:
        the coordinator decides which partitions the member fetches)."""
        from kipcheck.harness.clients.share_prober import ShareSessionRound, prober_group
        ShareSessionRound(self, prober_group(self.share_group)).run()

    # -- KIP-664: the coordinators' own view of open transactions ---------------------------
    def transactions(self, key) -> None:
        """ListTransactions to each broker (it lists those it coordinates), then DescribeTransactions
        of the ones not yet ended, to the same broker. The describe names a transaction by producer
        id, epoch and start time, so the checker can tell how long one stayed open (`hanging-transaction`).
        `key` is unused: the coordinators' state is not per partition."""
        for broker in sorted(self._view.brokers):
            if not self.speaks(broker, ListTransactionsRequest, 0, "KIP-664 ListTransactions"):
                continue
            listed = self.call("list_transactions", {"broker": broker}, broker, _list_transactions)
            open_ids = sorted(t for t, _, state in (listed or {}).get("transactions", []) if state not in ENDED)
            if open_ids and self.speaks(broker, DescribeTransactionsRequest, 0, "KIP-664 DescribeTransactions"):
                self.call("describe_transactions", {"broker": broker, "transactional_ids": open_ids}, broker,
                          lambda conn: _describe_transactions(conn, open_ids))

    def fetch_one(self, broker: int, key, offset: int, rack: str | None, leader_epoch: int,
                  isolation: int = 0) -> dict | None:
        """One sessionless consumer fetch of one partition; returns the completion value."""
        topic, partition = key
        value = {"broker": broker, "replica_id": -1, "rack": rack, "session_id": 0, "session_epoch": -1,
                 "current_leader_epoch": leader_epoch, "topic": topic, "partition": partition, "fetch_offset": offset,
                 **LIMITS, **({"isolation_level": ISOLATION[isolation]} if isolation else {})}
        request = self._fetch_request(0, -1, [(topic, partition, offset)], [], rack, leader_epoch, isolation)

        def send(conn):
            version = conn.version_for(FetchRequest, FETCH_MIN_VERSION)
            response = conn.request(request, version)
            entries = self._entries(broker, response, [(topic, partition, offset)], incremental=False,
                                    isolation=isolation)
            return {"version": version, "top_error": error_name(response.error_code),
                    "response_session_id": response.session_id, **{k: v for k, v in entries[0].items()
                                                                   if k not in ("topic", "partition", "fetch_offset")}}

        return self.call("fetch", value, broker, send)

    def fetch_batch_edge(self, broker: int, key, answer: dict | None, rack: str | None, leader_epoch: int,
                         isolation: int = 0) -> None:
        """A fetch at the last offset of the batch before the first one `answer` returned (a raw
        answer starts at a batch's base offset). Kafka returns whole batches, so a read that starts
        past its fetch offset shows only there, where the next offset opens a new batch (poll-skip)."""
        records = (answer or {}).get("records") or []
        if answer and answer.get("error") == "NONE" and records and records[0][0] - 1 >= self._log_start.get(key, 0):
            self.fetch_one(broker, key, records[0][0] - 1, rack, leader_epoch, isolation)

    # -- KIP-227 ---------------------------------------------------------------------
    def fetch_session(self, key) -> None:
        """One session's life on one replica of `key`, covering every row of KIP-227's table
        and both session errors."""
        state = self._view.partitions[key]
        brokers = [b for b in state.replicas if b in self._view.brokers]
        if not brokers:
            return
        broker = self.random.choice(brokers)
        rack = self.rack_of(broker)
        parts = sorted(k for k, s in self._view.partitions.items() if k[0] in self.topics and broker in s.replicas)
        offsets = {k: max(self._log_start.get(k, 0), self._hwm.get((broker, *k), 0) - 5) for k in parts}
        full = self.session_fetch(broker, rack, 0, 0, offsets, offsets)  # new session (0/0)
        session_id = full and full.get("response_session_id", 0)
        if not session_id:
            return
        epoch = 1
        self.session_fetch(broker, rack, session_id, epoch, offsets, {})  # nothing changed
        epoch += 1
        moved = self._advance(broker, offsets, full)
        self.session_fetch(broker, rack, session_id, epoch, offsets, moved)  # new fetch offsets
        epoch += 1
        self.session_fetch(broker, rack, session_id, epoch + 7, offsets, {})  # wrong epoch
        self.session_fetch(broker, rack, session_id, epoch, offsets, {})  # the session survives it
        epoch += 1
        self.session_fetch(broker, rack, self._stranger(session_id), 1, offsets, {})  # unknown id
        if len(parts) > 1:
            forgotten = parts[-1]
            self.session_fetch(broker, rack, session_id, epoch, offsets, {}, forgotten=[forgotten])
            offsets.pop(forgotten)
            epoch += 1
        self.session_fetch(broker, rack, session_id, -1, offsets, offsets)  # close: ID/-1
        self.session_fetch(broker, rack, session_id, epoch, offsets, {})  # the closed session is gone

    @staticmethod
    def _stranger(session_id: int) -> int:
        """A session id the broker never gave out (ids are positive int32)."""
        return (session_id + 0x2545F491) % 0x7FFFFFFF or 1

    def _advance(self, broker, offsets: dict, answer: dict | None) -> dict:
        """Move each partition's fetch offset past what the last answer returned."""
        moved = {}
        for e in (answer or {}).get("partitions", []):
            k = (e["topic"], e["partition"])
            if e.get("records") and k in offsets:
                offsets[k] = e["records"][-1][0] + 1
                moved[k] = offsets[k]
        return moved

    def session_fetch(self, broker: int, rack, session_id: int, epoch: int, session: dict, sent: dict,
                      forgotten: list | None = None) -> dict | None:
        """A fetch in a session: `sent` are the partitions in the request, `session` all of
        the session's partitions with their fetch offsets (the completion covers them all)."""
        sent_list = [(t, p, o) for (t, p), o in sorted(sent.items())]
        # each sent partition names the leader epoch of the view: the session keeps it, and Kafka
        # checks it on every read of the partition, sent or not (Partition.checkCurrentLeaderEpoch)
        epochs = {(t, p): self._view.partitions[(t, p)].leader_epoch if (t, p) in self._view.partitions else -1
                  for t, p, _ in sent_list}
        value = {"broker": broker, "replica_id": -1, "rack": rack, "session_id": session_id,
                 "session_epoch": epoch, **LIMITS,
                 "partitions": [{"topic": t, "partition": p, "fetch_offset": o, "current_leader_epoch": epochs[(t, p)]}
                                for t, p, o in sent_list]}
        if forgotten:
            value["forgotten"] = [list(k) for k in forgotten]
        request = self._fetch_request(session_id, epoch, sent_list, forgotten or [], rack, epochs)
        incremental = session_id != 0 and epoch > 0
        covered = [(t, p, o) for (t, p), o in sorted(session.items())] if incremental else sent_list

        def send(conn):
            version = conn.version_for(FetchRequest, FETCH_MIN_VERSION)
            response = conn.request(request, version)
            top = error_name(response.error_code)
            entries = self._entries(broker, response, covered, incremental)
            if top != "NONE":
                entries = [{"topic": t, "partition": p, "fetch_offset": o, "error": top, **UNKNOWN}
                           for t, p, o in covered]
            return {"version": version, "top_error": top, "response_session_id": response.session_id,
                    "partitions": entries}

        return self.call("fetch", value, broker, send)

    # -- building and reading Fetch ------------------------------------------------------
    def _fetch_request(self, session_id, epoch, partitions, forgotten, rack, leader_epoch: int | dict,
                       isolation: int = 0) -> FetchRequest:
        """`leader_epoch`: every partition's current leader epoch, or a dict of them by (topic, partition)."""
        F = FetchRequest
        by_topic: dict[str, list] = {}
        for t, p, o in partitions:
            named = leader_epoch.get((t, p), -1) if isinstance(leader_epoch, dict) else leader_epoch
            by_topic.setdefault(t, []).append(F.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=named, fetch_offset=o, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES))
        gone: dict[str, list] = {}
        for t, p in forgotten:
            gone.setdefault(t, []).append(p)
        ids = self._view.topic_ids
        return F(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=MAX_BYTES, isolation_level=isolation,
                 session_id=session_id, session_epoch=epoch, rack_id=rack or "",
                 topics=[F.FetchTopic(topic=t, topic_id=ids.get(t), partitions=ps) for t, ps in by_topic.items()],
                 forgotten_topics_data=[F.ForgottenTopic(topic=t, topic_id=ids.get(t), partitions=ps)
                                        for t, ps in gone.items()])

    def _entries(self, broker, response, covered, incremental: bool, isolation: int = 0) -> list[dict]:
        """Per requested (or session) partition: the broker's answer, or `omitted`."""
        names = {v: k for k, v in self._view.topic_ids.items()}
        answered = {}
        for t in response.responses:
            topic = t.topic or names.get(t.topic_id)
            for p in t.partitions:
                answered[(topic, p.partition_index)] = p
        out = []
        for topic, partition, offset in covered:
            entry = {"topic": topic, "partition": partition, "fetch_offset": offset}
            p = answered.get((topic, partition))
            if p is None and incremental:
                entry.update(error="NONE", omitted=True)
            elif p is None:  # a full response must carry every partition; keep the gap visible
                entry.update(error="NONE", missing=True, **UNKNOWN)
            else:
                records, markers, batches = decode_fetched(p.records)
                entry.update(error=error_name(p.error_code), high_watermark=p.high_watermark,
                             last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                             preferred_read_replica=p.preferred_read_replica, records=records)
                if markers:
                    entry["markers"] = markers
                if p.records:  # what the read charged against the response's budget, and its first batch
                    entry.update(bytes=len(p.records), first_batch_bytes=first_batch_bytes(p.records))
                if isolation:  # what read_committed readers filter by (KIP-98)
                    entry["aborted_transactions"] = [[a.producer_id, a.first_offset]
                                                     for a in getattr(p, "aborted_transactions", None) or ()]
                    entry["batches"] = batches
                if p.error_code == 0 and p.high_watermark >= 0:
                    self._hwm[(broker, topic, partition)] = p.high_watermark
                if p.log_start_offset >= 0:
                    self._log_start[(topic, partition)] = p.log_start_offset
            out.append(entry)
        return out

    # -- ListOffsets and OffsetsForLeaderEpoch --------------------------------------------
    def list_offsets(self, key) -> bool:
        """Every special timestamp and one real one (a time a little before now) on the leader,
        and the latest offset on each follower; whether the leader's -3 answer was decided
        (`_max_timestamp_decided`: the settled round asks again until it is)."""
        state = self._view.partitions[key]
        decided = False
        if state.leader >= 0:
            answers = {}
            for ts in LIST_OFFSETS_TIMESTAMPS:
                if f"list_offsets@{ts}" in self.skip:
                    continue
                answers[ts] = self.list_offset(state.leader, key, ts, 0, state.leader_epoch)
            decided = _max_timestamp_decided(answers)
            self.list_offset(state.leader, key, -1, 1, state.leader_epoch)
            if "list_offsets@time" not in self.skip:
                self.list_offset(state.leader, key, int(time.time() * 1000) - self.random.choice(BY_TIME_LOOKBACK_MS),
                                 0, state.leader_epoch)
        for follower in (b for b in state.replicas if b != state.leader and b in self._view.brokers):
            self.list_offset(follower, key, -1, 0, state.leader_epoch)
        return decided

    def list_offset(self, broker: int, key, timestamp: int, isolation: int, leader_epoch: int) -> dict | None:
        topic, partition = key
        L = ListOffsetsRequest
        if not self.speaks(broker, L, list_offsets_min_version(timestamp), f"ListOffsets timestamp {timestamp}"):
            return None
        value = {"broker": broker, "replica_id": -1, "isolation_level": ISOLATION[isolation], "topic": topic,
                 "partition": partition, "timestamp": timestamp, "current_leader_epoch": leader_epoch}
        request = L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(name=topic, partitions=[
            L.ListOffsetsTopic.ListOffsetsPartition(partition_index=partition, current_leader_epoch=leader_epoch,
                                                    timestamp=timestamp)])])

        def send(conn):
            version = conn.version_for(L, list_offsets_min_version(timestamp))
            answer = conn.request(request, version).topics[0].partitions[0]
            # the stamp of the record found (Unix ms; -1 for the special ends): KIP-734's max timestamp
            return {"version": version, "error": error_name(answer.error_code), "offset": answer.offset,
                    "leader_epoch": answer.leader_epoch, "found_timestamp": answer.timestamp}

        return self.call("list_offsets", value, broker, send)

    def offsets_for_leader_epoch(self, key) -> None:
        """The end offset of the current leader epoch, asked as a consumer (KIP-392: capped at the HWM)."""
        state = self._view.partitions[key]
        for broker in (b for b in state.replicas if b in self._view.brokers):
            self.end_offset(broker, key, state.leader_epoch, state.leader_epoch)

    def end_offset(self, broker: int, key, leader_epoch: int, current_leader_epoch: int) -> dict | None:
        topic, partition = key
        O = OffsetForLeaderEpochRequest
        value = {"broker": broker, "replica_id": -1, "topic": topic, "partition": partition,
                 "leader_epoch": leader_epoch, "current_leader_epoch": current_leader_epoch}
        request = O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=topic, partitions=[
            O.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=partition, leader_epoch=leader_epoch,
                                                            current_leader_epoch=current_leader_epoch)])])

        def send(conn):
            version = conn.version_for(O, 3)  # v3: replica id, so the broker knows a consumer asks
            answer = conn.request(request, version).topics[0].partitions[0]
            return {"version": version, "error": error_name(answer.error_code), "end_offset": answer.end_offset,
                    "leader_epoch": answer.leader_epoch}

        return self.call("offsets_for_leader_epoch", value, broker, send)


#: coordinator states of a transaction that has ended (TransactionState in Kafka's coordinator)
ENDED = {"Empty", "CompleteCommit", "CompleteAbort", "Dead"}


def _list_transactions(conn: BrokerConnection) -> dict:
    L = ListTransactionsRequest
    version = conn.version_for(L, 0)
    answer = conn.request(L(state_filters=[], producer_id_filters=[]), version)
    return {"version": version, "error": error_name(answer.error_code),
            "transactions": sorted([t.transactional_id, t.producer_id, t.transaction_state]
                                   for t in answer.transaction_states)}


def _describe_transactions(conn: BrokerConnection, transactional_ids: list[str]) -> dict:
    D = DescribeTransactionsRequest
    version = conn.version_for(D, 0)
    answer = conn.request(D(transactional_ids=transactional_ids), version)
    return {"version": version, "transactions": [
        {"transactional_id": t.transactional_id, "error": error_name(t.error_code), "state": t.transaction_state,
         "producer_id": t.producer_id, "producer_epoch": t.producer_epoch, "timeout_ms": t.transaction_timeout_ms,
         "start_time_ms": t.transaction_start_time_ms,
         "partitions": sorted([d.topic, p] for d in t.topics for p in d.partitions)}
        for t in answer.transaction_states]}


def _max_timestamp_decided(answers: dict) -> bool:
    """Whether ListOffsets -3 named a record, or the partition is empty (latest offset = earliest),
    where no answer ever names one, or -3 cannot be asked (skipped, or not in the broker's
    ApiVersions: None): nothing to ask again for."""
    if answers.get(-3) is None:
        return True
    ok = {ts: a["offset"] for ts, a in answers.items() if a and a["error"] == "NONE"}
    return ok.get(-3, -1) >= 0 or (-1 in ok and ok[-1] == ok.get(-2))


def list_offsets_min_version(timestamp: int) -> int:
    """The first ListOffsets version that knows `timestamp` (-6 needs KIP-1023's v11)."""
    return {-3: 7, -4: 8, -5: 9, -6: 11}.get(timestamp, 1)
