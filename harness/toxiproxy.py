"""Toxiproxy: a pinned server on loopback, started for one cluster, and a small HTTP API client.

Clients reach brokers through one proxy per broker (`front_client_listener`), so link
faults (latency, bandwidth, resets, ...) are toxics on those proxies. The server is a
helper process recorded in the cluster state, so `teardown()` and the reaper kill it
like a node.

The client speaks the HTTP API directly rather than through toxiproxy-python 0.1.1:
that package keeps the server's host and port in class attributes (one server per
Python process, while a pytest session may run two clusters with a server each),
needs the Python 2 `future` shim, and has not been released since 2019.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import requests

from harness.errors import HarnessError
from harness.state import ClusterState, process_start_time

VERSION = "v2.5.0"  # the newest github.com/Shopify/toxiproxy/v2 the Go module proxy serves here
MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"
HELPER = "toxiproxy"


def binary_path(version: str = VERSION) -> Path:
    return Path(os.environ.get("KIPCHECK_CACHE", Path.home() / ".cache" / "kipcheck")) / "bin" / f"toxiproxy-server-{version}"


def ensure_installed(version: str = VERSION) -> Path:
    """The pinned server binary, built once by `go install` (what scripts/install-toxiproxy.sh does).

    KIPCHECK_TOXIPROXY_SERVER names a prebuilt binary instead."""
    override = os.environ.get("KIPCHECK_TOXIPROXY_SERVER")
    if override:
        return Path(override)
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
    """HTTP API client of one toxiproxy server (https://github.com/Shopify/toxiproxy#http-api)."""

    def __init__(self, api: str, timeout: float = 10.0):
        self.api = api.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()

    def _call(self, method: str, path: str, **kw):
        try:
            r = self.session.request(method, self.api + path, timeout=self.timeout, **kw)
        except requests.RequestException as e:
            raise HarnessError(f"toxiproxy at {self.api} unreachable: {e.__class__.__name__}") from None
        if r.status_code >= 400:
            raise HarnessError(f"toxiproxy {method} {path} -> {r.status_code}: {r.text.strip()[:200]}")
        return r.json() if r.content and r.headers.get("content-type", "").startswith("application/json") else None

    def version(self) -> str:
        r = self.session.get(self.api + "/version", timeout=self.timeout)
        r.raise_for_status()
        return r.text.strip()

    def proxies(self) -> dict[str, dict]:
        return self._call("GET", "/proxies") or {}

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0") -> dict:
        """Create a proxy; with port 0 the server picks a free port and returns the real `listen`."""
        return self._call("POST", "/proxies", json={"name": name, "upstream": upstream, "listen": listen,
                                                    "enabled": True})

    def delete_proxy(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{name}")

    def toxics(self, proxy: str) -> list[dict]:
        return self._call("GET", f"/proxies/{proxy}/toxics") or []

    def add_toxic(self, proxy: str, name: str, type_: str, attributes: dict, stream: str = "downstream",
                  toxicity: float = 1.0) -> dict:
        return self._call("POST", f"/proxies/{proxy}/toxics", json={
            "name": name, "type": type_, "stream": stream, "toxicity": toxicity, "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str) -> None:
        """Remove one toxic; one that is already gone is fine (heals are idempotent)."""
        try:
            self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")
        except HarnessError as e:
            if "-> 404" not in str(e):
                raise

    def reset(self) -> None:
        """Remove every toxic and re-enable every proxy."""
        self._call("POST", "/reset")


def start_server(state: ClusterState, log_dir: Path, seed: int = 1, attempts: int = 3) -> Toxiproxy:
    """Start the pinned server on 127.0.0.1 and record it as the cluster's `toxiproxy` helper.

    `-seed` fixes the server's random draws (jitter, toxicity), so a run is reproducible."""
    from harness.cluster import _free_port
    binary = ensure_installed()
    log_dir.mkdir(parents=True, exist_ok=True)
    config = log_dir / "toxiproxy.json"  # no proxies at start; on the command line it tells whose server this is
    config.write_text("[]\n")
    last = ""
    for _ in range(attempts):  # the free port may be taken between the probe and the bind
        port = _free_port()
        with open(log_dir / "toxiproxy.log", "ab") as out:
            proc = subprocess.Popen([str(binary), "-host", "127.0.0.1", "-port", str(port), "-seed", str(seed),
                                     "-config", str(config)],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        state.set_entry("helpers", HELPER, {"pid": proc.pid, "start": process_start_time(proc.pid)})
        client = Toxiproxy(f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                client.version()
                state.update(toxiproxy={"api": client.api, "version": VERSION})
                return client
            except requests.RequestException:
                time.sleep(0.1)
        proc.kill()
        proc.wait()
        last = f"exit code {proc.returncode}"
    raise HarnessError(f"toxiproxy server did not start ({last}); see {log_dir / 'toxiproxy.log'}")


def client_proxy_name(node_id: int) -> str:
    return f"client-{node_id}"


def front_client_listener(proxy: Toxiproxy, spec):
    """Put a proxy in front of a broker's CLIENT listener; return the spec advertising the proxy."""
    created = proxy.create_proxy(client_proxy_name(spec.node_id), upstream=spec.client_address)
    return replace(spec, advertised_client=created["listen"])
