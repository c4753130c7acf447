"""The prober's KIP-932 round: one share session's life, driven by hand.

docs/history.md, "The prober's share sessions", says what it records.

A share consumer library never sends a wrong share-session epoch, nor tells which answer it got;
this round does, as the KIP-227 round does for fetch sessions. It joins a share group of its own
(the run's share group plus `-prober`, so the workload's share consumers and the rules that
judge them never see its acquisitions) as a member whose id it makes (a UUID string, as Kafka 4.x
clients do), heartbeats until the coordinator assigns it partitions, and then, on the leader of
one of them:

1. ShareFetch, epoch 0: opens a share session on the assigned partitions it leads;
2. ShareFetch, epoch 1: the session continues;
3. ShareFetch, a wrong epoch: KIP-932 answers INVALID_SHARE_SESSION_EPOCH, the session stays;
4. ShareAcknowledge, epoch 0 (an acknowledgement cannot open a session): INVALID_SHARE_SESSION_EPOCH;
5. ShareAcknowledge, the right epoch: accepts every record the session acquired;
6. ShareFetch, epoch -1: closes the session (the leader releases what it still held);
7. ShareFetch, the next epoch of the closed session: SHARE_SESSION_NOT_FOUND.

Then it leaves the group (a heartbeat with member epoch -1). Every request is one history
operation (`share_heartbeat`, `share_fetch`, `share_acknowledge`) through `Prober.call`: `ok` when
answered whatever its error, `info` when the answer was lost. A ShareFetch or ShareAcknowledge names
the connection it goes on (`Prober.connection_number`): the leader drops a share session when the
connection that opened it closes, and the checker allows SHARE_SESSION_NOT_FOUND only then (or after
a fault). The coordinator lookup is not recorded (as the prober's metadata lookups are not).
"""
from __future__ import annotations

import time
import uuid

from kafka.protocol.metadata import FindCoordinatorRequest

from kipcheck.harness.clients.share_wire import ACKNOWLEDGE_TYPES, ShareAcknowledgeRequest, ShareFetchRequest, \
    ShareGroupHeartbeatRequest
from kipcheck.harness.clients.wire import error_name

#: ShareFetch and ShareAcknowledge v1 are KIP-932's first stable versions (Kafka 4.1 on)
SHARE_MIN_VERSION = 1
#: how long a round heartbeats for an assignment (s): a new group's first members get partitions only
#: once their share state is initialized (docs/history.md, "Share groups")
ASSIGNMENT_WAIT_S = 20.0
#: a round's heartbeats are this far apart at most (s), whatever interval the coordinator asks
HEARTBEAT_PAUSE_S = 1.0
#: what one ShareFetch may acquire: a few records, so the history stays small
MAX_RECORDS = 20
MAX_WAIT_MS = 500
#: how far from the epoch the session expects the deliberately wrong one is
WRONG_EPOCH_STEP = 7
GROUP_KEY_TYPE = 0  # FindCoordinator: share groups live on the group coordinator


def prober_group(share_group: str) -> str:
    """The prober's own share group, beside the run's."""
    return f"{share_group}-prober"


class ShareSessionRound:
    """The prober's share-session round (`Prober.share_session`); `prober` lends its
    connections, its view of the cluster, its history process and its `call`."""

    def __init__(self, prober, group: str):
        self.prober, self.group = prober, group

    # -- the round ---------------------------------------------------------------------
    def run(self) -> None:
        coordinator = self._coordinator()
        if coordinator is None or not self._speaks(coordinator, ShareGroupHeartbeatRequest):
            return
        member = Member(str(uuid.uuid4()))
        # an `info` (Indeterminate) leaves from here: that process sends nothing more, and the
        # coordinator drops the member once its session times out
        led = self._led_by_one_leader(self._await_assignment(coordinator, member))
        if led is not None:
            broker, partitions = led
            if self._speaks(broker, ShareFetchRequest) and self._speaks(broker, ShareAcknowledgeRequest):
                self._session(broker, member, partitions)
        if member.epoch > 0:
            self._heartbeat(coordinator, member, leave=True)

    def _session(self, broker: int, member: "Member", partitions: list[tuple[str, int]]) -> None:
        opened = self._fetch(broker, member, 0, partitions)
        if not opened or opened.get("top_error") != "NONE":
            return
        acquired = list(opened.get("partitions") or [])
        more = self._fetch(broker, member, 1, [])
        acquired += (more or {}).get("partitions") or []
        self._fetch(broker, member, 2 + WRONG_EPOCH_STEP, [])  # wrong: the session expects 2
        acks = [a for a in accept_all(acquired) if a[0] in self.prober._view.topic_ids]
        self._acknowledge(broker, member, 0, acks)  # refused whatever it carries: 0 opens sessions only by fetch
        epoch = 2
        if acks:
            self._acknowledge(broker, member, epoch, acks)
            epoch += 1
        self._fetch(broker, member, -1, [])  # close
        self._fetch(broker, member, epoch, [])  # the closed session is gone

    # -- group membership ----------------------------------------------------------------
    def _coordinator(self) -> int | None:
        """The group coordinator of the prober's group (unrecorded lookup), or None."""
        p = self.prober
        F = FindCoordinatorRequest
        for broker in sorted(p._view.brokers):
            conn = p.connection(broker)
            version = conn.version_for(F, 1)
            if version >= 4:
                answer = conn.request(F(key_type=GROUP_KEY_TYPE, coordinator_keys=[self.group]), version)
                found = answer.coordinators[0] if answer.coordinators else None
                node, code = (found.node_id, found.error_code) if found else (-1, -1)
            else:
                answer = conn.request(F(key=self.group, key_type=GROUP_KEY_TYPE), version)
                node, code = answer.node_id, answer.error_code
            if code == 0 and node in p._view.brokers:
                return node
        return None

    def _await_assignment(self, coordinator: int, member: "Member") -> list[tuple[str, int]]:
        """Join and heartbeat until the coordinator assigns partitions (or the wait ends)."""
        deadline = time.monotonic() + ASSIGNMENT_WAIT_S
        p = self.prober
        while not p.stop_event.is_set():
            answer = self._heartbeat(coordinator, member)
            if answer is None or answer.get("error") != "NONE":
                return []
            if member.assigned:
                return member.assigned
            if time.monotonic() >= deadline:
                return []
            p.stop_event.wait(min(HEARTBEAT_PAUSE_S, member.interval_s))
        return []

    def _heartbeat(self, coordinator: int, member: "Member", leave: bool = False) -> dict | None:
        p = self.prober
        joining = member.epoch == 0
        epoch = -1 if leave else member.epoch
        topics = sorted(p.topics) if joining else None
        value = {"broker": coordinator, "group": self.group, "member_id": member.id, "member_epoch": epoch,
                 **({"topics": topics} if topics else {})}
        request = ShareGroupHeartbeatRequest(group_id=self.group, member_id=member.id, member_epoch=epoch,
                                             rack_id=None, subscribed_topic_names=topics)
        names = {v: k for k, v in p._view.topic_ids.items()}

        def send(conn):
            version = conn.version_for(ShareGroupHeartbeatRequest, SHARE_MIN_VERSION)
            answer = conn.request(request, version)
            out = {"version": version, "error": error_name(answer.error_code), "new_member_epoch": answer.member_epoch,
                   "heartbeat_interval_ms": answer.heartbeat_interval_ms, "assignment": None}
            if answer.assignment is not None:
                out["assignment"] = sorted([names.get(t.topic_id, str(t.topic_id)), q]
                                           for t in answer.assignment.topic_partitions for q in t.partitions)
            return out

        answer = p.call("share_heartbeat", value, coordinator, send)
        if answer is not None and answer.get("error") == "NONE" and not leave:
            member.epoch = answer["new_member_epoch"]
            member.interval_s = max(0.1, answer["heartbeat_interval_ms"] / 1000)
            if answer["assignment"] is not None:
                member.assigned = [(t, q) for t, q in answer["assignment"] if t in p.topics]
        if leave:
            member.epoch = -1
        return answer

    def _led_by_one_leader(self, assigned: list[tuple[str, int]]) -> tuple[int, list] | None:
        """A leader (drawn by the seed) and the assigned partitions it leads, by the prober's view."""
        p = self.prober
        by_leader: dict[int, list] = {}
        for key in sorted(assigned):
            state = p._view.partitions.get(key)
            if state is not None and state.leader in p._view.brokers and key[0] in p._view.topic_ids:
                by_leader.setdefault(state.leader, []).append(key)
        if not by_leader:
            return None
        leader = p.random.choice(sorted(by_leader))
        return leader, by_leader[leader]

    def _speaks(self, broker: int, message_class) -> bool:
        return self.prober.speaks(broker, message_class, SHARE_MIN_VERSION,
                                  f"KIP-932 {message_class.__name__.removesuffix('Request')}")

    # -- ShareFetch and ShareAcknowledge -------------------------------------------------
    def _fetch(self, broker: int, member: "Member", epoch: int, partitions: list[tuple[str, int]]) -> dict | None:
        p = self.prober
        ids = p._view.topic_ids
        F = ShareFetchRequest
        by_topic: dict[str, list[int]] = {}
        for t, q in partitions:
            by_topic.setdefault(t, []).append(q)
        request = F(group_id=self.group, member_id=member.id, share_session_epoch=epoch, max_wait_ms=MAX_WAIT_MS,
                    min_bytes=1, max_bytes=1 << 20, max_records=MAX_RECORDS, batch_size=MAX_RECORDS,
                    topics=[F.FetchTopic(topic_id=ids[t], partitions=[
                        F.FetchTopic.FetchPartition(partition_index=q, acknowledgement_batches=[]) for q in qs])
                        for t, qs in sorted(by_topic.items())],
                    forgotten_topics_data=[])
        value = {"broker": broker, "group": self.group, "member_id": member.id, "session_epoch": epoch,
                 "connection": p.connection_number(broker), "adds": [[t, q] for t, q in partitions]}
        names = {v: k for k, v in ids.items()}

        def send(conn):
            version = conn.version_for(F, SHARE_MIN_VERSION)
            answer = conn.request(request, version)
            return {"version": version, "top_error": error_name(answer.error_code),
                    "acquisition_lock_timeout_ms": answer.acquisition_lock_timeout_ms,
                    "partitions": [{"topic": names.get(t.topic_id, str(t.topic_id)), "partition": q.partition_index,
                                    "error": error_name(q.error_code),
                                    "acknowledge_error": error_name(q.acknowledge_error_code),
                                    "acquired": [[a.first_offset, a.last_offset, a.delivery_count]
                                                 for a in q.acquired_records or ()]}
                                   for t in answer.responses for q in t.partitions]}

        return p.call("share_fetch", value, broker, send)

    def _acknowledge(self, broker: int, member: "Member", epoch: int, acks: list[list]) -> dict | None:
        p = self.prober
        ids = p._view.topic_ids
        A = ShareAcknowledgeRequest
        P = A.AcknowledgeTopic.AcknowledgePartition
        by_partition: dict[tuple, list] = {}
        for t, q, first, last, kind in acks:
            by_partition.setdefault((t, q), []).append(P.AcknowledgementBatch(
                first_offset=first, last_offset=last, acknowledge_types=[ACKNOWLEDGE_TYPES[kind.upper()]]))
        topics: dict[str, list] = {}
        for (t, q), batches in sorted(by_partition.items()):
            topics.setdefault(t, []).append(P(partition_index=q, acknowledgement_batches=batches))
        request = A(group_id=self.group, member_id=member.id, share_session_epoch=epoch,
                    topics=[A.AcknowledgeTopic(topic_id=ids[t], partitions=ps) for t, ps in topics.items()])
        value = {"broker": broker, "group": self.group, "member_id": member.id, "session_epoch": epoch,
                 "connection": p.connection_number(broker), "acks": acks}
        names = {v: k for k, v in ids.items()}

        def send(conn):
            version = conn.version_for(A, SHARE_MIN_VERSION)
            answer = conn.request(request, version)
            return {"version": version, "top_error": error_name(answer.error_code),
                    "partition_errors": {f"{names.get(t.topic_id, t.topic_id)}/{q.partition_index}":
                                         error_name(q.error_code) for t in answer.responses for q in t.partitions}}

        return p.call("share_acknowledge", value, broker, send)


class Member:
    """The prober's membership in its share group: the id it made, its epoch, its assignment."""

    def __init__(self, member_id: str):
        self.id, self.epoch, self.interval_s = member_id, 0, HEARTBEAT_PAUSE_S
        self.assigned: list[tuple[str, int]] = []


def accept_all(partitions: list[dict]) -> list[list]:
    """ACCEPT acknowledgements of every range the answers acquired: [[topic, partition, first, last,
    "accept"], ...], per partition in ascending order without overlaps (KIP-932 "Share sessions")."""
    ranges: dict[tuple, list] = {}
    for e in partitions:
        for first, last, _count in e.get("acquired") or ():
            ranges.setdefault((e["topic"], e["partition"]), []).append((first, last))
    out = []
    for (t, q), spans in sorted(ranges.items()):
        merged: list[list[int]] = []
        for first, last in sorted(spans):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        out += [[t, q, first, last, "accept"] for first, last in merged]
    return out


__all__ = ["ShareSessionRound", "prober_group", "accept_all"]
