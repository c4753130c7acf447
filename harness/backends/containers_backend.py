"""The `testcontainers` backend: each node a Docker container (harness.backends.containers), for
users with Docker rather than root. Node faults go through the Docker API and link faults through
Toxiproxy; packet-level partitions are not offered: `FAULTS` says which kinds run and why not the rest."""
from __future__ import annotations

from kipcheck.harness.backends.backend import Backend, Capabilities, FaultSupport

#: fault kinds a container cluster supports (faults.registry names); the rest are skipped
SUPPORTED_FAULTS = ("kill", "pause", "restart", "rolling-restart", "wipe", "truncate", "bitflip", "wipe-metadata",
                    "elect", "elect-unclean", "reassign",
                    "latency", "bandwidth", "slow-close", "timeout", "reset-peer", "slicer", "limit-data")
DEFAULT_FAULTS = ("kill", "pause")  # instead of the native default, a packet-level leader isolation
UNSUPPORTED_WHY = ("packet-level partitions need iptables in a network namespace per node; containers share "
                   "Docker's (use the native backend)")
_WHY = {"clock-skew": "clock faults preload libfaketime into a node's JVM; the apache/kafka image's JVM runs without it "
                      "(use the native backend)",
        "log-dir-failure": "container nodes have one log directory (use the native backend)",
        "links": "links between nodes go through a Toxiproxy beside each node, which containers do not run "
                 "(use the native or the ssh backend)",
        "voter-removal": "container clusters are formatted with a fixed controller quorum (use the native or the "
                         "ssh backend)"}


def unsupported_why(kind: str) -> str:
    """Why containers cannot inject this kind (one line for the terminal and config.json)."""
    family = ("clock-skew" if kind.startswith("clock-") else
              "links" if kind.startswith("replication-") or kind == "controller-latency" else kind)
    return _WHY.get(family, UNSUPPORTED_WHY)


FAULTS = FaultSupport(SUPPORTED_FAULTS, unsupported_why, DEFAULT_FAULTS, "needs network namespaces")


class ContainersBackend(Backend):
    name = "testcontainers"
    capabilities = Capabilities(starts_kafka=True, faults=FAULTS, same_clock=True, upgrades=False,
                                tiered_refused=None, elr=True, metadata_log=True,
                                hosts="Docker's host (DOCKER_HOST): a container per node on a network of their own")

    def reach(self, options, dist, ui) -> None:
        """Docker and the release's image, before the run directory: no Docker leaves nothing behind,
        and the image build is not in the measured node start (the liveness bound)."""
        from kipcheck.harness.backends.container_image import ensure_image
        from kipcheck.harness.backends.docker_cleanup import docker_client
        with ui.step("reaching Docker"):
            client = docker_client()
        with ui.step(f"the Kafka {dist.version} image"):
            ensure_image(client, dist, ui.substep)
        client.close()

    def cluster(self, options, dist, root, cluster_options, owner_pid):
        from kipcheck.harness.backends.containers import ContainerCluster
        return ContainerCluster(dist, root, cluster_options, owner_pid=owner_pid)


BACKEND = ContainersBackend()
