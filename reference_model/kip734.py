"""KIP-734 (ListOffsets for the largest timestamp, -3): which offset the answer names.

The answer is the offset and timestamp of the record with the largest timestamp in the log
(KIP-734 "Proposed Changes"). Several records may carry that timestamp: a LogAppendTime batch
stamps all its records alike, and CreateTime records made in one millisecond share theirs. Kafka
names the first of them: the first segment and the first batch whose maximum it is, and in that
batch the first record stamped with it (4.3.1: `UnifiedLog.fetchOffsetByTimestamp` with
`RecordBatch.offsetOfMaxTimestamp`). An answer at or above the high watermark (or the LSO for
read_committed) is withheld: offset -1, not judged here.
"""
from __future__ import annotations

from . import profiles
from .kip1023 import MAX_TIMESTAMP  # noqa: F401  (the ListOffsets timestamp that asks for the largest one)
from .profiles import Profile


def max_timestamp_answer_allowed(answer: int, first_with_its_stamp: int | None, stamp_at_ms: int | None = None,
                                 answered_ms: int | None = None, tolerance_ms: int = 0,
                                 profile: Profile | str = "kip") -> bool:
    """KIP-734 "Proposed Changes" (ListOffsets with -3: the offset and timestamp of the record with
    the largest timestamp; Kafka names the first record stamped with it): the record at `answer`
    carries the timestamp the answer gives (`stamp_at_ms` against `answered_ms`, Unix ms, within
    `tolerance_ms`; None: unknown), and no record below it is proven to carry the same stamp
    (`first_with_its_stamp`: the lowest such offset, None when none is proven). A record below
    stamped alike means the answer is not the first of its timestamp: either that stamp is the
    largest and the earlier record is the one to name, or it is not the largest at all.

    `max-timestamp-shallow-offset` (Kafka 3.3-3.7, KAFKA-16310): the answer may be the last of its
    run of records stamped alike, still stamped as it says."""
    if answer < 0:
        return True
    if stamp_at_ms is not None and answered_ms is not None and abs(stamp_at_ms - answered_ms) > tolerance_ms:
        return False
    if first_with_its_stamp is None or first_with_its_stamp >= answer:
        return True
    return profiles.get(profile).allows(profiles.MAX_TIMESTAMP_SHALLOW_OFFSET)
