"""The ssh backend's cluster file (ducktape's cluster.json) and its runner, without a host.

The live half is tests/integration/test_ssh_backend.py (sshd in network namespaces)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kipcheck.harness.backends import network, ssh
from kipcheck.harness.backends.cluster import ClusterOptions
from kipcheck.harness.backends.kafka_dist import KafkaDistribution
from kipcheck.harness.backends.ssh_cluster import SshCluster
from kipcheck.harness.errors import HarnessError
from tests.test_cluster_protocol import protocol_gaps

ROOT = Path(__file__).resolve().parent.parent

#: a ducktape cluster file as ducktape's own docs show one (vagrant-style), plus a control node
DUCKTAPE = {"nodes": [
    {"externally_routable_ip": "192.0.2.11",
     "ssh_config": {"host": "worker1", "hostname": "192.0.2.11", "user": "vagrant", "port": 22,
                    "password": None, "identityfile": "~/.vagrant.d/insecure_private_key"}},
    {"externally_routable_ip": "192.0.2.12",
     "ssh_config": {"host": "worker2", "hostname": "192.0.2.12", "user": "vagrant", "port": 2222,
                    "password": "", "identityfile": ["/keys/id"]}},
    {"externally_routable_ip": "192.0.2.13",
     "ssh_config": {"host": "worker3", "hostname": "192.0.2.13", "user": "root", "port": 22,
                    "password": None, "identityfile": None}},
    {"externally_routable_ip": "192.0.2.10", "kipcheck": {"roles": ["client"]},
     "ssh_config": {"host": "control", "hostname": "192.0.2.10", "user": "root", "port": 22,
                    "password": None, "identityfile": None}},
]}


def _write(tmp_path, data) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(data))
    return path


def test_a_ducktape_cluster_file_reads_as_it_is(tmp_path):
    hosts = ssh.load_hosts(_write(tmp_path, DUCKTAPE))
    assert [n.ssh.host for n in hosts.kafka_nodes] == ["worker1", "worker2", "worker3"]
    w1, w2 = hosts.nodes[0], hosts.nodes[1]
    assert w1.address == "192.0.2.11" and w1.ssh.user == "vagrant" and w1.ssh.port == 22
    assert w1.ssh.identityfile == str(Path.home() / ".vagrant.d/insecure_private_key")
    assert w2.ssh.port == 2222 and w2.ssh.identityfile == "/keys/id"
    assert hosts.nodes[3].is_client and hosts.dir == ssh.DEFAULT_DIR
    # the state keeps the file's content, so a teardown after a SIGKILL needs no file
    assert ssh.HostsFile.from_json(json.loads(json.dumps(hosts.as_json()))) == hosts


@pytest.mark.parametrize("data,message", [
    ({"hosts": []}, "expected ducktape's shape"),
    ({"nodes": [{"externally_routable_ip": "192.0.2.1"}]}, "node 0: needs an ssh_config with a hostname"),
    ({"nodes": [{"ssh_config": {"hostname": "a", "password": "secret"}}]}, "password logins are not supported"),
    ({"nodes": [{"ssh_config": {"hostname": "a"}, "kipcheck": {"roles": ["client", "broker"]}}]}, "roles must be"),
    ({"nodes": [{"ssh_config": {"hostname": "a"}, "kipcheck": {"roles": ["client"]}}]}, "every node is a client"),
    ({"nodes": [{"ssh_config": {"host": "w", "hostname": "a"}}, {"ssh_config": {"host": "w", "hostname": "b"}}]},
     "two nodes share a host name (w)"),
    ({"nodes": [{"ssh_config": {"hostname": "a"}}], "kipcheck": {"dir": "/tmp"}}, "kipcheck.dir must be"),
])
def test_a_wrong_cluster_file_is_one_line(tmp_path, data, message):
    with pytest.raises(HarnessError) as e:
        ssh.load_hosts(_write(tmp_path, data))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_roles_come_from_the_file_or_from_controllers(tmp_path):
    dist = KafkaDistribution("4.3.1", (), "java")
    hosts = ssh.load_hosts(_write(tmp_path, DUCKTAPE))
    cluster = SshCluster(dist, tmp_path / "c", hosts)
    combined = cluster._plan()
    assert [s.roles for s in combined] == [("broker", "controller")] * 3
    assert [s.rack for s in combined] == ["rack-1", "rack-2", "rack-3"]
    assert [s.host.address for s in combined] == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]
    assert {s.host.chain for s in combined} == {f"KIPCHECK-{cluster.cluster_id}"}  # one chain per cluster
    dedicated = SshCluster(dist, tmp_path / "c", hosts, ClusterOptions(dedicated_controllers=1))._plan()
    assert [s.roles for s in dedicated] == [("controller",), ("broker",), ("broker",)]
    data = json.loads(json.dumps(DUCKTAPE))
    for n, roles in zip(data["nodes"], (["controller"], ["broker"], ["broker"])):
        n["kipcheck"] = {"roles": roles, "rack": f"r{roles[0]}"}
    named = SshCluster(dist, tmp_path / "c", ssh.load_hosts(_write(tmp_path, data)))._plan()
    assert [s.roles for s in named] == [("controller",), ("broker",), ("broker",)]
    assert [s.rack for s in named] == ["rcontroller", "rbroker", "rbroker"]
    with pytest.raises(HarnessError, match="tiered"):
        SshCluster(dist, tmp_path / "c", hosts, ClusterOptions(tiered=True))


def test_both_runners_have_the_verbs_a_node_uses():
    """A KafkaNode runs everything through its host: the native one and the SSH one take the same calls."""
    assert protocol_gaps(network.Runner, network.Host) == []
    assert protocol_gaps(network.Runner, ssh.SshHost) == []


def test_an_unreachable_host_is_one_line_naming_it(tmp_path):
    """Port 9 on loopback: nothing listens, the connection is refused at once."""
    config = ssh.SshConfig(host="worker9", hostname="127.0.0.1", port=9)
    with pytest.raises(HarnessError, match=r"^host worker9 \(root@127\.0\.0\.1:9\) unreachable: "):
        ssh.SshHost(config, "127.0.0.1", "KIPCHECK-x").shell("true")


def test_a_host_that_never_speaks_ssh_is_one_line_and_no_traceback(tmp_path):
    """A port that accepts and closes at once (a host whose sshd is going away): paramiko fails
    reading the banner in its own thread and would log a traceback; the user sees one line."""
    import socket
    import threading
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def refuse():
        for _ in range(6):  # the connection, and the one retry of each of the two calls
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.close()
    threading.Thread(target=refuse, daemon=True).start()
    port = server.getsockname()[1]
    (tmp_path / "c.json").write_text(json.dumps({"nodes": [{"externally_routable_ip": "127.0.0.1", "ssh_config": {
        "host": "worker7", "hostname": "127.0.0.1", "port": port, "identityfile": str(tmp_path / "none")}}]}))
    try:
        proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "cluster", "down", "--hosts",
                               str(tmp_path / "c.json")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    finally:
        server.close()
    assert proc.returncode != 0
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"kipcheck: host worker7 (root@127.0.0.1:{port}) unreachable: "), proc.stderr


def test_run_with_the_ssh_backend_needs_a_cluster_file_and_fails_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", "run", "--backend", "ssh",
                           "--runs-dir", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "kipcheck: the ssh backend needs --hosts CLUSTER_JSON (ducktape's cluster file)"
    assert list(tmp_path.iterdir()) == []


def test_the_native_runner_does_what_a_node_asks_on_this_machine(tmp_path):
    """The verbs KafkaNode now calls on a native host (loopback: no namespace), as the ssh test
    calls them on an SshHost: files, a spawned process, its stop state, and kill_recorded."""
    import signal
    from kipcheck.harness.backends.state import kill_recorded
    host = network.Host("n1", "127.0.0.1", None)
    assert not host.remote and host.chain == network.CHAIN
    host.write_text(tmp_path / "d" / "s.log", "0123456789")
    assert host.read_text(tmp_path / "d" / "s.log") == "0123456789" and host.exists(tmp_path / "d" / "s.log")
    assert host.file_sizes(tmp_path / "d", ".log") == {"s.log": 10} and host.file_sizes(tmp_path / "none", ".log") == {}
    host.truncate(tmp_path / "d" / "s.log", 3)
    assert host.fetch(tmp_path / "d" / "s.log", tmp_path / "x") == tmp_path / "d" / "s.log"
    assert host.read_text(tmp_path / "d" / "s.log") == "012" and host.read_text(tmp_path / "none") is None
    host.write_bytes(tmp_path / "d" / "b.bin", b"\x00\xff" * 5)
    assert host.read_bytes(tmp_path / "d" / "b.bin") == b"\x00\xff" * 5 and host.read_bytes(tmp_path / "x") is None
    host.rename(tmp_path / "d", tmp_path / "e")
    host.write_text(tmp_path / "d", "a file where the directory was")
    assert host.is_dir(tmp_path / "e") and not host.is_dir(tmp_path / "d")
    assert host.list_dir(tmp_path, dirs_only=True) == ["e"] and host.list_dir(tmp_path / "e") == ["b.bin", "s.log"]
    host.remove(tmp_path / "d")
    host.remove(tmp_path / "d")  # already gone: fine
    assert host.list_dir(tmp_path) == ["e"] and host.list_dir(tmp_path / "none") == []
    host.rename(tmp_path / "e", tmp_path / "d")
    pid, start, proc = host.spawn(["sleep", "300"], tmp_path / "d" / "out.log")
    try:
        assert host.alive(pid, start) and not host.alive(pid, start + 1)
        host.signal(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5
        while host.process_state(pid) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert host.process_state(pid) == "T"
        kill_recorded(pid, start, host=host)
        proc.wait(timeout=5)
        assert not host.alive(pid, start)
    finally:
        proc.kill()
    host.remove_tree(tmp_path / "d")
    assert not host.exists(tmp_path / "d")
    assert host.run(["echo", "ok"]).stdout == "ok\n"
