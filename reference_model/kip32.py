"""KIP-32 (timestamps in Kafka messages): where a LogAppendTime stamp may lie.

With `message.timestamp.type=LogAppendTime` the leader overwrites a batch's timestamp with its
own wall clock when it appends the batch (4.3.1: `LogValidator.validateMessagesAndAssignOffsets`
takes `time.milliseconds()` once per append); followers copy the batch as it is, so a record
keeps the stamp of the leader that first appended it, and a consumer reads that stamp
(`DefaultRecordBatch`: a LogAppendTime batch's records report its max timestamp). The append
happens after the producer sent the record and before the producer's acknowledgement, on the
clock of whichever node led then: the machine's clock moved by that node's skew.
"""
from __future__ import annotations

from typing import Iterable


def append_time_allowed(stamp_ms: int, sent_ms: int, acked_ms: int | None, skews_ms: Iterable[int],
                        tolerance_ms: int) -> bool:
    """KIP-32 "Proposed Changes" (LogAppendTime: the broker's time when it appends): a stamp lies
    between the send and its acknowledgement, each moved by a skew some leader's clock may have
    had meanwhile (0 among them); an unacknowledged send (`acked_ms` None) bounds it only from
    below. `tolerance_ms` absorbs ms truncation and the two clocks' readings on one machine."""
    for skew in skews_ms:
        if stamp_ms >= sent_ms + skew - tolerance_ms and (acked_ms is None or stamp_ms <= acked_ms + skew + tolerance_ms):
            return True
    return False


def offset_for_time_allowed(answer: int, target_ms: int, highest_stamp_below: int | None, stamp_at: int | None,
                            tolerance_ms: int) -> bool:
    """KIP-32 / KIP-79 "Proposed Changes" (ListOffsets by timestamp, searched through KIP-33's time
    index): the answer is the earliest offset whose timestamp is at or after the target. So no
    record below the answer is stamped at or after it (`highest_stamp_below`: the highest stamp
    known below the answer, None when none is known), and the record at the answer is not
    stamped before it (`stamp_at`, None when unknown). Stamps out of order (a leader's clock set
    back) do not change this: the time index keeps the running maximum, so the search still
    stops at the first offset at or after the target (4.3.1: `LogSegment.findOffsetByTimestamp`)."""
    if answer < 0:
        return True  # nothing at or after the target below the high watermark: not judged here
    if highest_stamp_below is not None and highest_stamp_below >= target_ms + tolerance_ms:
        return False
    return stamp_at is None or stamp_at > target_ms - tolerance_ms
