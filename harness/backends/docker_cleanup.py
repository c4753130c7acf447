"""Docker's side of a container cluster that survives its harness: the label that names a
container's cluster and owner, and the removal the watchdog, `kipcheck cluster down --id` and
the next run's stale sweep do (harness.backends.sweep.teardown). Apart from the container
backend itself, so that the sweep needs nothing of it."""
from __future__ import annotations

import os

from kipcheck.harness.backends.state import process_start_time, same_process_alive
from kipcheck.harness.errors import HarnessError

LABEL = "io.kipcheck.cluster"  # on every container and network: which cluster, whose harness


def docker_client():
    """The Docker client of DOCKER_HOST (or the default socket); one line when Docker is not there."""
    try:
        import docker
        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:
        where = os.environ.get("DOCKER_HOST", "the default socket")
        raise HarnessError(f"Docker is not reachable at {where}: {str(e).splitlines()[0][:200]} "
                           "(the testcontainers backend needs a running Docker)") from None


def remove_cluster(cluster_id: str, docker_host: str | None) -> None:
    """Remove a container cluster's containers and network (harness.backends.sweep.teardown)."""
    import docker
    try:
        client = docker.DockerClient(base_url=docker_host) if docker_host else docker.from_env()
        reap_stale_containers(client, cluster_id=cluster_id)
    except Exception as e:
        raise HarnessError(f"removing the containers of cluster {cluster_id} failed: "
                           f"{str(e).splitlines()[0][:200]}") from None


def owner_label(pid: int | None) -> str:
    pid = pid or os.getpid()
    return f"{pid}:{process_start_time(pid)}"


def reap_stale_containers(client, cluster_id: str | None = None) -> list[str]:
    """Remove kipcheck's containers and networks whose harness died (or, with `cluster_id`, that
    cluster's): a SIGKILLed run leaves them until the next `up`."""
    def stale(obj) -> bool:
        labels = obj.attrs.get("Labels") or obj.attrs.get("Config", {}).get("Labels") or {}
        if cluster_id is not None:
            return labels.get(LABEL) == cluster_id
        pid, _, start = labels.get(f"{LABEL}.owner", "").partition(":")
        return not (pid.isdigit() and same_process_alive(int(pid), int(start) if start.isdigit() else None))
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL}):
        if stale(c):
            c.remove(force=True)
            removed.append(c.name)
    for net in client.networks.list(filters={"label": LABEL}):
        if stale(net):
            net.remove()
            removed.append(net.name)
    return removed
