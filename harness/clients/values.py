"""How a record value read from Kafka is written into the history.

Every reader (consumers, the raw-protocol prober) records values through `text`, so a
corrupted record (a flipped bit: faults.disk.BitFlip) is recorded, not raised on: its
undecodable bytes become backslash escapes, a value no send wrote, which the checker
flags as `inconsistent-offset` at that offset."""
from __future__ import annotations


def text(value: bytes | None) -> str | None:
    """The value as text; invalid UTF-8 kept visible (\\xNN), None (a tombstone) as None."""
    return None if value is None else bytes(value).decode("utf-8", "backslashreplace")
