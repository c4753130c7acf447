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
