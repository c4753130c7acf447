"""Hand-made raw-protocol histories with explicit times (ns): `H` (sends, polls, fetches,
metadata, faults, ListOffsets), the preferred-replica, fetch-session and ListOffsets
scenarios built on it, and `every_gap`: one history with each of issue 10's section-3 gaps."""

S = 1_000_000_000  # ns


class H:
    """A history builder with explicit times (ns): `op` adds an invoke and its ok."""

    def __init__(self):
        self.records = []

    def add(self, process, type_, f, value, t):
        self.records.append({"index": len(self.records), "time": t, "process": process, "type": type_, "f": f,
                             "value": value})
        return self

    def op(self, process, f, inv, done, t, dt=1_000_000):
        return self.add(process, "invoke", f, inv, t).add(process, "ok", f, {**inv, **done}, t + dt)

    def send(self, value, offset, t, p=0):
        return self.op(0, "send", {"topic": "t", "partition": p, "value": value}, {"offset": offset}, t)

    def poll(self, proc, t, *recs, p=0):
        return self.op(proc, "poll", {"topic": "t"}, {"records": [["t", p, o, v] for o, v in recs]}, t)

    def fetch(self, t, offset, recs, broker=2, hwm=100, pref=-1, rack="r2", proc=7, p=0, error="NONE", epoch=5):
        inv = {"broker": broker, "replica_id": -1, "rack": rack, "session_id": 0, "session_epoch": -1,
               "current_leader_epoch": epoch, "topic": "t", "partition": p, "fetch_offset": offset, "version": 18}
        return self.op(proc, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "error": error,
                                            "high_watermark": hwm, "last_stable_offset": hwm, "log_start_offset": 0,
                                            "preferred_read_replica": pref, "records": [list(r) for r in recs]}, t)

    def meta(self, t, broker=1, leader=1, epoch=5, isr=(1, 2, 3), offline=(), p=0):
        return self.op("observer", "metadata", {"broker": broker, "topic": "t", "partition": p},
                       {"error": "NONE", "leader": leader, "leader_epoch": epoch, "isr": list(isr),
                        "replicas": [1, 2, 3], "offline": list(offline),
                        "racks": {"1": "r1", "2": "r2", "3": "r3"}}, t)

    def fault(self, t, kind, targets, phase="start"):
        return self.add("nemesis", "info", "fault", {"fault": kind, "targets": list(targets), "phase": phase}, t)

    def list_offsets(self, t, ts, offset, iso="read_uncommitted", epoch=5, broker=1, proc=8):
        inv = {"broker": broker, "replica_id": -1, "isolation_level": iso, "topic": "t", "partition": 0,
               "timestamp": ts, "current_leader_epoch": epoch, "version": 11}
        return self.op(proc, "list_offsets", inv, {"error": "NONE", "offset": offset, "leader_epoch": epoch}, t)


def written() -> H:
    return H().send("a", 0, 0).send("b", 1, 10 * S // 1000).send("c", 2, 20 * S // 1000)


def prr(pref=2, rack="r2", isr=((1, 2, 3), (1, 2, 3), (1, 2, 3)), leader=1, offline=(), fault=None, late=2 * S,
        epoch=5):
    """Broker 1's metadata before the fetch, right after it and `late` after it; the
    fetch to broker 1 at 1 s names `pref`."""
    h = H().meta(0, leader=leader, isr=isr[0], offline=offline)
    h.fetch(S, 0, [], broker=1, pref=pref, rack=rack, epoch=epoch)
    h.meta(S + S // 10, leader=leader, isr=isr[1], offline=offline)
    if fault:
        h.fault(S + S // 5, fault, [2])
    h.meta(S + late, leader=leader, isr=isr[2], offline=offline)
    return h


def killed(times=range(0, 21), at=10 * S, isr=(1, 2), offline=(3,), broker=2, shows=None, fault=None, epoch=5,
           running=("kill", 3)):
    """Broker 3 killed: `broker`'s metadata every second (`times`) shows it out of the ISR and
    offline (`shows`: {second: isr} overrides), broker 1 (the leader, with no answers of
    its own) names 3 as the preferred replica to a client in rack r3 at `at`. `running`: a
    fault (kind, target) started before and never stopped."""
    h = H()
    if running:
        h.fault(-S, running[0], [running[1]])
    for t in times:
        h.meta(t * S, broker=broker, isr=(shows or {}).get(t, isr), offline=offline if t not in (shows or {}) else ())
        if fault is not None and t == fault:
            h.fault(t * S + S // 2, "pause", [2])
    return h.fetch(at, 0, [], broker=1, pref=3, rack="r3", epoch=epoch)


def part(offset=0, hwm=10, start=0, recs=(), error="NONE", omitted=False, missing=False, pref=-1):
    e = {"topic": "t", "partition": 0, "fetch_offset": offset, "error": error}
    if omitted:
        return {**e, "omitted": True}
    e.update(high_watermark=hwm, last_stable_offset=hwm, log_start_offset=start, preferred_read_replica=pref,
             records=[[o, f"v{o}"] for o in recs])
    return {**e, "missing": True} if missing else e


def sess(h, t, sid, epoch, rid, parts, top="NONE", sent=None, replica_id=-1):
    inv = {"broker": 1, "replica_id": replica_id, "rack": "r1", "session_id": sid, "session_epoch": epoch, "version": 18,
           "partitions": [{"topic": "t", "partition": 0, "fetch_offset": p["fetch_offset"]}
                          for p in (parts if sent is None else sent)]}
    return h.op(6, "fetch", inv, {"top_error": top, "response_session_id": rid, "partitions": parts}, t)


def opened(hwm=10, replica_id=-1):
    return sess(H(), 0, 0, 0, 42, [part(10, hwm=hwm)], replica_id=replica_id)


def omitted_after(hwm=12, recs=(), when=S, epoch=5, fault=None, earlier_epoch=False, leader=1, meta_after=3 * S):
    """Broker 1's session 42 last sent t/0 with HWM 10 at fetch offset 10; at `when` another
    client's sessionless fetch to broker 1 reported HWM `hwm` (and returned `recs`); at 2 s
    the session's incremental response leaves t/0 out. Broker 1's metadata: epoch 5 under
    `leader` at 0.5 s and `meta_after`, and epoch 4 at 0.25 s when `earlier_epoch`."""
    h = sess(H(), 0, 0, 0, 42, [part(10, hwm=10)])
    if earlier_epoch:
        h.meta(S // 4, epoch=4, leader=1)
    h.meta(S // 2, leader=leader)
    events = [(when, lambda: h.fetch(when, 10, recs, broker=1, hwm=hwm, epoch=epoch, rack="r1")),
              (2 * S, lambda: sess(h, 2 * S, 42, 1, 42, [part(10, omitted=True)], sent=[])),
              (meta_after, lambda: h.meta(meta_after, leader=leader))]
    if fault:
        events.append((S + S // 2, lambda: h.fault(S + S // 2, fault, [1])))
    for _, add in sorted(events, key=lambda e: e[0]):
        add()
    return h


def offsets(*answers, fault=None, epochs=None):
    """ListOffsets answers of broker 1 (timestamp, offset[, isolation]) a second apart."""
    h = H()
    for i, a in enumerate(answers):
        if fault is not None and i == fault[0]:
            h.fault(i * S - S // 2, fault[1], [1])
        h.list_offsets(i * S, a[0], a[1], *a[2:], epoch=(epochs or {}).get(i, 5))
    return h


def _on_topic(record: dict, topic: str) -> dict:
    v = record["value"]
    return {**record, "value": {**v, "partitions": [{**p, "topic": topic} for p in v.get("partitions") or []]}}


def every_gap() -> list[dict]:
    """One history with each section-3 gap: a fetch serving another value, a preferred
    replica out of the ISR, a session response with nothing new, ListOffsets out of order."""
    parts = [written().fetch(S, 0, [(0, "a"), (1, "x")], hwm=3, proc=5).poll(9, 2 * S, (0, "a"), (1, "b"), (2, "c")),
             prr(isr=((1, 3),) * 3), sess(opened(), S, 42, 1, 42, [part(10)], sent=[]), offsets((-2, 50), (-4, 40))]
    # the session's partition is another topic's: HWM 10 on t/0 is more than its three sends can write
    parts[2].records[:] = [_on_topic(r, "s") for r in parts[2].records]
    records = sorted((r for h in parts for r in h.records), key=lambda r: r["time"])
    assert len({r["process"] for h in parts for r in h.records}) == 7  # no process shared by two parts
    return [dict(r, index=i) for i, r in enumerate(records)]
