"""KIP-848 (the consumer rebalance protocol): who may own a partition of a consumer group.

Pure rules, one per function; the checker (checks/rules/group_rules.py) follows each group's
members through their own rebalance callbacks (the history's `assign` with `rebalance`,
and `revoke`) and asks `handoff_allowed` of every partition given to a member while another
member of the group had it.

What the owner did is all the checker can prove: the coordinator's reasons are not in the
history. The owner either began revoking the partition before the other member was given it
(`RELEASED`), or its client had failed (`GONE`: closed or crashed, it heartbeats no more and the
coordinator frees its partitions after the session timeout), or it learned later that it had
lost the partition (`FENCED`: KIP-848 "Membership rules", a fenced member gives up all its
partitions at once and the consumer calls onPartitionsLost), or it went on owning the partition
and revoked it later as an ordinary revocation (`HELD`).

The classic protocol that librdkafka's subscribers also speak gives the same guarantee another
way (the eager protocol: every member revokes everything before it rejoins, and no member is
assigned before the rejoin completes), so the same rule judges both.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

#: what the previous owner did about the partition, as its own callbacks show
RELEASED = "released"  # its revocation began before the partition was given to another member
GONE = "gone"  # its client had closed or failed: it no longer heartbeats
FENCED = "fenced"  # it was fenced: it learned later that it lost the partition (onPartitionsLost)
HELD = "held"  # it still owned the partition and revoked it later as an ordinary revocation

OWNER_STATES = (RELEASED, GONE, FENCED, HELD)


def handoff_allowed(owner: str) -> bool:
    """KIP-848 "Reconciliation: a partition is revoked from its owner before it is assigned to
    another member": a partition owned by member A may be given to member B only after A has
    revoked it (A's heartbeat no longer lists it), or once A left the group or was fenced (the
    coordinator frees a partition when its owner leaves or is fenced; a fenced member gives up
    every partition and calls onPartitionsLost). `owner`: one of `OWNER_STATES`."""
    if owner not in OWNER_STATES:
        raise ValueError(f"unknown owner state {owner!r}; one of {OWNER_STATES}")
    return owner != HELD


def assigned_to_one_member(assigned: Sequence[Sequence[tuple]]) -> bool:
    """KIP-848 "Reconciliation", as the coordinator itself states it: the coordinator assigns a
    partition to a member only once its previous owner revoked it (the partition's epoch is freed when
    the owner confirms the revocation, `CurrentAssignmentBuilder`), and a ConsumerGroupDescribe answer
    lists each member's assigned partitions from one committed state of the group, without those
    pending revocation (`ConsumerGroupMember.asConsumerGroupDescribeMember`, 4.3.1). So no partition is
    listed for two members of one answer. `assigned`: per member, its assigned (topic, partition)s.
    False: the coordinator said two members were assigned one partition at once
    (`group-ownership-violation`)."""
    seen: set = set()
    for partitions in assigned:
        mine = {tuple(tp) for tp in partitions}
        if mine & seen:
            return False
        seen |= mine
    return True


# --- offset commits and where a new owner resumes ---------------------------------------------
#
# What Kafka does, read in its sources (apache/kafka trunk, group-coordinator module, the
# coordinator 4.x runs for classic and consumer groups alike):
#
# * `OffsetMetadataManager.commitOffset` validates the request first (`validateOffsetCommit`:
#   GROUP_ID_NOT_FOUND, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH,
#   FENCED_MEMBER_EPOCH, UNSUPPORTED_VERSION are thrown before a record is made), then makes one
#   OffsetCommit record per partition. A refusal by validation therefore changed nothing.
# * `CoordinatorRuntime` appends those records to the __consumer_offsets partition and answers
#   only once its high watermark passed them (the event waits in the deferred queue). When the
#   append itself throws, the shard reverts to its snapshot (`revertLastWrittenOffset`): nothing
#   applied. But once appended, a write that times out waiting for replication
#   (`OperationTimeout`, offsets.commit.timeout.ms) or whose coordinator unloads answers an
#   error (REQUEST_TIMED_OUT, NOT_COORDINATOR ...) while the record stays in the log and may be
#   committed and loaded by the next coordinator: such a commit may have been applied although
#   its answer was an error. A commit whose answer never came (a lost connection, a client-side
#   timeout, an async commit still open when its client closed) may be applied at any later time.
# * `OffsetMetadataManager.fetchOffsets` answers from the state at `lastCommittedOffset` (the
#   partition's high watermark): a commit answered without error is visible to every OffsetFetch
#   asked after its answer, until another commit replaces it; nothing in the run deletes offsets
#   (no OffsetDelete, and offsets.retention.minutes is days).
#
# KIP-848 "Reconciliation" adds that an owner's commits are accepted until it has revoked the
# partition, so an async commit still in flight when the partition changed hands may land before
# the new owner's OffsetFetch or be refused; the history cannot say which, so it may or may not
# be applied (the bound these rules use: an unanswered or failed-with-a-write-error commit is
# `MAYBE`).

#: a commit's outcome as its answer shows it
APPLIED = "applied"  # answered without error: applied before its answer
REFUSED = "refused"  # answered with an error validation throws before any write: never applied
MAYBE = "maybe"  # any other error, or no answer: applied at some time after its invoke, or never
COMMIT_OUTCOMES = (APPLIED, REFUSED, MAYBE)

#: errors `validateOffsetCommit` (and librdkafka before sending) raise before anything is written
REFUSING_ERRORS = frozenset({
    "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID", "STALE_MEMBER_EPOCH", "FENCED_MEMBER_EPOCH", "GROUP_ID_NOT_FOUND",
    "UNSUPPORTED_VERSION", "REBALANCE_IN_PROGRESS", "GROUP_AUTHORIZATION_FAILED", "TOPIC_AUTHORIZATION_FAILED",
    "OFFSET_METADATA_TOO_LARGE", "INVALID_COMMIT_OFFSET_SIZE", "UNKNOWN_TOPIC_OR_PART",
    "_NO_OFFSET", "_STATE", "_ASSIGNMENT_LOST", "_UNKNOWN_PARTITION", "_INVALID_ARG",
})


@dataclass(frozen=True)
class Commit:
    """One commit of one partition: the offset asked, when it was invoked and answered (history
    ns; `answered` None: no answer), and its outcome (`COMMIT_OUTCOMES`)."""

    offset: int
    invoked: int
    answered: int | None
    outcome: str

    def latest_application(self) -> float:
        """The last moment it may have been applied (never, for a refused one: -inf)."""
        if self.outcome == REFUSED:
            return float("-inf")
        return self.answered if self.outcome == APPLIED and self.answered is not None else float("inf")


#: offsets.commit.timeout.ms (Kafka's default): an appended commit not replicated by then is
#: answered REQUEST_TIMED_OUT, the one answer after which a client retries a write that may stand
OFFSETS_COMMIT_TIMEOUT_NS = 5_000_000_000


def may_have_been_retried(span_ns: int, under_fault: bool) -> bool:
    """Whether the client may have sent a commit more than once before the answer it reports.
    librdkafka retries an OffsetCommit whose attempt was answered REQUEST_TIMED_OUT, NOT_COORDINATOR,
    COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS, or lost with its connection
    (`rd_kafka_handle_OffsetCommit`), and reports only the last attempt's answer. The first two may
    follow an append that stands (see the note on `CoordinatorRuntime`), so a refusal answering a
    retry proves only that the retry wrote nothing. A retry needs the coordinator to move or its
    connection to drop (a fault or a rolling restart: `under_fault`), or an attempt that waited out
    offsets.commit.timeout.ms (a span at least that long)."""
    return under_fault or span_ns >= OFFSETS_COMMIT_TIMEOUT_NS


def commit_outcome(error: str | None, answered: bool, retried: bool = False) -> str:
    """What a commit's answer says about it: no error applied it; an error validation raises
    refused it, unless the client may have sent it before (`retried`: `may_have_been_retried`),
    when an earlier attempt may have been applied; any other error or no answer leaves it open
    (see the module's note on `CoordinatorRuntime`)."""
    if not answered:
        return MAYBE
    if not error:
        return APPLIED
    return REFUSED if error.split(":", 1)[0] in REFUSING_ERRORS and not retried else MAYBE


def _replaced_before(commits: Sequence[Commit], t: int) -> float:
    """The latest invoke of a commit acknowledged before `t`: a commit whose latest possible
    application came before it was replaced for certain by then (-inf: none)."""
    return max((c.invoked for c in commits if c.outcome == APPLIED and c.answered is not None and c.answered < t),
               default=float("-inf"))


def _current_at(commit: Commit, t: int, replaced_before: float) -> bool:
    """Whether `commit` may be the group's committed offset at time `t`: it may have been applied
    by then, and no commit applied for certain after it (invoked after its latest application,
    acknowledged before `t`: `replaced_before` is `_replaced_before(commits, t)`) replaced it."""
    return commit.outcome != REFUSED and commit.invoked <= t and commit.latest_application() >= replaced_before


def possible_committed_offsets(commits: Sequence[Commit], asked: int, answered: int) -> frozenset:
    """KIP-848 "Offset commit and fetch with the member epoch": the committed offsets an
    OffsetFetch asked at `asked` and answered at `answered` may return, given the group's commits
    of the partition: every commit that may be the committed offset at some moment of the fetch
    (`_current_at` the fetch's start, or, for one invoked during the fetch, its own invoke: no
    commit acknowledged before that was invoked after it), and None (no committed offset) while
    no commit had been answered without error before the fetch was asked."""
    replaced = _replaced_before(commits, asked)
    out = {c.offset for c in commits
           if c.outcome != REFUSED and c.invoked < answered and (c.invoked > asked or _current_at(c, asked, replaced))}
    if replaced == float("-inf"):
        out.add(None)
    return frozenset(out)


def acknowledged_floor(commits: Sequence[Commit], asked: int) -> int | None:
    """The greatest offset an acknowledged commit may still hold when a fetch is asked: the
    commits answered without error before `asked` that no later acknowledged commit replaced
    (None: none was acknowledged). What the group had certainly consumed up to."""
    replaced = _replaced_before(commits, asked)
    acked = [c.offset for c in commits if c.outcome == APPLIED and c.answered is not None and c.answered < asked
             and _current_at(c, asked, replaced)]
    return max(acked) if acked else None


def committed_offset_kept(answer: int | None, commits: Sequence[Commit], asked: int, answered: int) -> bool:
    """KIP-848 "Offset commit and fetch with the member epoch": a group's committed offset never
    goes back by itself. An OffsetFetch may not answer below what an acknowledged commit left
    (nor no offset at all) unless some commit that may have been applied during the fetch set the
    lower offset (a member that resumed lower after an explicit seek, and committed from there).
    False: the answer shows the group's committed offset gone back (`committed-offset-regression`)."""
    if answer in possible_committed_offsets(commits, asked, answered):
        return True
    floor = acknowledged_floor(commits, asked)
    return floor is None or (answer is not None and answer > floor)


def resume_within_commits(answer: int | None, commits: Sequence[Commit], asked: int, answered: int) -> bool:
    """KIP-848 "Offset commit and fetch with the member epoch": a member that takes over a
    partition resumes at the group's committed offset, so no record at or above it was skipped:
    an OffsetFetch answer above every offset an acknowledged commit left is allowed only as the
    offset of a commit that may have been applied during the fetch (an async commit whose answer
    had not come, a commit answered with a write error). False: the member resumes above anything
    the group committed (`resume-skip`)."""
    if answer is None or answer in possible_committed_offsets(commits, asked, answered):
        return True
    floor = acknowledged_floor(commits, asked)
    return floor is not None and answer <= floor


def redelivered(answer: int | None, commits: Sequence[Commit], asked: int) -> int:
    """Offsets the group sees again when a member resumes at `answer`: those between it and the
    acknowledged floor (at-least-once: allowed, counted). 0 when it resumes at or above it."""
    floor = acknowledged_floor(commits, asked)
    if floor is None:
        return 0
    return max(0, floor - (answer if answer is not None else 0))


# --- liveness: a freed partition is owned again -----------------------------------------------
#
# KIP-848 "Membership rules" (Liveness): a member that stops heartbeating for the session timeout
# is removed and the group epoch bumped; "Reconciliation": once an owner has revoked a partition
# (its heartbeat no longer lists it), the member the target assignment gives it to receives it
# on its next heartbeat. A partition freed by a revocation, a leave or a dead member is therefore
# owned again within the session timeout plus one heartbeat interval, by any member that stayed
# in the group that long. Both timeouts are the brokers' (under KIP-848 the coordinator gives them
# to its members: a client cannot set them); the checker passes the ones the run recorded
# (config.json `consumer_groups`), else Kafka's defaults (GroupCoordinatorConfig; the classic
# protocol's librdkafka defaults, session.timeout.ms 45000 and heartbeat.interval.ms 3000, stay
# inside the default bound). While a fault or a rolling restart is in
# force the coordinator may be unreachable or reloading (a member's leave lost with it is then
# noticed only a session timeout after the new coordinator loaded the group): that time does not count.

#: group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms defaults (ms)
SESSION_TIMEOUT_MS = 45000
HEARTBEAT_INTERVAL_MS = 5000


def reown_bound_ns(session_timeout_ms: int = SESSION_TIMEOUT_MS, heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS) -> int:
    """How long a freed partition may stay unowned, in ns of time no fault was in force: the group's
    session timeout (a member gone without a leave is removed after it) plus one heartbeat interval
    (the member the partition goes to hears of it on its next heartbeat)."""
    return (int(session_timeout_ms) + int(heartbeat_interval_ms)) * 1_000_000


#: the bound under Kafka's default timeouts
REOWN_BOUND_NS = reown_bound_ns()


def _not_paused_until(start: int, span: int, paused: Sequence[tuple[int, int]]) -> int:
    """The time `span` ns of unpaused time after `start`; `paused`: sorted, disjoint (from, to) spans."""
    t, left = start, span
    for a, b in paused:
        if b <= t:
            continue
        if a >= t + left:
            break
        left -= max(0, a - t)
        t = max(t, b)
    return t + left


def reown_deadline(freed: int, member_since: int, paused: Sequence[tuple[int, int]] = (),
                   bound: int = REOWN_BOUND_NS) -> int:
    """The latest time a partition freed at `freed` may stay without an owner, judged by a member
    in the group since `member_since` that stayed past it: `bound` of time without a fault in force
    after both (KIP-848 "Membership rules", Liveness; see the note above)."""
    return _not_paused_until(max(freed, member_since), bound, paused)


def reowned_in_time(owned_again: int | None, deadline: int) -> bool:
    """KIP-848 "Membership rules": a partition freed by its owner's revocation, leave or failure
    is owned again (some member's assignment gives it) by `deadline` (`reown_deadline`), when a
    member stayed in the group until then. False: the group left it unowned (`slow-rebalance`)."""
    return owned_again is not None and owned_again <= deadline
