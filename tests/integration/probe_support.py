"""Helpers for the probe tests: background traffic and reading a test's history."""
from __future__ import annotations

import threading

from confluent_kafka import Producer

from kipcheck.rundir.history import read_history
from kipcheck.harness.clients.admin import quiet_logger


class Traffic(threading.Thread):
    """Keeps producing small records to every partition of a topic (so HWMs move and
    followers trail the leader) until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 3):
        super().__init__(daemon=True)
        self.topic, self.partitions = topic, partitions
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all",
                                  "logger": quiet_logger()})
        self.stop_event = threading.Event()
        self.sent = 0
        #: (partition, offset) -> value, from the delivery reports: what the brokers acknowledged
        #: (the first sends may fail while the new topic's metadata spreads, so offset 0 need not
        #: hold the first value sent)
        self.acknowledged: dict[tuple[int, int], bytes] = {}

    def run(self):
        while not self.stop_event.is_set():
            for _ in range(50):
                self.producer.produce(self.topic, value=f"traffic-{self.sent}".encode(),
                                      partition=self.sent % self.partitions, on_delivery=self._delivered)
                self.sent += 1
            self.producer.poll(0.01)
        self.producer.flush(10)

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acknowledged[(msg.partition(), msg.offset())] = msg.value()

    def stop(self):
        self.stop_event.set()
        self.join(20)


def completions(history, f: str) -> list[dict]:
    """The `ok` values of operation `f` in a (closed or flushed) test history, validated."""
    history.flush()
    return [r["value"] for r in read_history(history.path) if r["f"] == f and r["type"] == "ok"]
