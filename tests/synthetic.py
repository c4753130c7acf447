"""Synthetic *valid* histories: a simulated Kafka log driven by producers and consumers.

Used by the property tests (as the base that mutations break), the engine agreement
test and the benchmark. Records are yielded one at a time, so a 1e7-event history is
written to disk without being held in memory; the simulation keeps only per-partition
log contents as integer value ids.

Every poll carries its records' LogAppendTime stamps (`append_ms`), taken as each record lands,
and the wall clock's distance (`wall_minus_history_ms`); a prober now and then asks ListOffsets
for a real timestamp and is answered the first offset stamped at or after it.

What it exercises: concurrent sends (acknowledged out of call order, offsets given at
acknowledgement, which is a valid linearisation point), `info` sends that did or did not
happen, consumers that `assign` (from the beginning or a seek) and poll forward, and a
final reader per partition that reads every partition from the beginning.
"""
from __future__ import annotations

import copy
import random
from array import array
from bisect import bisect_left
from typing import Iterator

#: Unix ms at the history's time 0
WALL_MS = 1_790_000_000_000


def generate(events: int, seed: int = 0, partitions: int = 4, producers: int = 4,
             consumers: int = 2, topic: str = "t", info_rate: float = 0.02) -> Iterator[dict]:
    """Yield about `events` valid records (a few more for the final reads)."""
    rng = random.Random(seed)
    logs = [array("q") for _ in range(partitions)]  # value ids by offset
    stamps = [array("q") for _ in range(partitions)]  # LogAppendTime by offset, ms since time 0 (KIP-32)
    index = 0
    clock = 0
    next_value = 0
    next_process = producers + consumers
    producer_ids = list(range(producers))
    outstanding: dict[int, tuple[int, int]] = {}  # producer -> (partition, value id)
    consumer_ids = list(range(producers, producers + consumers))
    positions: dict[int, dict[int, int]] = {c: {} for c in consumer_ids}

    def record(process, type_, f, value):
        nonlocal index, clock
        clock += rng.randint(1, 1000)
        r = {"index": index, "time": clock, "process": process, "type": type_, "f": f, "value": value}
        index += 1
        return r

    def send_value(p, v):
        return {"topic": topic, "partition": p, "key": f"k{v % 16}", "value": f"v{v}"}

    def append(p, v):
        logs[p].append(v)
        stamps[p].append(clock // 1_000_000)  # the leader's clock as the record lands

    def poll(c, limit):
        recs, appended = [], []
        for p, pos in sorted(positions[c].items()):
            end = min(len(logs[p]), pos + rng.randint(0, limit))
            recs.extend([topic, p, o, f"v{logs[p][o]}"] for o in range(pos, end))
            appended.extend(stamps[p][pos:end])
            positions[c][p] = end
        return {"topic": topic, "records": recs, "append_ms": appended, "wall_minus_history_ms": WALL_MS}

    def by_time(p):
        target = clock // 1_000_000 - rng.randint(0, 2000)
        answer = bisect_left(stamps[p], target)  # stamps rise with the clock
        v = {"broker": 1, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": topic, "partition": p,
             "timestamp": WALL_MS + target, "current_leader_epoch": 0}
        return v, {**v, "version": 1, "error": "NONE", "offset": answer if answer < len(logs[p]) else -1,
                   "leader_epoch": 0}

    while index < events:
        roll = rng.random()
        if roll < 0.55:  # a producer calls or completes a send
            pid = rng.choice(producer_ids)
            if pid not in outstanding:
                p, v = rng.randrange(partitions), next_value
                next_value += 1
                outstanding[pid] = (p, v)
                yield record(pid, "invoke", "send", send_value(p, v))
                continue
            p, v = outstanding.pop(pid)
            if rng.random() < info_rate:  # timed out: maybe written, maybe not
                if rng.random() < 0.5:
                    append(p, v)
                yield record(pid, "info", "send", send_value(p, v))
                producer_ids[producer_ids.index(pid)] = next_process  # Jepsen: a new process
                next_process += 1
                continue
            append(p, v)
            yield record(pid, "ok", "send", {**send_value(p, v), "offset": len(logs[p]) - 1})
        elif roll < 0.60:  # a consumer (re)assigns
            c = rng.choice(consumer_ids)
            chosen = sorted(rng.sample(range(partitions), rng.randint(1, partitions)))
            value = {"partitions": [[topic, p] for p in chosen], "seek_to_beginning": True}
            positions[c] = {p: 0 for p in chosen}
            if rng.random() < 0.5:  # seek somewhere inside the log instead
                positions[c] = {p: rng.randint(0, len(logs[p])) for p in chosen}
                value = {"partitions": value["partitions"],
                         "seek": {f"{topic}/{p}": o for p, o in positions[c].items()}}
            yield record(c, "invoke", "assign", value)
            yield record(c, "ok", "assign", value)
        elif roll < 0.62:  # the prober asks for a time
            asked, answered = by_time(rng.randrange(partitions))
            yield record("prober", "invoke", "list_offsets", asked)
            yield record("prober", "ok", "list_offsets", answered)
        else:  # a consumer polls
            c = rng.choice(consumer_ids)
            yield record(c, "invoke", "poll", {"topic": topic})
            yield record(c, "ok", "poll", poll(c, 8))

    for pid, (p, v) in sorted(outstanding.items()):  # end of run: the rest were acknowledged
        append(p, v)
        yield record(pid, "ok", "send", {**send_value(p, v), "offset": len(logs[p]) - 1})
    final = next_process
    value = {"partitions": [[topic, p] for p in range(partitions)], "seek_to_beginning": True}
    yield record(final, "invoke", "assign", value)
    yield record(final, "ok", "assign", value)
    positions[final] = {p: 0 for p in range(partitions)}
    while any(positions[final][p] < len(logs[p]) for p in range(partitions)):
        yield record(final, "invoke", "poll", {"topic": topic})
        yield record(final, "ok", "poll", poll(final, 500))


def mutated(records):
    """A few anomalies of different kinds in one history."""
    records = copy.deepcopy(records)
    polls = [r for r in records if r["f"] == "poll" and r["type"] == "ok" and len(r["value"]["records"]) > 2]
    polls[0]["value"]["records"][1][3] = "forged"  # inconsistent-offset
    polls[-1]["value"]["records"].append(list(polls[-1]["value"]["records"][0]))  # nonmonotonic-poll
    return records
