"""A subscriber's offset commits and where it resumes, recorded (docs/history.md, "Offset commits").

After each poll that returned records the subscriber commits, for each partition the poll read,
the offset after the last record it returned; a seeded choice per commit makes it synchronous
(the answer is the call's) or asynchronous (the answer comes through librdkafka's commit callback
inside a later poll). At most one commit is open at a time, so a process's `commit` records pair
up by (process, f) like its rebalance callbacks nested in its polls.

When a rebalance gives it partitions it asks the group's committed offsets (`committed`, an
OffsetFetch) and resumes there, or at the earliest offset when the group has none; if the
OffsetFetch fails librdkafka asks the group itself and where it resumed is unknown.
"""
from __future__ import annotations

import random

from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition

from kipcheck.harness.clients.client_errors import error_text
from kipcheck.reference_model.kip848 import REFUSING_ERRORS
from kipcheck.rundir.writer import History, Operation

#: how long the rebalance callback waits for the group's committed offsets (inside a poll)
COMMITTED_TIMEOUT_S = 10.0
#: where a partition resumed when the group had no committed offset (auto.offset.reset)
EARLIEST = "earliest"


def _key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


class Committer:
    """One subscriber's commits (one open at a time) and resume positions."""

    def __init__(self, history: History, group: str, protocol: str, seq: int):
        self.history, self.group, self.protocol = history, group, protocol
        self._modes = random.Random(f"commits-{seq}")  # sync or async, per commit
        self.pending: Operation | None = None  # the async commit not answered yet
        self._in_sync = False

    def commit(self, process: int, consumer, records: list, member: dict) -> None:
        """Commit the position after `records` (a poll's) unless a commit is still open."""
        positions: dict[tuple, int] = {}
        for topic, partition, offset, _ in records:
            positions[(topic, partition)] = max(positions.get((topic, partition), 0), offset + 1)
        if not positions or self.pending is not None:
            return
        mode = "async" if self._modes.random() < 0.5 else "sync"
        ordered = sorted(positions.items())
        op = self.history.invoke(process, "commit", {**member, "mode": mode,
                                                     "offsets": {_key(*tp): o for tp, o in ordered}})
        offsets = [TopicPartition(t, p, o) for (t, p), o in ordered]
        if mode == "async":
            self.pending = op
            try:
                consumer.commit(offsets=offsets, asynchronous=True)
            except Exception as e:  # refused before it was queued
                self.pending = None
                self._complete(op, e, ())
            return
        self._in_sync = True
        try:
            answer = consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as e:
            self._complete(op, e, ())
            return
        finally:
            self._in_sync = False
        self._complete(op, None, answer or ())

    def answered(self, err, partitions) -> None:
        """librdkafka's commit callback (served inside a poll). A synchronous commit's answer is
        its call's own, so a callback during one is not the open async commit's."""
        if self._in_sync or self.pending is None:
            return
        asked = self.pending.value.get("offsets") or {}
        if any(tp.offset >= 0 and asked.get(_key(tp.topic, tp.partition)) != tp.offset for tp in partitions or ()):
            return  # another commit's answer (a synchronous one served late)
        op, self.pending = self.pending, None
        self._complete(op, err, partitions or ())

    def unanswered(self, reason: str) -> None:
        """The client goes away with an async commit open: it may or may not be applied (`info`)."""
        if self.pending is not None:
            op, self.pending = self.pending, None
            op.info(error=reason)

    @staticmethod
    def _complete(op: Operation, err, partitions) -> None:
        """`ok` without any error; `fail` when every error is one the coordinator's validation (or
        librdkafka before sending) raises, so nothing was written; else `info` (a write error or a
        lost answer may still have been applied: reference_model.kip848)."""
        errors = {_key(tp.topic, tp.partition): tp.error.name() for tp in partitions if tp.error is not None}
        if err is None and not errors:
            op.ok()
            return
        text = error_text(err) if err is not None else "partition errors"
        names = set(errors.values()) | ({text.split(":", 1)[0]} if err is not None else set())
        (op.fail if names <= REFUSING_ERRORS else op.info)(error=text, **({"partition_errors": errors} if errors else {}))

    def resume(self, process: int, consumer, partitions: list, member: dict) -> dict:
        """Ask the group's committed offsets of `partitions` (recorded as `committed`) and set
        each one's start: the committed offset, else the earliest. Returns the `resume` of the
        assign: {"topic/partition": offset | "earliest" | None (unknown: librdkafka asks itself)}."""
        if not partitions:  # the consumer protocol's callback may give none: nothing to ask
            return {}
        op = self.history.invoke(process, "committed", {**member, "partitions": [[tp.topic, tp.partition]
                                                                                  for tp in partitions]})
        try:
            answer = consumer.committed([TopicPartition(tp.topic, tp.partition) for tp in partitions],
                                        timeout=COMMITTED_TIMEOUT_S)
        except Exception as e:
            op.fail(error=error_text(e))
            answer = []
        else:
            offsets = {_key(tp.topic, tp.partition): (tp.offset if tp.offset >= 0 else None)
                       for tp in answer if tp.error is None}
            errors = {_key(tp.topic, tp.partition): tp.error.name() for tp in answer if tp.error is not None}
            op.ok(offsets=offsets, **({"partition_errors": errors} if errors else {}))
        found = {(tp.topic, tp.partition): tp.offset for tp in answer if tp.error is None}
        resume = {}
        for tp in partitions:
            offset = found.get((tp.topic, tp.partition))
            if offset is None:
                tp.offset, resume[_key(tp.topic, tp.partition)] = OFFSET_INVALID, None
            elif offset >= 0:
                tp.offset, resume[_key(tp.topic, tp.partition)] = offset, offset
            else:
                tp.offset, resume[_key(tp.topic, tp.partition)] = OFFSET_BEGINNING, EARLIEST
        return resume
