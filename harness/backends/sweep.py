"""Everything kipcheck made for a cluster, released from its state file alone: at the end of a
run (`down()`), by the watchdog of a harness that died (harness.backends.reaper), by
`kipcheck cluster down`, and by the next start's sweep of stale clusters, namespaces and
firewall rules.

It reads the state, never a cluster object, so it imports no backend's cluster module (each of
those imports it): Docker's side is harness.backends.docker_cleanup's, a remote host's
harness.backends.ssh_cleanup's.
"""
from __future__ import annotations

import os

from kipcheck.harness.backends import docker_cleanup, firewall, network, ssh_cleanup
from kipcheck.harness.backends.state import ClusterState, all_states, kill_recorded
from kipcheck.harness.errors import HarnessError


def _remove_containers(state: ClusterState) -> None:
    docker_cleanup.remove_cluster(state.data["cluster_id"], state.data.get("docker_host"))


def _kill_local_nodes(state: ClusterState) -> None:
    for rec in state.data.get("nodes", {}).values():
        kill_recorded(rec.get("pid"), rec.get("start"))


def _kill_local_helpers(state: ClusterState) -> None:
    """Toxiproxy servers and the watchdog on this machine (a remote host's: ssh_cleanup's); never ourselves."""
    for rec in state.data.get("helpers", {}).values():
        if rec.get("pid") != os.getpid() and not rec.get("host"):
            kill_recorded(rec.get("pid"), rec.get("start"))


def _delete_network(state: ClusterState) -> None:
    network.delete_network(state.data.get("namespaces", []), state.data.get("links", []))


def _delete_firewall_rules(state: ClusterState) -> None:
    firewall.delete_rules(state.data.get("forward_rules", []))


#: Where a cluster's nodes run, by the mode its state records, and what removes them: Docker's
#: containers by label (before the Toxiproxy in front of them goes), a remote host's processes,
#: chain and files over SSH, else this machine's processes by pid.
NODES = {"testcontainers": _remove_containers, "ssh": ssh_cleanup.clean_recorded}



def _release_nodes(state: ClusterState) -> None:
    NODES.get(state.data.get("mode"), _kill_local_nodes)(state)


#: What teardown releases, in this order.
RELEASES = (_release_nodes, _kill_local_helpers, _delete_network, _delete_firewall_rules)


def teardown(state: ClusterState) -> None:
    """Remove everything a state file records: processes, containers, helpers, namespaces, links, firewall rules.

    Every release is tried; one that fails (Docker gone, a host unreachable) is raised after the
    others, and the state file stays, so `kipcheck cluster down --id` can try again."""
    errors = []
    for release in RELEASES:
        try:
            release(state)
        except HarnessError as e:
            errors.append(e)
    if errors:
        raise errors[0]
    state.remove()


def reap_stale() -> list[str]:
    """Tear down clusters whose harness died; delete our namespaces and firewall rules that no state names."""
    reaped = []
    for st in all_states():
        if st.is_stale():
            try:
                teardown(st)
            except HarnessError:  # a container cluster whose Docker is gone: its state stays for a later try
                continue
            reaped.append(st.data["cluster_id"])
    known = {ns for st in all_states() for ns in st.data.get("namespaces", [])}
    if network.namespaces_available():
        # A namespace is recorded before it is created, so one no state names is an orphan
        # (e.g. its state file was deleted by hand); the age check spares one being created now.
        orphans = [ns for ns in network.list_namespaces()
                   if ns.startswith(network.NS_PREFIX) and ns not in known and network.namespace_age(ns) > 30]
        if orphans:
            network.delete_network(orphans, [])
            reaped.extend(orphans)
    reaped.extend(reap_orphan_rules())
    return reaped


def reap_orphan_rules() -> list[str]:
    """Delete kipcheck's firewall rules that name a cluster no state file knows.

    A rule is inserted after its cluster's state file is written, so a rule listed *before* the
    states are read and naming none of them is an orphan (its state file was deleted by hand)."""
    rules = firewall.kipcheck_rules()
    known_ids = {st.data["cluster_id"] for st in all_states()}
    stray = [rule for cluster_id, rule in rules if cluster_id not in known_ids]
    firewall.delete_rules(stray)
    return [f"firewall rule {' '.join(rule)}" for rule in stray]
