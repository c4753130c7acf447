"""A client workload's options: what `kipcheck run` and the pytest fixtures ask of the workers
(harness.clients.workload). Apart from the workers so that the command line reads them without
loading a client library."""
from __future__ import annotations

from dataclasses import dataclass, replace

#: `--workload`'s choices (kipcheck run, campaign): the producers alone, transactions, share groups
WORKLOADS = ("default", "txn", "share")
#: `--group-protocol`'s choices: the subscribers' consumer group protocol
GROUP_PROTOCOLS = ("classic", "consumer")
#: the producers' request.timeout.ms (also a part of the default liveness bound, harness.run)
PRODUCER_REQUEST_TIMEOUT_MS = 5000


def share_group_name(topic: str, token: str) -> str:
    """A run's share group: new for each run (`token`), so no state of an earlier run's group reaches it."""
    return f"kipcheck-share-{topic}-{token}"


@dataclass(frozen=True)
class WorkloadOptions:
    topic: str = "kipcheck"
    partitions: int = 3
    producers: int = 2
    in_flight: int = 128  # logical sends outstanding per producer, each slot its own process
    rate: float = 2500.0  # sends/s over all producers (0: as fast as the cluster acknowledges)
    linger_ms: int = 5  # librdkafka batches the slots' sends into requests
    # librdkafka's max.in.flight.requests.per.connection (idempotence allows up to 5). Above 1,
    # a failed request makes the ones behind it fail with OUT_OF_ORDER_SEQUENCE_NUMBER and
    # librdkafka bumps the producer epoch, duplicating what they had written (librdkafka
    # issue #4953, seen here as `duplicate` after a leader isolation): a client bug, so the
    # default keeps one request in flight per broker, the slots' sends batched into it.
    max_in_flight_requests: int = 1
    acks: str = "all"
    idempotence: bool = True
    # (acks, idempotence) per producer, cycled; empty: every producer uses `acks`/`idempotence`.
    # acks=1 may lose acknowledged writes on failover and non-idempotent retries may duplicate:
    # real Kafka behaviour that the checker then reports as lost-write / duplicate.
    producer_modes: tuple[tuple[str, bool], ...] = ()
    # librdkafka's compression.type per producer, cycled: the broker validates and stamps a
    # compressed batch on another path than a plain one (LogValidator), which has had its own
    # bugs (KAFKA-16310: ListOffsets' max timestamp answered from a compressed batch's last offset)
    # gzip: the raw prober's record parser (kafka-python) reads it with the standard library alone
    compression: tuple[str, ...] = ("none", "gzip")
    # A test hook, not a CLI option: producers get this transactional.id and send inside one
    # open transaction, so a second producer with the same id can fence them (a real fatal error).
    transactional_id: str | None = None
    consumers: int = 4
    consumer_rack: str | None = None  # KIP-392: a follower's rack makes the consumer read from it
    consumer_modes: tuple[str, ...] = ("assign", "subscribe")  # "assign" or "subscribe" (one shared group), cycled
    # the subscribers' group.protocol: "classic", or "consumer" (KIP-848: the coordinator assigns,
    # incrementally, and revokes a partition from its owner before another member gets it)
    group_protocol: str = "classic"
    # a subscriber leaves its group after this many seconds of polling (drawn per stay, seeded by its
    # number) and joins again as a new member: its partitions go to the other member and come back
    # (KIP-848 handoffs under the run's faults); None: members stay for the whole run
    rejoin_after_s: tuple[float, float] | None = (10.0, 20.0)
    # seconds a subscriber that left waits before it joins anew (0: at once). At once, KIP-848's sticky
    # assignor gives the newcomer exactly the partitions its predecessor freed, so no owned partition moves;
    # after a pause the members still there have taken them, and the newcomer's share is revoked from them
    rejoin_gap_s: float = 0.0
    rackless_consumers: int = 1  # the last N consumers send no client.rack (they read from leaders)
    consumer_isolation: tuple[str, ...] = ("read_committed", "read_committed", "read_uncommitted")  # cycled
    # delivery.timeout.ms: longer than a leader failover, because a send that times out makes
    # librdkafka bump the idempotent producer's epoch, and sends then in flight to other
    # partitions may be written twice (librdkafka #4953, its maintainers' comment)
    send_timeout: float = 30.0
    poll_batch: int = 500
    # "default": the producers above; "txn": transactional producers and a copier
    # (harness.clients.txn_workload) over `topics`, beside the same consumers
    workload: str = "default"
    transaction_timeout_ms: int = 10000  # the txn producers' transaction.timeout.ms
    txn_sends: tuple[int, int] = (2, 6)  # sends per transaction, least and most
    copiers: int = 1  # consume-transform-produce copiers (txn workload)
    # "share" (KIP-932): share consumers in one share group beside the same producers and consumers
    # (harness.clients.share_workload), explicit acknowledgements of a seeded type per record
    share_consumers: int = 5  # more than the partitions: librdkafka's SimpleAssignor shares some among members
    share_ack_weights: tuple[float, float, float] = (0.85, 0.10, 0.05)  # accept, release, reject
    share_stall: float = 0.03  # polls whose consumer holds its records a while before acknowledging
    # how long a stalled poll holds its records, one drawn per stall (ms); empty: past the lock (lock + 1 s)
    share_stall_ms: tuple[int, ...] = ()
    share_stall_fresh_only: bool = False  # stall only on polls that returned a first delivery (count 1)
    # the brokers' share group settings (share_broker_config): locks short enough to expire within a
    # run (the release's floor is 1000 ms) and a delivery limit a few releases reach (its floor is 2)
    share_lock_ms: int = 5000
    share_delivery_limit: int = 3
    # the share workload's group, named before the run (kipcheck run: harness.run) so that the fault
    # schedule can aim at its coordinators; None: the workload names one when it starts
    share_group: str | None = None

    @property
    def transactional_ids(self) -> tuple[str, ...]:
        """The txn workload's transactional ids (harness.clients.txn_workload names them so)."""
        if self.workload != "txn":
            return ()
        return (*(f"kipcheck-txn-{i}" for i in range(self.producers)), *(f"kipcheck-copier-{i}" for i in range(self.copiers)))

    @property
    def topics(self) -> tuple[str, ...]:
        """Every topic the workload writes: the txn workload's second topic and its copier's output."""
        if self.workload == "txn":
            return (self.topic, f"{self.topic}-b", f"{self.topic}-copy")
        return (self.topic,)

    def share_broker_config(self) -> tuple[tuple[str, str], ...]:
        """The brokers' server.properties for the share workload (none for the others). Kafka 4.3's
        ShareGroupConfig requires group.share.record.lock.duration.ms >= its min.record.lock.duration.ms
        (default 15000), so the floor goes down with it; the delivery limit stays within [min, max]
        of its own (2 and 10 by default)."""
        if self.workload != "share":
            return ()
        return (("group.share.record.lock.duration.ms", str(self.share_lock_ms)),
                ("group.share.min.record.lock.duration.ms", str(min(self.share_lock_ms, 15000))),
                ("group.share.delivery.count.limit", str(self.share_delivery_limit)),
                ("group.share.min.delivery.count.limit", str(min(self.share_delivery_limit, 2))))

    def with_share_group(self, token: str) -> WorkloadOptions:
        """These options with the share workload's group named (`token`: new for each run, so no
        state of an earlier run's group reaches it); the others, and a named one, unchanged."""
        if self.workload != "share" or self.share_group:
            return self
        return replace(self, share_group=share_group_name(self.topic, token))

    def producer_mode(self, seq: int) -> tuple[str, bool]:
        modes = self.producer_modes or ((self.acks, self.idempotence),)
        acks, idempotence = modes[seq % len(modes)]
        return str(acks), bool(idempotence)

    def producer_compression(self, seq: int) -> str:
        return self.compression[seq % len(self.compression)] if self.compression else "none"

    def consumer_mode(self, seq: int) -> str:
        return self.consumer_modes[seq % len(self.consumer_modes)] if self.consumer_modes else "assign"

    def consumer_has_rack(self, seq: int) -> bool:
        """The last `rackless_consumers` have no rack; a single consumer always has one (KIP-392)."""
        return seq < max(1, self.consumers - self.rackless_consumers)

    def isolation(self, seq: int) -> str:
        levels = self.consumer_isolation or ("read_committed",)
        return levels[seq % len(levels)]
