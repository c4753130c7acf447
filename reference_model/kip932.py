"""KIP-932 (Queues for Kafka): what a share group may deliver, one rule per function.

The checker (checks/rules/share_rules.py) follows each record of the share group through its
deliveries (a share consumer's `share_poll` that returned it) and its acknowledgements
(`share_ack`), and asks these rules. A delivery is what one consumer saw: when its poll was
asked and answered, the record's delivery count as the consumer was told it, and the earliest
time the broker can have acquired it.

When the broker acquired a record is not in the history: librdkafka may fetch ahead of the
application's poll. What bounds it from below is the record itself: the broker appended it
before it could acquire it, and the workload topics are stamped with LogAppendTime (KIP-32), so
the poll carries the append time mapped to the history's clock (docs/history.md, `append_ms`).
Without a stamp, the consumer client's start bounds it.

The lock, read in Kafka's sources (core, kafka.server.share.SharePartition, 4.3.1): every
acquisition calls `scheduleAcquisitionLockTimeout(memberId, firstOffset, lastOffset)`, which asks
`ShareGroupConfigProvider.recordLockDurationMsOrDefault` (the group's
`share.record.lock.duration.ms`, else the broker's `group.share.record.lock.duration.ms`) and adds
an `AcquisitionLockTimerTask` with that delay to the partition's `SystemTimer`; only that task
(`releaseAcquisitionLockOnTimeout`), an acknowledgement of the member, or the member leaving makes
the record available again. The timer's wheel is 1 ms a tick and runs a task once its bucket's
tick is reached, so a lock can end up to one tick before `acquired + duration`, never earlier.
A leader change loses the locks of the old leader (they live in its memory, and an acquisition is
not persisted: only acknowledgements, releases and timeouts are written through the share
coordinator), so the lock rule is not judged across one.
"""
from __future__ import annotations

from dataclasses import dataclass

#: the SystemTimer's tick: a lock may end this much before acquisition + duration (ms)
TIMER_TICK_MS = 1
#: what the mapping of a LogAppendTime stamp to the history's clock may be off by (ms): the stamp is
#: whole ms, read against the wall clock once per poll (docs/history.md, `append_ms`)
STAMP_SLACK_MS = 5

#: acknowledgement types (KIP-932 "Acknowledgement types")
ACCEPT, RELEASE, REJECT = "accept", "release", "reject"
ACK_TYPES = (ACCEPT, RELEASE, REJECT)


@dataclass(frozen=True)
class Delivery:
    """One consumer's delivery of one record. Times are history ns.

    `consumer`: who got it (the client's process); `asked`/`answered`: its poll's invoke and
    completion; `acquired_after`: the earliest the broker can have acquired it (its append, or the
    client's start); `count`: the delivery count the consumer was told (None: unknown);
    `released_by`: the earliest the consumer can have ended the lock itself (its acknowledgement's
    invoke, or its client's end; None: never within the history)."""

    consumer: object
    asked: int
    answered: int
    acquired_after: int
    count: int | None = None
    released_by: int | None = None


def lock_held_until(d: Delivery, lock_ms: int) -> float:
    """The time up to which `d`'s acquisition lock certainly held: before the consumer could have
    acknowledged or left, and before the lock could have expired (acquired no earlier than
    `acquired_after`, expiring no earlier than one timer tick before `lock_ms` after it)."""
    expiry = d.acquired_after + (lock_ms - TIMER_TICK_MS) * 1_000_000
    return float(expiry if d.released_by is None else min(expiry, d.released_by))


def exclusive_acquisition(first: Delivery, second: Delivery, lock_ms: int) -> bool:
    """KIP-932 "Share group concepts": while a record is acquired by one consumer it is not
    available to another consumer of the group for the duration of the acquisition lock (it
    becomes available when the consumer releases or rejects it, acknowledges it, leaves, or the lock
    duration elapses). `first`, `second`: deliveries of one record to two consumers. When their
    delivery counts differ, the lower one was acquired first (each acquisition adds one), and the
    later acquisition happened by its poll's answer: it must not come before the first's lock could
    end. With equal or unknown counts either came first, and a violation must hold both ways.
    False: the record was given to the second consumer while the first one's lock held
    (`share-double-acquire`)."""
    if first.consumer == second.consumer:
        return True
    if first.count is not None and second.count is not None and first.count != second.count:
        earlier, later = (first, second) if first.count < second.count else (second, first)
        return later.answered >= lock_held_until(earlier, lock_ms)
    latest = max(first.answered, second.answered)
    return latest >= min(lock_held_until(first, lock_ms), lock_held_until(second, lock_ms))


def accepted_count_bound(accepted: Delivery, accept_answered: int, others: tuple[Delivery, ...],
                         lock_ms: int) -> int:
    """The highest delivery count the acquisition an accept applied to can have had. The accepting
    consumer acknowledges what its application polled (`accepted`), but its client fetches ahead: an
    acknowledgement of a member applies to whatever acquisition of the record that member holds when
    the broker takes it, and the client may have acquired the record again after a lock ended. Each
    acquisition after `accepted` needs the one before it to end: its lock lapsing (no sooner than one
    tick before `lock_ms` after it was acquired), or its holder releasing it, which that holder can do
    only for a delivery its application polled: one in `others` answered by `accept_answered`, after
    whose lock (`lock_held_until`, `released_by` a release) the next acquisition may follow at once.
    (A holder that left or a leader change ends a lock early too: the checker does not judge across
    another consumer's end, a fault or a leader change.)"""
    step = (lock_ms - TIMER_TICK_MS) * 1_000_000

    def lapses(since: float) -> int:
        return max(0, int((accept_answered - since) // step))

    bound = accepted.count + lapses(accepted.acquired_after)
    for d in others:
        if d.count is not None and d.count >= accepted.count and d.answered <= accept_answered:
            bound = max(bound, d.count + 1 + lapses(lock_held_until(d, lock_ms)))
    return bound


def accepted_not_redelivered(accepted: Delivery, accept_answered: int, later: Delivery, lock_ms: int,
                             others: tuple[Delivery, ...] = ()) -> bool:
    """KIP-932 "Record states and transitions": a record a consumer accepted (its acknowledgement
    answered without error for the record's partition) is Acknowledged, a final state: it is not
    delivered again. The broker answers an acknowledgement only after the share coordinator
    persisted it, so a leader change does not undo it. `later` is a delivery of the record, to any
    consumer (the accepting one included), whose poll was asked after the accept was answered.

    It breaks the rule when its count is above the highest the accepted acquisition can have had
    (`accepted_count_bound`; `others` are the record's other deliveries). Another consumer's
    delivery with a count above the accepted one's and not above that bound was acquired before the
    accept, and its lock must have lapsed before the accept was answered (that consumer polled it
    only after the answer, so it cannot have released it), for the accepting consumer to hold the
    record again when the broker took the accept. `acquired_after` of a redelivery may be bounded by
    the end of the previous acquisition's lock. False: an accepted record was delivered again
    (`share-accepted-redelivered`)."""
    if later.count is None or accepted.count is None or later.asked <= accept_answered:
        return True
    if later.count > accepted_count_bound(accepted, accept_answered, others, lock_ms):
        return False
    if later.consumer == accepted.consumer or later.count <= accepted.count:
        return True
    return later.acquired_after + (lock_ms - TIMER_TICK_MS) * 1_000_000 <= accept_answered


def delivery_count_allowed(count: int | None, limit: int) -> bool:
    """KIP-932 "Record states and transitions": a record is delivered at most
    `group.share.delivery.count.limit` times; at the limit a release or a lock timeout archives it
    instead of making it available. `count`: a delivery count the broker reported, or the number of
    deliveries of one record the history saw (each a separate acquisition). The KIP says the count
    is not exact across a share-partition leader change (acquisitions are not persisted), so the
    checker counts deliveries only where no fault or leader change came between them.
    False: the record was delivered more often than the limit (`share-delivery-limit-exceeded`)."""
    return count is None or count <= limit


#: how long after a record is available again a ShareFetch that acquires a later offset of its
#: share-partition may still have missed it (ms): a fetch parked in purgatory acquires when it
#: completes, from the share-partition's fetch position then, and the position goes back to the
#: lowest available offset on the next acquisition after a lock ends (SharePartition.findNextFetchOffset)
FETCH_SLACK_MS = 1000


def available_record_delivered(delivered: bool, available_by: int, later_acquired_after: int, lock_ms: int) -> bool:
    """KIP-932 "In-flight records": every record from the share-partition start offset up to its end
    offset is available, acquired, acknowledged or archived, and a ShareFetch acquires the available
    ones in offset order; a record leaves the in-flight window only acknowledged or archived, and is
    archived only after a delivery (its delivery-count limit or a reject). So a record nobody was
    ever delivered cannot stay behind a later offset of its partition that was acquired long after
    it became available.

    `available_by`: when the record was certainly in the log (its send acknowledged) and every
    acquisition of it the history cannot show had a cause that had ended: a consumer that ended
    before it returned the record, or a fault that cut a response off. Such an acquisition's lock
    ends within `lock_ms` (a leave releases it at once); one more lock is allowed for an acquisition
    hidden right after it by a cause the history does not show (a response the client timed out),
    then the fetch slack. `later_acquired_after`: the earliest time a later offset of the same
    share-partition, delivered in the history, can have been acquired. False: the record was never
    delivered, though a later offset was acquired after all that (`share-record-lost`)."""
    return delivered or later_acquired_after < available_by + (2 * lock_ms + FETCH_SLACK_MS) * 1_000_000


# --- share sessions (the prober's ShareFetch / ShareAcknowledge) ---------------------------------
#
# Read in Kafka's sources (kafka.server.share.SharePartitionManager `newContext`,
# `acknowledgeSessionUpdate` and `releaseSession`; org.apache.kafka.server.share.session.ShareSessionCache;
# 4.3.1): a share session is keyed by (group, member) on one share-partition leader and holds the
# epoch it expects next. Besides the member's own requests (epoch 0 replaces it, -1 closes it), it
# leaves the cache only
# - when the connection that opened it closes (`maybeCreateSession` maps that connection id to the
#   session; ClientConnectionDisconnectListener.onDisconnect removes it),
# - when the broker's cache is emptied: a new life of the broker (the cache is in memory), or
#   share.version turned off (`onShareVersionToggle`, which no run does),
# and never to make room: 4.3.1's cache has no eviction (no `tryEvict`, no eviction time); full at
# group.share.max.share.sessions (2000 by default), it refuses the new session instead
# (SHARE_SESSION_LIMIT_REACHED). So SHARE_SESSION_NOT_FOUND for a live session is allowed only where
# one of those can have acted (`share_session_may_be_gone`).

SHARE_FETCH, SHARE_ACKNOWLEDGE = "share_fetch", "share_acknowledge"
#: the epochs of ShareRequestMetadata: 0 opens a session (ShareFetch only), -1 closes it
SHARE_INITIAL_EPOCH, SHARE_FINAL_EPOCH = 0, -1
MAX_INT32 = 2**31 - 1
NONE = "NONE"
SHARE_SESSION_NOT_FOUND = "SHARE_SESSION_NOT_FOUND"
INVALID_SHARE_SESSION_EPOCH = "INVALID_SHARE_SESSION_EPOCH"
SHARE_SESSION_LIMIT_REACHED = "SHARE_SESSION_LIMIT_REACHED"
#: the answers the session rules speak about; any other top-level error (INVALID_REQUEST,
#: GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, ...) is decided before the session is looked at
SHARE_SESSION_ANSWERS = frozenset({NONE, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
                                   SHARE_SESSION_LIMIT_REACHED})
#: a session state the history cannot tell (after an answer outside SHARE_SESSION_ANSWERS)
UNKNOWN_SESSION = "unknown"


def next_share_epoch(epoch: int) -> int:
    """The epoch a share session expects after one that `epoch` answered (ShareRequestMetadata.nextEpoch,
    KIP-932 "Share sessions"): one more, 1 after MAX_INT, and -1 stays -1."""
    if epoch < 0:
        return SHARE_FINAL_EPOCH
    return 1 if epoch == MAX_INT32 else epoch + 1


#: fault effects (kipcheck.effects) through which a session can go unseen: a new life empties the
#: broker's cache; a stopped node or cut links can close, on the broker's side, the connection that
#: opened it
SESSION_DROPPING_EFFECTS = frozenset({"loses-state", "stops-node", "cuts-links"})


def share_session_may_be_gone(opened_on, sent_on, fault_since_open: bool) -> bool:
    """Whether a leader can have dropped a member's live session before answering a request of it
    (the mechanisms above): the request went on another connection than the one that opened the
    session (`opened_on`, `sent_on`: the client's connection ids; None: not recorded, so unknown;
    the opening one may have closed), or a fault with a SESSION_DROPPING_EFFECTS effect on that
    broker overlapped the time from the open's invoke to the answer (`fault_since_open`)."""
    return fault_since_open or opened_on is None or sent_on is None or opened_on != sent_on


def share_session_answer(request: str, epoch: int, expected: int | None | str,
                         may_be_gone: bool = False) -> frozenset[str] | None:
    """KIP-932 "Share sessions": the session answers a leader may give a ShareFetch or ShareAcknowledge
    (`request`) of `epoch` from a member whose session there expects `expected` (None: the member
    has no session there; UNKNOWN_SESSION: the history cannot tell). None: not judged.

    - ShareFetch 0 opens a new session, discarding one the member had: never a session error,
      though the cache may be full (SHARE_SESSION_LIMIT_REACHED).
    - ShareAcknowledge 0 cannot open one: INVALID_SHARE_SESSION_EPOCH.
    - -1 closes the member's session, whatever its epoch: NONE, or SHARE_SESSION_NOT_FOUND without one.
    - Any other epoch continues the session: with none, SHARE_SESSION_NOT_FOUND; the epoch it
      expects, NONE; any other, INVALID_SHARE_SESSION_EPOCH.
    SHARE_SESSION_NOT_FOUND is allowed too for a live session that `may_be_gone`
    (`share_session_may_be_gone`: its connection closed, its broker lost its cache), never else."""
    if request == SHARE_ACKNOWLEDGE and epoch == SHARE_INITIAL_EPOCH:
        return frozenset({INVALID_SHARE_SESSION_EPOCH})
    if epoch == SHARE_INITIAL_EPOCH:
        return frozenset({NONE, SHARE_SESSION_LIMIT_REACHED})
    if expected == UNKNOWN_SESSION:
        return None
    if expected is None:
        return frozenset({SHARE_SESSION_NOT_FOUND})
    gone = frozenset({SHARE_SESSION_NOT_FOUND}) if may_be_gone else frozenset()
    if epoch == SHARE_FINAL_EPOCH or epoch == expected:
        return frozenset({NONE}) | gone
    return frozenset({INVALID_SHARE_SESSION_EPOCH}) | gone


def share_session_after(request: str, epoch: int, expected: int | None | str, answer: str) -> int | None | str:
    """The epoch the member's session expects after `answer` to a request of `epoch`
    (SharePartitionManager, KIP-932 "Share sessions"): an open starts at 1, a continuation moves one on,
    a close or SHARE_SESSION_NOT_FOUND leaves no session, a wrong epoch changes nothing. After an answer
    outside the session rules the history cannot tell (UNKNOWN_SESSION) until the next open."""
    if answer not in SHARE_SESSION_ANSWERS:
        return UNKNOWN_SESSION
    if answer == SHARE_SESSION_NOT_FOUND:
        return None
    if answer in (INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED):
        # an open refused for a full cache has already discarded the member's old session
        return None if epoch == SHARE_INITIAL_EPOCH and request == SHARE_FETCH else expected
    if epoch == SHARE_INITIAL_EPOCH:
        return next_share_epoch(SHARE_INITIAL_EPOCH)
    if epoch == SHARE_FINAL_EPOCH:
        return None
    return next_share_epoch(epoch)
