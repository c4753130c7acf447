"""Toxiproxy: pinned servers started for one cluster, driven by toxiproxy-python.

Clients reach brokers through one proxy per broker on a server on loopback
(`front_client_listener`); with links between nodes proxied, each node runs a server of
its own in its namespace, fronting its INTERNAL and CONTROLLER listeners
(`front_node_listeners`). Link faults (latency, bandwidth, resets, ...) are toxics on
those proxies. Each server is a helper process recorded in the cluster state, so
`teardown()` and the reaper kill it like a node. Its lifecycle (build, start, readiness, stop) is ours; the HTTP API is
spoken by toxiproxy-python (PyPI `toxiproxy-python` 0.1.1), which works against server
2.5.0 for everything kipcheck does: create a proxy, list proxies and toxics, add and
remove a toxic, reset, destroy a proxy.

toxiproxy-python keeps the server's host and port in class attributes of its
`APIConsumer` (one server per Python process), while a pytest session may run two
clusters with a server each: `Toxiproxy` points the library at its own server under a
process-wide lock for the length of each call.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import requests
import toxiproxy as toxiproxy_python
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.state import ClusterState, process_start_time

VERSION = "v2.5.0"  # the newest github.com/Shopify/toxiproxy/v2 the Go module proxy serves here
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
HELPER = "toxiproxy"
_LIBRARY_TARGET = threading.Lock()  # guards toxiproxy-python's process-wide server address


def binary_path(version: str = VERSION) -> Path:
    return Path(os.environ.get("KIPCHECK_CACHE", Path.home() / ".cache" / "kipcheck")) / "bin" / f"toxiproxy-server-{version}"


def server_override() -> Path | None:
    """KIPCHECK_TOXIPROXY_SERVER, a prebuilt server binary, checked: a path that is not an executable file
    would fail only when a node's proxies start, in the middle of the cluster's start, so `kipcheck run`
    asks for it first (harness.run._prepare). None when the variable is not set."""
    text = os.environ.get("KIPCHECK_TOXIPROXY_SERVER")
    if not text:
        return None
    path = Path(text)
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise HarnessError(f"KIPCHECK_TOXIPROXY_SERVER={text} is not an executable file (a toxiproxy-server "
                           f"{VERSION} binary); unset it to use kipcheck's own")
    return path


def ensure_installed(version: str = VERSION) -> Path:
    """The pinned server binary, built once by `go install` (what scripts/install-toxiproxy.sh does).

    KIPCHECK_TOXIPROXY_SERVER names a prebuilt binary instead."""
    override = server_override()
    if override:
        return override
    path = binary_path(version)
    if path.exists():
        return path
    go = shutil.which("go")
    if go is None:
        raise HarnessError(f"toxiproxy {version} is not installed and `go` is missing: "
                           "install Go, or run scripts/install-toxiproxy.sh, or set KIPCHECK_TOXIPROXY_SERVER")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as gobin:
        proc = subprocess.run([go, "install", f"{MODULE}@{version}"], env={**os.environ, "GOBIN": gobin},
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise HarnessError(f"`go install {MODULE}@{version}` failed: {last}")
        os.replace(Path(gobin) / "server", path)  # same directory: atomic, so a racing install is harmless
    return path


class Toxiproxy:
    """One toxiproxy server, through toxiproxy-python; API errors become one-line HarnessErrors."""

    def __init__(self, api: str):
        self.api = api.rstrip("/")
        where = urlsplit(self.api)
        self.host, self.port = where.hostname, where.port
        self.server = toxiproxy_python.Toxiproxy()

    @contextmanager
    def _call(self, what: str):
        """Point toxiproxy-python at this server for one call; say what failed in one line."""
        with _LIBRARY_TARGET:
            self.server.update_api_consumer(self.host, self.port)
            try:
                yield self.server
            except (NotFound, ProxyExists, InvalidToxic) as e:
                detail = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else str(e)
                raise HarnessError(f"toxiproxy {what}: {e.__class__.__name__}: {detail.strip()[:200]}") from None
            except requests.RequestException as e:
                raise HarnessError(f"toxiproxy at {self.api} unreachable: {e.__class__.__name__}") from None

    def _proxy(self, server, name: str):
        proxy = server.get_proxy(name)
        if proxy is None:
            raise NotFound(f"no proxy {name}")
        return proxy

    def version(self) -> str:
        """The server's version; our own GET because it is also the readiness probe of `start_server`,
        which must time out (toxiproxy-python sets no timeouts) and must not take the library's lock."""
        r = requests.get(self.api + "/version", timeout=5)
        r.raise_for_status()
        return r.text.strip()

    def proxies(self) -> dict[str, dict]:
        """Every proxy by name: {"name", "listen", "upstream", "enabled"}."""
        with self._call("list proxies") as server:
            return {name: vars(p) for name, p in server.proxies().items()}

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> dict:
        """Create a proxy; with port 0 the server picks a free port and returns the real `listen`."""
        with self._call(f"create proxy {name}") as server:
            return vars(server.create(upstream=upstream, name=name, listen=listen, enabled=True))

    def delete_proxy(self, name: str) -> None:
        with self._call(f"delete proxy {name}") as server:
            self._proxy(server, name).destroy()

    def toxics(self, proxy: str) -> list[dict]:
        with self._call(f"list toxics of {proxy}") as server:
            return [vars(t) for t in self._proxy(server, proxy).toxics().values()]

    def add_toxic(self, proxy: str, name: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> None:
        with self._call(f"add {type_} toxic to {proxy}") as server:
            self._proxy(server, proxy).add_toxic(name=name, type=type_, stream=stream, toxicity=toxicity,
                                                 attributes=attributes)

    def remove_toxic(self, proxy: str, name: str) -> None:
        """Remove one toxic; one that is already gone is fine (heals are idempotent)."""
        with self._call(f"remove toxic {name} of {proxy}") as server:
            try:
                self._proxy(server, proxy).destroy_toxic(name)
            except NotFound:
                pass

    def reset(self) -> None:
        """Remove every toxic and re-enable every proxy."""
        with self._call("reset") as server:
            server.reset()


#: the API port of a server in a node's namespace (the namespace is the node's alone, so it is free)
NODE_API_PORT = 8474


def start_server(state: ClusterState, log_dir: Path, seed: int = 1, attempts: int = 3, host=None,
                 binary=None) -> Toxiproxy:
    """Start the pinned server and record it as a helper of the cluster, which `teardown()` and the
    reaper (a remote host's: `ssh_cleanup.clean_recorded`) kill like a node.

    Without `host`, on 127.0.0.1 (the clients' proxies, recorded as `toxiproxy`); with a node's
    `host`, there on its address (the proxies of its links to other nodes, recorded as
    `toxiproxy-<host>`): in its namespace here, or on a remote host, where `binary` and `log_dir`
    are that host's paths. `-seed` fixes the server's random draws (jitter, toxicity), so a run
    is reproducible."""
    from kipcheck.harness.backends.network import Host
    from kipcheck.harness.backends.ports import free_port
    from kipcheck.harness.backends.state import kill_recorded
    binary = binary or ensure_installed()
    helper = f"{HELPER}-{host.name}" if host else HELPER
    host = host or Host("control", "127.0.0.1", None)
    host.run(["mkdir", "-p", str(log_dir)], timeout=30)
    config = log_dir / f"{helper}.json"  # no proxies at start; on the command line it tells whose server this is
    host.write_text(config, "[]\n")
    for attempt in range(attempts):  # a free port may be taken between the probe and the bind
        port = NODE_API_PORT + attempt if host.netns or host.remote else free_port()
        argv = [str(binary), "-host", host.address, "-port", str(port), "-seed", str(seed), "-config", str(config)]
        pid, start, _ = host.spawn(argv, log_dir / f"{helper}.log")
        state.set_entry("helpers", helper, {"pid": pid, "start": start, **({"host": host.name} if host.remote else {})})
        client = Toxiproxy(f"http://{host.address}:{port}")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and host.alive(pid, start):
            try:
                client.version()
                if host.name == "control":
                    state.update(toxiproxy={"api": client.api, "version": VERSION})
                else:
                    state.set_entry("link_toxiproxies", host.name, {"api": client.api, "version": VERSION})
                return client
            except requests.RequestException:
                time.sleep(0.1)
        kill_recorded(pid, start, host=host)
    raise HarnessError(f"toxiproxy server on {host.address} did not start; see {log_dir / (helper + '.log')}"
                       + (f" on host {host.name}" if host.remote else ""))


def client_proxy_name(node_id: int) -> str:
    return f"client-{node_id}"


def node_proxy_name(listener: str, node_id: int) -> str:
    """The proxy in front of a node's "replication" (INTERNAL) or "controller" listener."""
    return f"{listener}-{node_id}"


@dataclass(frozen=True)
class LinkProxy:
    """One proxy on a server (faults.cluster.LinkProxy: what link faults touch)."""

    server: Toxiproxy
    name: str

    def add_toxic(self, name: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> None:
        self.server.add_toxic(self.name, name, type_, attributes, stream=stream, toxicity=toxicity)

    def remove_toxic(self, name: str) -> None:
        self.server.remove_toxic(self.name, name)


def front_client_listener(proxy: Toxiproxy, spec):
    """Put a proxy in front of a broker's CLIENT listener; return the spec advertising the proxy."""
    created = proxy.create_proxy(client_proxy_name(spec.node_id), upstream=spec.client_address)
    return replace(spec, advertised_client=created["listen"])


def front_node_listeners(server: Toxiproxy, spec):
    """Put proxies in front of a node's INTERNAL and CONTROLLER listeners, served by `server` in the
    node's own namespace on its own address; return the spec advertising them to its peers.

    A peer's connection reaches the proxy with the peer's own source address, so the node's
    partition rules (iptables in its namespace, matching peers by address) drop it exactly as
    they would without the proxy; the proxy's own connection to the listener is local."""
    address = spec.host.address
    fronted = {}
    if spec.is_broker:
        fronted["advertised_internal"] = server.create_proxy(
            node_proxy_name("replication", spec.node_id), upstream=f"{address}:{spec.internal_port}",
            listen=f"{address}:0")["listen"]
    if spec.is_controller:
        fronted["advertised_controller"] = server.create_proxy(
            node_proxy_name("controller", spec.node_id), upstream=f"{address}:{spec.controller_port}",
            listen=f"{address}:0")["listen"]
    return replace(spec, **fronted)
