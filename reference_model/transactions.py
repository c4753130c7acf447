"""KIP-98 / KIP-447 / KIP-890: transactions as a read_committed reader sees them.

Pure rules, one per function, each naming the KIP section it encodes; the checker
(checks/rules/txn_rules.py) feeds them what a history shows. Unknown values (None, -1)
allow every outcome some value would allow, as in the other model modules.

What Kafka does, read in the 4.3.1 source jars (Maven Central; `UnifiedLog.java`
`lastStableOffset` / `firstUnstableOffsetMetadata`, `ProducerStateManager.firstUnstableOffset`,
`clients/.../CompletedFetch.java` `abortedProducerIds` / `isBatchAborted`,
`TransactionCoordinator.handleEndTransaction`): the LSO is the first offset of the earliest
open transaction, capped at the high watermark; a read_committed fetch reads up to the LSO
and carries the aborted transactions (producer id, first offset) overlapping its range; the
consumer drops a batch of producer P while an aborted transaction of P has begun at or
before it and its abort marker is not yet passed.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import profiles
from .profiles import Profile

COMMITTED = "committed"
ABORTED = "aborted"
UNKNOWN = "unknown"

READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True)
class TxnState:
    """One transaction as the history shows it: its outcome and, per partition, the offsets
    its acknowledged sends took. `commit_began` is the history index of its first commit
    call (None: never called)."""

    txn: str
    outcome: str = UNKNOWN
    commit_began: int | None = None
    offsets: tuple[tuple[str, tuple[int, ...]], ...] = ()  # ("topic/partition", sorted offsets)


def transaction_outcome(commit_types: tuple[str, ...], abort_types: tuple[str, ...]) -> str:
    """KIP-98 "EndTxnRequest": the coordinator answers an EndTxn only once the outcome is
    written to the transaction log, so an answered commit makes the transaction committed
    and an answered abort aborted (an abort after a commit is refused, INVALID_TXN_STATE).
    A timed-out or unanswered end, or none at all, leaves it unknown: the coordinator may
    have completed it, or aborts it when it times out ("Transaction timeout")."""
    if "ok" in commit_types and "ok" not in abort_types:
        return COMMITTED
    if "ok" in abort_types and "ok" not in commit_types:
        return ABORTED
    return UNKNOWN


def lso_within_hwm(lso: int | None, hwm: int | None) -> bool:
    """KIP-98 "Fetch Request/Response" (LastStableOffset): the LSO is the first offset of
    the earliest open transaction, at most the high watermark (`UnifiedLog.lastStableOffset`
    caps it there)."""
    if lso is None or hwm is None or lso < 0 or hwm < 0:
        return True
    return lso <= hwm


def lso_may_follow(previous: int | None, current: int | None) -> bool:
    """KIP-98 "Fetch Request/Response": the LSO one leader reports for a partition never
    goes back within its leader epoch (a transaction that began below it has ended, and
    new ones begin at the log end, above the HWM it passed)."""
    if previous is None or current is None or previous < 0 or current < 0:
        return True
    return current >= previous


def read_committed_offsets_allowed(offsets: tuple[int, ...], lso: int | None,
                                   ended_before: tuple[bool, ...] | None = None,
                                   profile: Profile | str = "kip") -> tuple[int, ...]:
    """KIP-98 "Consumer" (isolation.level=read_committed): a read_committed fetch returns
    only records below the LSO. Gives the offsets that break it. With
    `response-lso-sampled-before-read` (Kafka) the reported LSO may predate the read, so a
    record at or above it is allowed when its transaction's end was called before the answer
    came (`ended_before`, one flag per offset; None: unknown, allowed)."""
    if lso is None or lso < 0:
        return ()
    sampled = profiles.get(profile).allows(profiles.RESPONSE_LSO_SAMPLED_BEFORE_READ)
    flags = ended_before or (None,) * len(offsets)
    return tuple(o for o, ended in zip(offsets, flags) if o >= lso and not (sampled and ended is not False))


def aborted_record_covered(producer_id: int, offset: int,
                           aborted: tuple[tuple[int, int], ...] | None) -> bool:
    """KIP-98 "Fetch Request/Response" (AbortedTransactions): a read_committed answer that
    returns a record of an aborted transaction must list that transaction, (producer id,
    first offset ≤ the record's offset), so the consumer can drop it
    (`CompletedFetch.isBatchAborted`). None: the list is unknown."""
    if aborted is None:
        return True
    return any(pid == producer_id and first <= offset for pid, first in aborted)


def read_committed_verdict(outcome: str, read_index: int, commit_began: int | None) -> str | None:
    """KIP-98 "Transactional Guarantees" / KIP-447 "Consumer Rebalance": a read_committed
    reader sees a transaction's records only after its commit: never those of an aborted
    one (`aborted-read`) and never before the commit was asked for (`precommitted-read`:
    the read returned before the first commit call, or no commit was ever called and the
    outcome is unknown). `read_index` and `commit_began` are history indices. None: allowed."""
    if outcome == ABORTED:
        return "aborted-read"
    if commit_began is None or read_index < commit_began:
        return "precommitted-read"
    return None


def visible_all_or_nothing(txn_offsets: tuple[int, ...], returned: tuple[int, ...],
                           first: int, last: int) -> tuple[int, ...]:
    """KIP-98 "Transactional Guarantees" (atomic multi-partition writes, per partition here):
    a read_committed answer that covers offsets [first, last] of a partition and returns
    some of a committed transaction's records there returns all of them in that range.
    Gives the transaction's offsets in range that the answer left out."""
    got = set(returned)
    if not got & set(txn_offsets):
        return ()
    return tuple(o for o in txn_offsets if first <= o <= last and o not in got)


def torn_offsets(txn_offsets: tuple[int, ...], read: set, read_past: int | None) -> tuple[int, ...]:
    """KIP-98 "Transactional Guarantees": a committed transaction is visible whole or not
    at all. When read_committed readers saw some of its records, every record of it below
    the highest offset they read of that partition (`read_past`) must have been read too.
    Gives those never read."""
    if read_past is None:
        return ()
    return tuple(o for o in txn_offsets if o < read_past and o not in read)


def past_deadline(txn_start_ns: int, txn_end_ns: int | None, timeout_ms: int, bound_ns: int, asked_ns: int) -> bool:
    """The deadline `hanging` and `described_hanging` share: no transaction stays open past
    min(its end, its start + timeout) plus the bound a recovering coordinator may need. True:
    something seen at `asked_ns` shows it still open past that."""
    deadline = txn_start_ns + timeout_ms * 1_000_000
    if txn_end_ns is not None:
        deadline = min(deadline, txn_end_ns)
    return asked_ns > deadline + bound_ns


def hanging(txn_start_ns: int, txn_end_ns: int | None, timeout_ms: int, bound_ns: int,
            asked_ns: int, lso: int, first_offset: int) -> bool:
    """KIP-98 "Transaction timeout" / KIP-890 "Hanging transactions": a transaction still open
    transaction.timeout.ms after it began is aborted by the coordinator, so no transaction
    holds the LSO (LSO == its first offset) past its deadline (`past_deadline`). True: this
    answer, asked at `asked_ns`, shows it holding the LSO past that."""
    return lso == first_offset and past_deadline(txn_start_ns, txn_end_ns, timeout_ms, bound_ns, asked_ns)


#: the coordinator's state of a transaction that is open and subject to its timeout
#: (TransactionState.ONGOING; Prepare* wait for markers, not for the timeout)
ONGOING = "Ongoing"


def described_hanging(first_seen_ns: int, state: str, timeout_ms: int, bound_ns: int, asked_ns: int) -> bool:
    """KIP-98 "Transaction timeout", as the coordinator itself shows it (KIP-664
    DescribeTransactions): a transaction past its deadline (`past_deadline`) is aborted. One
    transaction (the same producer id, epoch and start time) described `Ongoing` from
    `first_seen_ns` on, and still at `asked_ns`. It began at or before it was first seen, so its
    deadline is at most `first_seen_ns` + its timeout."""
    return state == ONGOING and past_deadline(first_seen_ns, None, timeout_ms, bound_ns, asked_ns)
