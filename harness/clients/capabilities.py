"""What a cluster can be asked, and what a run leaves out because it cannot.

kipcheck also runs against clusters it did not start (the external backend): a single
node, a replication factor of 1, or a Kafka-compatible broker that lacks an API. Such a
cluster gets a run with what it supports; every probe, workload feature or fault left out is a
`Skipped` entry, shown on the terminal, kept in config.json (`skipped`) and in the report.

Which APIs each probe needs comes from the broker's own ApiVersions answer, compared with
the version the probe needs (harness.clients.prober, harness.clients.observer).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from kafka.protocol.admin import ListTransactionsRequest
from kafka.protocol.admin.configs import DescribeConfigsRequest
from kafka.protocol.consumer.fetch import FetchRequest
from kafka.protocol.consumer.offsets import ListOffsetsRequest, OffsetForLeaderEpochRequest

from kipcheck.harness.clients.prober import FETCH_MIN_VERSION, LIST_OFFSETS_TIMESTAMPS, list_offsets_min_version
from kipcheck.harness.clients.wire import BrokerConnection, UnsupportedVersion, WireError, newest_common

#: prober round -> (request class, lowest version it needs, what the round is for)
PROBER_NEEDS = {
    "kip392_cases": (FetchRequest, FETCH_MIN_VERSION, "KIP-392 consumer fetches around the HWM"),
    "fetch_session": (FetchRequest, FETCH_MIN_VERSION, "KIP-227 fetch sessions"),
    "list_offsets": (ListOffsetsRequest, 1, "ListOffsets probes"),
    "offsets_for_leader_epoch": (OffsetForLeaderEpochRequest, 3, "KIP-392 OffsetsForLeaderEpoch as a consumer"),
    "transactions": (ListTransactionsRequest, 0, "KIP-664 ListTransactions / DescribeTransactions"),
}
#: the Admin calls of the observer's KIP-1166 propagation changes, by API key
PROPAGATION_APIS = {19: "CreateTopics", 20: "DeleteTopics", 44: "IncrementalAlterConfigs"}
#: DescribeQuorum: every KRaft broker answers it (kafka-clients' DescribeQuorumRequest.json has
#: "listeners": ["broker", "controller"] from 3.3.2 to 4.3.1). KIP-1166 is about how brokers
#: fetch the KRaft metadata log; a broker without a KRaft quorum cannot be asked about it.
KRAFT_QUORUM_API = (55, "DescribeQuorum")
#: ConsumerGroupDescribe (KIP-848, Kafka 4.0 on): the group describer asks only it (harness.clients.group_describer)
GROUP_DESCRIBE_API = (69, "ConsumerGroupDescribe")


@dataclass(frozen=True)
class Skipped:
    key: str  # "prober.<round>", "prober.list_offsets@<timestamp>", "observer.metadata_propagation", ...
    feature: str
    reason: str

    def as_json(self) -> dict:
        return asdict(self)


def api_gaps(versions: dict[int, tuple[int, int]], address: str = "the cluster") -> list[Skipped]:
    """The probes a broker with these ApiVersions cannot answer."""
    out = []
    for name, (request, lowest, what) in PROBER_NEEDS.items():
        if newest_common(versions, request, lowest) is None:
            out.append(Skipped(f"prober.{name}", what, _lacks(versions, request, lowest, address)))
    if newest_common(versions, ListOffsetsRequest, 1) is not None:
        for ts in LIST_OFFSETS_TIMESTAMPS:
            lowest = list_offsets_min_version(ts)
            if newest_common(versions, ListOffsetsRequest, lowest) is None:
                out.append(Skipped(f"prober.list_offsets@{ts}", f"ListOffsets with timestamp {ts}",
                                   _lacks(versions, ListOffsetsRequest, lowest, address)))
    if GROUP_DESCRIBE_API[0] not in versions:
        out.append(Skipped("observer.group_describe", "the coordinator's view of the consumer group (KIP-848)",
                           f"{address} does not answer {GROUP_DESCRIBE_API[1]} (API key {GROUP_DESCRIBE_API[0]})"))
    missing = [name for key, name in PROPAGATION_APIS.items() if key not in versions]
    if newest_common(versions, DescribeConfigsRequest, 1) is None:
        missing.append("DescribeConfigs v1+")
    if KRAFT_QUORUM_API[0] not in versions:
        out.append(Skipped("observer.metadata_propagation", "KIP-1166 metadata propagation timing",
                           f"{address} does not answer {KRAFT_QUORUM_API[1]} (API key {KRAFT_QUORUM_API[0]}): "
                           f"no KRaft metadata quorum, which KIP-1166 is about"))
    elif missing:
        out.append(Skipped("observer.metadata_propagation", "KIP-1166 metadata propagation timing",
                           f"{address} does not answer {', '.join(missing)}"))
    return out


def replication_gaps(replicas: list[int], follower_rack: str | None) -> list[Skipped]:
    """What a workload topic with these replicas (of partition 0) cannot show."""
    if len(replicas) < 2:
        return [Skipped("consumer.follower_fetching", "consumers fetching from a follower (KIP-392)",
                        f"the workload topic has replication factor {len(replicas)}: no follower to fetch from")]
    if follower_rack is None:
        return [Skipped("consumer.follower_fetching", "consumers fetching from a follower (KIP-392)",
                        "the brokers declare no broker.rack, so no consumer rack names a follower")]
    return []


def fault_skips(refused) -> list[Skipped]:
    """The requested fault kinds a backend cannot inject, each (kind, why) of
    faults.plan.FaultPlan.refused, as config.json's `skipped`."""
    return [Skipped(f"fault.{k}", f"fault {k}", why) for k, why in refused]


def broker_versions(bootstrap: str, timeout: float = 10.0) -> tuple[str, dict[int, tuple[int, int]]]:
    """The ApiVersions answer of the first bootstrap broker that answers: (address, versions)."""
    errors = []
    for address in (a for a in bootstrap.split(",") if a):
        try:
            with BrokerConnection(address, client_id="kipcheck-capabilities", timeout=timeout) as conn:
                return address, dict(conn.versions)
        except (WireError, UnsupportedVersion) as e:
            errors.append(str(e))
    raise WireError("no broker answered ApiVersions: " + "; ".join(errors))


def _lacks(versions, request, lowest: int, address: str) -> str:
    name = request.__name__.removesuffix("Request")
    broker = versions.get(request.API_KEY)
    if broker is None:
        return f"{address} does not answer {name} (API key {request.API_KEY})"
    return f"{address} answers {name} v{broker[0]}-v{broker[1]}, the probe needs v{lowest}+"
