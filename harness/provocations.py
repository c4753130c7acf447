"""What a seeded bug's window must make happen for its slip to have anything to change.

Most slips sit on paths every window's workload takes (reads, appends, fetch sessions). A slip
in the controller's leader election changes nothing while no partition changes leader, and a
healthy window elects nobody; its provocation (`SeededBug.provoke`) makes the one election
the slip can get wrong, then heals. The control window's verdict, and the provocation run
with no bug on (tests/integration/test_seeded_bugs_live.py), show it is no anomaly by itself.
"""
from __future__ import annotations

import threading
import time

from kipcheck.harness.clients import wire
from kipcheck.harness.clients.admin import Admin, quiet_logger
from kipcheck.harness.errors import HarnessError

LAG_TIMEOUT = 40.0  # the follower leaves the ISR after replica.lag.time.max.ms (8 s) of not catching up


def _wait(cond, timeout: float, what: str, stop: threading.Event):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        try:
            found = cond()
        except Exception:  # an answer during the cut may time out: ask again
            found = None
        if found:
            return found
        time.sleep(0.3)
    raise HarnessError(f"provocation: not within {timeout:.0f} s: {what}")


def outsider_election(cluster, topic: str, stop: threading.Event) -> dict:
    """An election in which a live, unfenced replica stands outside the ISR.

    A topic `<topic>-elect` is placed [L, F, C]: C the active controller, L and F the other two
    brokers. F is cut off from L alone (both still reach C, so neither is fenced) while acks=1
    writes move L's log on, until L drops F from the ISR; then L shuts down cleanly. A correct
    controller elects C, the ISR's one other member; an ISR-blind one takes the first acceptable
    replica in order, F. The cut is healed and L started again before returning."""
    elect_topic = f"{topic}-elect"
    brokers = {n.spec.node_id: n for n in cluster.brokers}
    with wire.BrokerConnection(cluster.bootstrap_servers().split(",")[0], client_id="kipcheck-provoke") as conn:
        active = wire.quorum_leader(conn)
    if active not in brokers or len(brokers) < 3:
        raise HarnessError(f"provocation: needs the active controller ({active}) among three brokers")
    leader, follower = [b for b in sorted(brokers) if b != active][:2]
    admin = Admin(cluster.bootstrap_servers())
    admin.create_topic(elect_topic, 1, 3, assignment=[[leader, follower, active]])
    admin.wait_full_isr(elect_topic, 60)
    lead, follow = brokers[leader], brokers[follower]
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "1", "linger.ms": 5,
                         "message.timeout.ms": 10000, "logger": quiet_logger()})
    try:
        lead.drop_packets_from(follow)
        follow.drop_packets_from(lead)

        def out_of_isr():
            for _ in range(50):
                producer.produce(elect_topic, value=b"x" * 100, partition=0)
            producer.poll(0)
            p = next(p for p in admin.partitions(elect_topic) if p.partition == 0)
            return follower not in p.isr and p
        _wait(out_of_isr, LAG_TIMEOUT, f"broker {follower} out of the ISR of {elect_topic}", stop)
        producer.flush(10)
        del producer  # librdkafka's handle goes now, not whenever the collector runs
        lead.stop_node(clean_shutdown=True, timeout=30)  # the controlled shutdown asks for the election
        survivors = Admin(",".join(brokers[b].spec.client_endpoint for b in (follower, active)))
        after = _wait(lambda: next((p for p in survivors.partitions(elect_topic) if p.leader >= 0), None), 60,
                      f"a new leader of {elect_topic}", stop)
    finally:
        lead.allow_packets_from(follow)
        follow.allow_packets_from(lead)
        if not lead.alive():
            lead.start_node()
    lead.wait_listening(60)
    return {"topic": elect_topic, "replicas": [leader, follower, active], "elected": after.leader}


PROVOCATIONS = {"outsider-election": outsider_election}
