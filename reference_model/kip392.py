"""KIP-392: Allow consumers to fetch from closest replica.

Each rule is a small function named after what it decides; its docstring names the
KIP section. Values are those of `state.Replica` / `state.PartitionState`; `None`
means unknown, and then every outcome that some value allows is allowed.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from . import profiles
from .profiles import Profile
from .state import (
    NO_PREFERENCE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_OFFSET,
    PartitionState,
    Replica,
)

#: the errors a consumer fetch answers in the cases of "Out of range handling" (others, such as
#: NOT_LEADER_OR_FOLLOWER, say the replica cannot serve at all)
CASE_ERRORS = frozenset({NONE, OFFSET_OUT_OF_RANGE, OFFSET_NOT_AVAILABLE})

# Names of the fetch-offset cases of "Out of range handling".
READABLE = "readable"  # committed and local: records may be returned
AT_END = "at-end"  # offset == HWM == LEO: nothing to return yet, no error
CASE1 = "case1-uncommitted"  # HWM <= offset <= LEO (not AT_END)
CASE2 = "case2-unavailable"  # LEO <= offset < HWM
CASE3 = "case3-too-small"  # offset < log start
CASE4 = "case4-too-large"  # offset > LEO and offset >= HWM


@dataclass(frozen=True)
class FetchOutcome:
    """One allowed answer for one partition of a consumer fetch.

    Records may be returned only at offsets below `records_below` (equal to the
    fetch offset: none at all). `hwm` / `log_start` None: any value is allowed."""

    error: str
    records_below: int
    hwm: int | None = None
    log_start: int | None = None

    def matches(self, error: str, record_offsets, hwm: int | None, log_start: int | None) -> bool:
        return (
            error == self.error
            and all(o < self.records_below for o in record_offsets)
            and (self.hwm is None or hwm == self.hwm)
            and (self.log_start is None or log_start == self.log_start)
        )


def records_committed(record_offsets, reported_hwm: int | None, profile: Profile,
                      later_hwms: tuple[tuple[int, bool], ...] = ()) -> bool:
    """KIP-392 "Follower Fetching": any replica returns only committed data, i.e. offsets
    below the high watermark its response reports (unknown HWM: nothing to judge).

    With `response-hwm-sampled-before-read` (Kafka) the reported HWM may predate the
    read, which is bounded by the HWM *at read time*. That HWM is <= every HWM the same
    replica sampled after the response, in the same leader epoch and process life. So a
    record at or above the reported HWM is explained unless such a later HWM is at or
    below it; that the record was committed at all is `read_value_committed`'s question.
    `later_hwms` are (hwm, strictly_after) for that replica's HWM answers in the same epoch
    and life that completed after the response; strictly_after: invoked after it completed
    (an answer invoked earlier may have sampled its HWM before this read).

    A read that reports no HWM at all (`reported_hwm` None: a consumer's poll) is judged by
    `later_hwms` alone, under every profile: its records were below the serving replica's HWM
    when read, and `later_hwms` are then those the partition's leader answered in the leader
    epoch and life the read was served in (a follower's HWM is one that leader sent it), which
    that HWM does not exceed when asked after the read."""
    if reported_hwm is None:
        return not any(h <= o for o in record_offsets for h, strictly_after in later_hwms if strictly_after)
    if reported_hwm < 0:
        return True
    above = [o for o in record_offsets if o >= reported_hwm]
    if not above:
        return True
    if not profile.allows(profiles.RESPONSE_HWM_SAMPLED_BEFORE_READ):
        return False
    top = max(above)
    return not any(h <= top for h, strictly_after in later_hwms if strictly_after)


def sent_before_read(read_index: int, send_invoked_index: int) -> bool:
    """KIP-392 "Follower Fetching": a replica returns only committed records, and a record
    is committed only after its producer sent it. So a read that ended before the send of
    the value it returned was even called (history indices) returned an uncommitted record
    (one no broker had yet); True: the send came first, as it must."""
    return send_invoked_index < read_index


def read_value_committed(value, committed_values) -> bool:
    """KIP-392 "Follower Fetching": a record a replica returns is committed, and a
    committed offset holds one record for good (no replica truncates below the HWM). So
    a record read at an offset where the history shows another committed record (read
    below some answer's HWM, or acknowledged with acks=all) was never committed, whatever
    HWM the read reported. `committed_values`: the values proven committed at that offset."""
    return all(c == value for c in committed_values)


def hwm_may_go_back(is_leader: bool | None, profile: Profile, *, after_epoch_change: bool = False,
                    rose_in_epoch: bool = False, back_in_epoch: bool = False, to: int | None = None,
                    leader_floor: int | None = None) -> bool:
    """KIP-392 "High watermark propagation" (with KIP-207): the HWM a replica exposes
    never goes back within one leader epoch.

    With `follower-hwm-follows-leader` (Kafka) a follower may, once: it carries its old
    HWM into the new epoch and kafka.server.ReplicaFetcherThread.processPartitionData
    copies the new leader's (possibly lagging) HWM from the first fetch response; after
    that it only follows the new leader, whose HWM does not go back. So it is allowed
    only on a known follower (`is_leader` False), after a leader-epoch change in the same
    process life (`after_epoch_change`: the replica was seen in an earlier epoch), while
    its HWM had not yet risen in this epoch (`rose_in_epoch`) and had not gone back in
    it before (`back_in_epoch`). And only as deep as the new leader's HWM could have been
    when the follower copied it: `to` (the HWM it went back to) is not below
    `leader_floor`, the least HWM the new leader had by then (its HWM never goes back
    while it leads, and it carries the HWM it had as a follower into its epoch; None:
    nothing known, any depth)."""
    return (is_leader is False and profile.allows(profiles.FOLLOWER_HWM_FOLLOWS_LEADER)
            and after_epoch_change and not rose_in_epoch and not back_in_epoch
            and (to is None or leader_floor is None or to >= leader_floor))


def classify_fetch_offset(offset: int, log_start: int, leo: int, hwm: int) -> str:
    """KIP-392 "Out of range handling": which of the four cases an offset is in.

    Case 3 (below log start) wins; then committed-and-local offsets are readable;
    an offset at HWM == LEO is the ordinary end of the log."""
    if offset < log_start:
        return CASE3
    if offset < min(hwm, leo):
        return READABLE
    if offset == hwm == leo:
        return AT_END
    if hwm <= offset <= leo:
        return CASE1
    if leo <= offset < hwm:
        return CASE2
    return CASE4


def fetch_case_outcomes(case: str, offset: int, log_start: int, hwm: int, profile: Profile) -> frozenset[FetchOutcome]:
    """KIP-392 "Out of range handling", cases 1-4, and "Follower Fetching" (only
    committed data): the answers allowed for one case: the KIP's answer
    (`kip_case_outcomes`) and whatever the profile's deviations add
    (`deviation_case_outcomes`). A profile only widens: it never forbids the KIP's answer."""
    return kip_case_outcomes(case, offset, log_start, hwm) | deviation_case_outcomes(case, offset, log_start, hwm, profile)


def kip_case_outcomes(case: str, offset: int, log_start: int, hwm: int) -> frozenset[FetchOutcome]:
    """KIP-392 "Out of range handling" (cases 1-4) and "Follower Fetching": the KIP's own
    answer for one case. Committed local data is returned up to the HWM; case 1 (offset
    in [HWM, LEO]) and case 2 ([LEO, HWM)) are OFFSET_NOT_AVAILABLE; cases 3 and 4 are
    OFFSET_OUT_OF_RANGE carrying the replica's log start and HWM ("Case 3")."""
    none_beyond = offset  # records_below == offset: no records
    if case == READABLE:
        return frozenset({FetchOutcome(NONE, hwm, hwm, log_start)})
    if case == AT_END:
        return frozenset({FetchOutcome(NONE, none_beyond, hwm, log_start)})
    if case in (CASE1, CASE2):
        return frozenset({FetchOutcome(OFFSET_NOT_AVAILABLE, none_beyond)})
    return frozenset({FetchOutcome(OFFSET_OUT_OF_RANGE, none_beyond, hwm, log_start)})


def deviation_case_outcomes(case: str, offset: int, log_start: int, hwm: int,
                            profile: Profile) -> frozenset[FetchOutcome]:
    """KIP-392 "Out of range handling" as a release answers it, beside the KIP's answer:
    `fetch-above-hwm-empty` answers case 1 with NONE, no records, its HWM and log start;
    `out-of-range-without-offsets` answers cases 3 and 4 with log start and HWM -1."""
    out: set[FetchOutcome] = set()
    if case == CASE1 and profile.allows(profiles.FETCH_ABOVE_HWM_EMPTY):
        out.add(FetchOutcome(NONE, offset, hwm, log_start))
    if case in (CASE3, CASE4) and profile.allows(profiles.OUT_OF_RANGE_WITHOUT_OFFSETS):
        out.add(FetchOutcome(OFFSET_OUT_OF_RANGE, offset, UNKNOWN_OFFSET, UNKNOWN_OFFSET))
    return frozenset(out)


def tiered_read_out_of_range(offset: int, serving_is_leader: bool | None, leader_local_start_after: int | None,
                             hwm_before_max: int | None, profile: Profile) -> bool:
    """KIP-405 "Consumer Fetch Requests" with KIP-392 "Follower Fetching": a replica serves an
    offset in its tiered range [log start, local log start) from remote storage. Under
    `tiered-read-out-of-range` (Kafka) a follower rebuilding its log from the tier answers
    OFFSET_OUT_OF_RANGE (HWM, log start -1) there instead: on a replica not proven leader, at an
    offset below the leader's local log start answered after the fetch (same leader epoch and
    life), while every HWM the replica reported before in its life is at most that start.
    `leader_local_start_after` None: tiered storage not proven, so not allowed. This is a
    deliberate exception to "None allows everything": without it, every follower
    OFFSET_OUT_OF_RANGE of a run without tiered storage would be accepted."""
    return (profile.allows(profiles.TIERED_READ_OUT_OF_RANGE) and serving_is_leader is not True
            and leader_local_start_after is not None and offset < leader_local_start_after
            and (hwm_before_max is None or hwm_before_max <= leader_local_start_after))


@dataclass(frozen=True)
class LogBounds:
    """What other answers prove about a replica's log at the moment it answered (the
    LEO is never observed, but it is bounded). None: no bound known."""

    leo_min: int | None = None  # the LEO is at least this
    leo_max: int | None = None  # the LEO is at most this
    log_start_max: int | None = None  # the log start is at most this
    hwm_max: int | None = None  # the HWM is at most this (`partition_log_bounds`)

    def admits(self, log_start: int, leo: int, hwm: int | None = None) -> bool:
        return ((self.leo_min is None or leo >= self.leo_min) and (self.leo_max is None or leo <= self.leo_max)
                and (self.log_start_max is None or log_start <= self.log_start_max)
                and (hwm is None or self.hwm_max is None or hwm <= self.hwm_max))

    def points(self) -> list[int]:
        return [v for v in (self.leo_min, self.leo_max, self.log_start_max, self.hwm_max) if v is not None]


def partition_log_bounds(leo_max: int | None) -> LogBounds:
    """KIP-392 "High watermark propagation": an upper bound on the LEO of every replica of
    a partition (what its writes allow) bounds every replica's HWM too: a follower's HWM is
    one the leader sent it, and the leader's HWM is an offset its own log reached. (Case 2
    lets a follower's HWM exceed its *own* LEO, never the leader's.)"""
    return LogBounds(leo_max=leo_max, hwm_max=leo_max)


def leo_reached_leader_hwm(leader_hwm: int | None, in_isr: bool) -> int | None:
    """KIP-392 "High watermark propagation" (case 1 vs case 2): the leader advances its
    HWM only to an offset every ISR member's log has reached, so while a follower is in
    the ISR of a leader epoch its LEO is at least every HWM that epoch's leader reported
    before (an offset in [its own HWM, the leader's HWM) is case 1, never case 2 or 4).
    None: nothing proven (not in the ISR, or no leader HWM known)."""
    return leader_hwm if in_isr and leader_hwm is not None and leader_hwm >= 0 else None


NO_BOUNDS = LogBounds()


def _candidates(offset: int, known: list[int]) -> list[int]:
    """Values an unknown offset may take that matter for the case comparisons."""
    points = {offset, *known}
    return sorted({p + d for p in points for d in (-1, 0, 1)} | {offset + 2})


def consistent_replicas(replica: Replica, offset: int, profile: Profile, bounds: LogBounds = NO_BOUNDS):
    """Concrete (log_start, leo, hwm) triples consistent with what is known.

    Invariants used: log start <= LEO and log start <= HWM (a HWM below the log
    start is raised to it). KIP-392 "Follower Fetching" lets an out-of-sync follower's
    HWM exceed its LEO (case 2). `hwm-capped-at-leo` (Kafka never does) only removes
    states, and a profile never forbids what the KIP allows, so it changes nothing here.
    `bounds` restricts the unknown LEO, log start and HWM to what other answers prove."""
    known = [v for v in (replica.log_start, replica.leo, replica.hwm) if v is not None] + bounds.points()
    cands = _candidates(offset, known)
    choices = [[v] if v is not None else [c for c in cands if c >= 0] for v in (replica.log_start, replica.leo, replica.hwm)]
    for s, e, h in product(*choices):
        if s <= e and s <= h and bounds.admits(s, e, h):
            yield s, e, h


def consumer_fetch_outcomes(replica: Replica, offset: int, profile: Profile | str = "kip",
                            bounds: LogBounds = NO_BOUNDS) -> frozenset[FetchOutcome]:
    """KIP-392 "Follower Fetching" + "Out of range handling": every answer a replica
    in a state consistent with `replica` (and `bounds`) may give a consumer fetching at
    `offset`. Kafka's LocalLog.read throws OffsetOutOfRange only when the offset is above
    the LEO (or below the log start), so an answer no LEO within `bounds` explains is
    not allowed under any profile."""
    profile = profiles.get(profile)
    out: set[FetchOutcome] = set()
    for s, e, h in consistent_replicas(replica, offset, profile, bounds):
        out |= fetch_case_outcomes(classify_fetch_offset(offset, s, e, h), offset, s, h, profile)
    return frozenset(out)


def follower_fetch_outcomes(leader: Replica, offset: int) -> frozenset[FetchOutcome]:
    """KIP-392 "Follower Fetching": replication itself reads up to the leader's LEO
    (followers replicate uncommitted data); below log start is out of range."""
    if offset < leader.log_start or offset > leader.leo:
        return frozenset({FetchOutcome(OFFSET_OUT_OF_RANGE, offset)})
    return frozenset({FetchOutcome(NONE, leader.leo, leader.hwm, leader.log_start)})


def follower_learns_hwm(follower: Replica, leader_hwm: int, profile: Profile | str = "kip") -> Replica:
    """KIP-392 "High watermark propagation": a follower takes the HWM from the leader's
    fetch response; the KIP lets it exceed the follower's LEO (case 2), Kafka caps it."""
    profile = profiles.get(profile)
    hwm = max(leader_hwm, follower.log_start or 0)
    if profile.allows(profiles.HWM_CAPPED_AT_LEO) and follower.leo is not None:
        hwm = min(hwm, follower.leo)
    return follower.with_(hwm=hwm)


# --- Finding the preferred follower -------------------------------------------------

def eligible_read_replicas(partition: PartitionState, fetch_offset: int) -> tuple[Replica, ...]:
    """KIP-392 "Finding the preferred follower": the replicas a selector may pick:
    in-sync replicas with log start <= fetch offset <= LEO (an unknown log start or
    LEO may satisfy it), and always the leader. Kafka 4.3.1 does exactly this
    (`ReplicaManager.findPreferredReadReplica`: the leader's `Partition.inSyncReplicaIds`,
    `logStartOffset <= fetchOffset <= logEndOffset`, and only replicas with a live
    endpoint in the metadata cache, i.e. not offline)."""
    return tuple(
        r
        for r in partition.replicas
        if r.broker == partition.leader
        or (r.broker in partition.isr and (r.log_start is None or r.log_start <= fetch_offset)
            and (r.leo is None or fetch_offset <= r.leo))
    )


def leader_selector(partition: PartitionState, client_rack: str | None, fetch_offset: int) -> frozenset[int]:
    """KIP-392 "Broker API", LeaderSelector: always the current leader."""
    return frozenset({partition.leader})


def rack_aware_selector(partition: PartitionState, client_rack: str | None, fetch_offset: int) -> frozenset[int]:
    """KIP-392 "Broker API", RackAwareReplicaSelector: no client rack -> the leader;
    the leader if it is in the client's rack; else the most caught-up (largest LEO)
    eligible replica of that rack (ties: any of them; an unknown LEO may be the
    largest); no such replica -> the leader. Kafka 4.3.1: `RackAwareReplicaSelector.select`
    (most caught up by `ReplicaView.comparator`: LEO, then time since last caught up)."""
    if not client_rack:
        return frozenset({partition.leader})
    same_rack = [r for r in eligible_read_replicas(partition, fetch_offset) if r.rack == client_rack]
    if not same_rack:
        return frozenset({partition.leader})
    if any(r.broker == partition.leader for r in same_rack):
        return frozenset({partition.leader})
    best = max((r.leo for r in same_rack if r.leo is not None), default=None)
    return frozenset(r.broker for r in same_rack if r.leo is None or r.leo == best)


SELECTORS = {"LeaderSelector": leader_selector, "RackAwareReplicaSelector": rack_aware_selector}


def preferred_read_replica_outcomes(
    partition: PartitionState, broker: int, replica_id: int, client_rack: str | None, fetch_offset: int,
    selector: str = "RackAwareReplicaSelector",
) -> frozenset[int]:
    """KIP-392 "Protocol Changes": the PreferredReadReplica field a broker may answer.

    Only the leader selects, and only for consumers (replica id < 0); the leader
    itself is sent as -1 ("fetch from the leader")."""
    if broker != partition.leader or replica_id >= 0:
        return frozenset({NO_PREFERENCE})
    chosen = SELECTORS[selector](partition, client_rack, fetch_offset)
    return frozenset(NO_PREFERENCE if b == partition.leader else b for b in chosen)


# --- OffsetsForLeaderEpoch and the consumer's reset rules ----------------------------

@dataclass(frozen=True)
class EpochEndOffset:
    error: str
    leader_epoch: int = -1
    end_offset: int = -1


def epoch_end_offset(epochs: tuple[tuple[int, int], ...], leo: int, requested: int) -> tuple[int, int]:
    """KIP-320 (used by KIP-392 "Case 4"): the largest epoch <= requested and its end
    offset: the next epoch's start offset, or the LEO for the latest epoch.
    `epochs` are (epoch, start offset) in increasing order; (-1, -1) if none fits."""
    found = [(e, i) for i, (e, _) in enumerate(epochs) if e <= requested]
    if not found:
        return (-1, -1)
    epoch, i = found[-1]
    end = epochs[i + 1][1] if i + 1 < len(epochs) else leo
    return (epoch, end)


def offsets_for_leader_epoch(
    partition: PartitionState, broker: int, epochs: tuple[tuple[int, int], ...], requested_epoch: int,
    consumer: bool, profile: Profile | str = "kip",
) -> frozenset[EpochEndOffset]:
    """KIP-392 "Protocol Changes" (OffsetsForLeaderEpoch): only the leader answers;
    for a consumer the end offset is capped at the HWM, and a new leader whose HWM
    still lags answers the latest epoch with OFFSET_NOT_AVAILABLE."""
    profile = profiles.get(profile)
    if broker != partition.leader:
        return frozenset({EpochEndOffset(NOT_LEADER_OR_FOLLOWER)})
    leader = partition.leader_replica
    epoch, end = epoch_end_offset(epochs, leader.leo, requested_epoch)
    if not consumer or profile.allows(profiles.OFFSETS_FOR_LEADER_EPOCH_UNCAPPED) or epoch < 0:
        return frozenset({EpochEndOffset(NONE, epoch, end)})
    if partition.hwm_pending and epoch == partition.leader_epoch:
        return frozenset({EpochEndOffset(OFFSET_NOT_AVAILABLE)})
    return frozenset({EpochEndOffset(NONE, epoch, min(end, leader.hwm))})


def epoch_end_offset_possible(end_offset: int, leo_max: int | None) -> bool:
    """KIP-320 / KIP-392 "Protocol Changes": an OffsetsForLeaderEpoch end offset is at
    most the answering leader's LEO (the KIP caps it further at the HWM; Kafka's
    UnifiedLog.endOffsetForEpoch answers the LEO for the latest epoch). So under every
    profile it never exceeds an upper bound on that LEO at answer time."""
    return leo_max is None or end_offset <= leo_max


def out_of_range_action(fetch_offset: int, log_start: int, epoch_known: bool) -> str:
    """KIP-392 "Case 3" / "Case 4": what a consumer does on OFFSET_OUT_OF_RANGE.

    Below the replica's log start: skip the KIP-320 truncation check and apply the
    reset policy ("reset"). Otherwise validate the position with the leader by
    OffsetsForLeaderEpoch ("validate"), or reset if no epoch is known."""
    if fetch_offset < log_start or not epoch_known:
        return "reset"
    return "validate"


def validation_result(fetch_offset: int, fetch_epoch: int, answer: EpochEndOffset) -> str:
    """KIP-392 "Case 4" steps a-c: the leader's answer for the fetch epoch proves the
    offset valid ("continue": same epoch, end offset >= fetch offset) or truncated."""
    if answer.error != NONE:
        return "retry"
    if answer.leader_epoch == fetch_epoch and answer.end_offset >= fetch_offset:
        return "continue"
    return "truncated"


def reset_offset(policy: str, serving: Replica, leader: Replica) -> int:
    """KIP-392 "Case 3" reset rules: "earliest" -> the log start of the replica the
    consumer fetches from; "latest" -> the leader's end offset as a consumer sees it
    (its HWM); "none" -> an error to the application."""
    if policy == "earliest":
        return serving.log_start
    if policy == "latest":
        return leader.hwm
    if policy == "none":
        raise LookupError("reset policy none: no offset to reset to")
    raise ValueError(f"unknown reset policy {policy!r}")
