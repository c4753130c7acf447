"""Hand-made histories for the liveness rule: a history written one record at a time with a
settable clock (`Hist`), a kill and its heal, a client crash, and judging with the liveness rule alone."""
from __future__ import annotations

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.liveness_rules import LivenessRule

S = 1_000_000_000  # ns per second
PARTITIONS = (0, 1)
BROKERS = (1, 2, 3)


class Hist:
    """A history written by hand, one record at a time, with a settable clock (seconds).
    Sends append to a per-partition log and polls read what is new, so the safety rules
    have nothing to say about it."""

    def __init__(self):
        self.records: list[dict] = []
        self.t = 0
        self.n = 0
        self.logs: dict[int, list[str]] = {p: [] for p in PARTITIONS}
        self.read_to: dict[int, int] = {p: 0 for p in PARTITIONS}

    def at(self, seconds: float) -> "Hist":
        self.t = int(seconds * S)
        return self

    def _add(self, process, type_, f, value):
        self.records.append({"index": len(self.records), "time": self.t, "process": process, "type": type_,
                             "f": f, "value": value})
        self.t += 1000

    def op(self, process, f, value, type_="ok", **result):
        self._add(process, "invoke", f, value)
        self._add(process, type_, f, {**value, **result})

    def send(self, partition, process=0, type_="ok", **extra):
        self.n += 1
        value = {"topic": "t", "partition": partition, "key": f"{process}-{self.n}", "value": f"{process}-{self.n}"}
        offset = len(self.logs[partition])
        if type_ == "ok":
            self.logs[partition].append(value["value"])
        self.op(process, "send", value, type_, **({"offset": offset} if type_ == "ok" else {}), **extra)

    def poll(self, partitions, process=10, type_="ok", **extra):
        recs = []
        if type_ == "ok":
            for p in partitions:
                recs += [["t", p, o, self.logs[p][o]] for o in range(self.read_to[p], len(self.logs[p]))]
                self.read_to[p] = len(self.logs[p])
        self.op(process, "poll", {"topic": "t"}, type_, **({"records": recs} if type_ == "ok" else {}), **extra)

    def metadata(self, broker, partition, full=True):
        isr = [1, 2, 3] if full else [1, 2]
        self.op("observer", "metadata", {"broker": broker, "topic": "t", "partition": partition},
                error="NONE", leader=1, leader_epoch=0, isr=isr, replicas=[1, 2, 3])

    def all_metadata(self, full=True):
        for b in BROKERS:
            for p in PARTITIONS:
                self.metadata(b, p, full)

    def fault(self, name, phase, targets=(3,)):
        value = {"fault": name, "phase": phase, **({"targets": list(targets)} if phase == "stop" else {})}
        self._add("nemesis", "invoke", "fault", value)
        self._add("nemesis", "ok", "fault", {**value, "targets": list(targets)})

    def healthy(self):
        """Everything works: a send and a read on every partition, every broker reports a full ISR."""
        for p in PARTITIONS:
            self.send(p)
        self.poll(PARTITIONS)
        self.all_metadata()


def judge(records, bound=5.0, crash_loop=5):
    rule = LivenessRule(bound, {"test": bound}, "test", crash_loop)
    return check_records(records, rules=[rule])


def kill_and_heal(h: Hist, heal_at: float) -> None:
    h.at(0).healthy()
    h.at(1).fault("kill", "start")
    h.at(2).all_metadata(full=False)
    h.at(heal_at).fault("kill", "stop")


def crash(h: Hist, f="send", client=None, process=0):
    extra = {"fatal": True, "error": "KafkaError{FATAL,code=OUT_OF_ORDER_SEQUENCE_NUMBER}", "broker": 2}
    if client is not None:
        extra["client"] = client
    if f == "send":
        h.send(0, process=process, type_="info", **extra)
    else:
        h.poll([0], process=process, type_="info", **extra)
