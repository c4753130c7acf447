"""A remote host's side of an ssh cluster that survives its harness: what its state records on
the hosts, undone (`kipcheck cluster down`, the watchdog, the next run's stale sweep: all through
harness.backends.sweep.teardown), each node asked how it is (`kipcheck cluster status`), and every
host of a cluster file cleaned from the hosts alone (`kipcheck cluster down --hosts`). Apart from
the ssh backend itself (harness.backends.ssh_cluster), so that the sweep needs nothing of it."""
from __future__ import annotations

import shlex

from kipcheck.harness.backends import network, ssh
from kipcheck.harness.backends.parallel import side_by_side
from kipcheck.harness.backends.state import ClusterState, kill_recorded
from kipcheck.harness.errors import HarnessError


def clean_recorded(state: ClusterState) -> None:
    """What a cluster's state records on its hosts, undone: node processes killed, the chain
    removed, the cluster's directory deleted (and kipcheck's directory, once no cluster is left in
    it). Every host is tried; an unreachable one is raised at the end, naming it."""
    hosts = ssh.HostsFile.from_json(state.data["hosts"])
    by_name = {e.ssh.host: e for e in hosts.nodes}
    chain = state.data.get("chain", "")
    recorded = (*state.data.get("nodes", {}).values(), *state.data.get("helpers", {}).values())
    touched = sorted({rec.get("host") for rec in recorded if rec.get("host")} | set(state.data.get("chains", [])))
    errors = []

    def one(name: str) -> None:
        entry = by_name[name]
        host = ssh.SshHost(entry.ssh, entry.address, chain)
        for rec in recorded:
            if rec.get("host") == name and rec.get("pid"):  # its nodes, and its Toxiproxy server
                kill_recorded(rec["pid"], rec.get("start"), host=host)
        if name in state.data.get("chains", []):
            network.remove_chain(host)
        base = shlex.quote(hosts.dir.rstrip("/"))
        host.shell(f"rm -rf {shlex.quote(state.data['remote_root'])}; "
                   f"if [ -z \"$(ls -A {base} 2>/dev/null | grep -vx -e kafka -e bin)\" ]; then rm -rf {base}; fi", check=True)

    def guarded(name: str) -> None:
        try:
            one(name)
        except HarnessError as e:
            errors.append(str(e))
    side_by_side(lambda n=n: guarded(n) for n in touched)
    if errors:
        raise HarnessError("; ".join(errors))


def node_status(state: ClusterState) -> dict[str, str]:
    """Each recorded node as its own host answers (`kipcheck cluster status`): "up", "down", or
    "unreachable: <why>" for a host that does not answer (a pid means nothing on this machine)."""
    hosts = ssh.HostsFile.from_json(state.data["hosts"])
    by_name = {e.ssh.host: e for e in hosts.nodes}
    nodes = state.data.get("nodes", {})

    def one(rec: dict) -> str:
        entry = by_name.get(rec.get("host"))
        if entry is None or not rec.get("pid"):
            return "down"
        try:
            return "up" if ssh.SshHost(entry.ssh, entry.address, "").alive(rec["pid"], rec.get("start")) else "down"
        except HarnessError as e:
            return f"unreachable: {e}"
    return dict(zip(nodes, side_by_side(lambda r=r: one(r) for r in nodes.values())))


def down_hosts(path: str) -> list[str]:
    """`kipcheck cluster down --hosts FILE`: every host of the file left as kipcheck found it,
    from the hosts alone (ssh.clean_host), whatever state this machine kept or lost."""
    hosts = ssh.load_hosts(path)
    done = side_by_side(lambda e=e: [f"{e.ssh.host}: {x}" for x in ssh.clean_host(e.ssh, hosts.dir)]
                        for e in hosts.kafka_nodes)
    return [x for d in done for x in d]
