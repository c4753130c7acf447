"""KIP-853 dynamic controller quorums: the format that starts one, and voter changes at run time;
and a stopped broker's decommission (UnregisterBroker), through the same Admin program.

A cluster with `ClusterOptions(dynamic_quorum=True)` formats its controllers with
`--initial-controllers id@host:port:directory-id,...` (directory ids chosen here, so a removed
voter can be added back by its id and directory), its brokers with `--no-initial-controllers`,
and every node finds the quorum through `controller.quorum.bootstrap.servers` instead of a fixed
`controller.quorum.voters`. Voters are listed, removed and added through Kafka's own Admin client
(`describeMetadataQuorum`, `removeRaftVoter`, `addRaftVoter` over `bootstrap.controllers`),
from quorum/QuorumVoters.java (compiled once into kipcheck's cache, or run in Java's source-file
mode without javac) on the cluster's own classpath: no tool outside kafka-clients, which every
release's classpath holds.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.node import TOOL_JIT

SOURCE = Path(__file__).with_name("quorum") / "QuorumVoters.java"


@dataclass(frozen=True)
class DynamicQuorum:
    """What a node's format and configuration need: every controller's directory id and endpoint."""

    directory_ids: dict[int, str]  # controller id -> the directory id of its metadata log
    endpoints: dict[int, str]  # controller id -> host:port its peers reach it at

    @property
    def bootstrap(self) -> str:
        """controller.quorum.bootstrap.servers (and the Admin client's bootstrap.controllers)."""
        return ",".join(self.endpoints[i] for i in sorted(self.endpoints))

    @property
    def initial_controllers(self) -> str:
        """StorageTool's --initial-controllers: id@host:port:directory-id of every controller."""
        return ",".join(f"{i}@{self.endpoints[i]}:{self.directory_ids[i]}" for i in sorted(self.endpoints))

    def format_args(self, is_controller: bool) -> tuple[str, ...]:
        return ("--initial-controllers", self.initial_controllers) if is_controller else ("--no-initial-controllers",)


@dataclass(frozen=True)
class QuorumView:
    voters: dict[int, str]  # id -> directory id
    observers: dict[int, str]
    leader: int


def _compiled(dist) -> Path | None:
    """QuorumVoters compiled once per source and release into kipcheck's cache (a JVM that compiles
    the source first takes seconds more, which a fault's window pays); None without javac, and
    the source runs as it is."""
    javac = Path(dist.java).resolve().with_name("javac")
    if not javac.exists():
        return None
    tag = hashlib.sha256(SOURCE.read_bytes() + dist.version.encode()).hexdigest()[:16]
    out = Path(os.environ.get("KIPCHECK_CACHE", Path.home() / ".cache" / "kipcheck")) / "quorum" / tag
    if not (out / "QuorumVoters.class").exists():
        tmp = out.with_name(f"{tag}.{os.getpid()}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run([str(javac), "-cp", os.pathsep.join(str(p) for p in dist.classpath), "-d", str(tmp),
                               str(SOURCE)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise HarnessError(f"compiling {SOURCE.name} failed: {(proc.stderr.strip().splitlines() or ['?'])[0]}")
        try:
            os.replace(tmp, out)  # whole or not at all; a racing compile already put one there: fine
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _run(dist, *args: str, timeout: float = 120.0) -> list[str]:
    compiled, opts = _compiled(dist), ("-Xmx128m", *TOOL_JIT, "-Dlog4j2.level=OFF")
    if compiled is None:
        argv = dist.java_command(str(SOURCE), *args, jvm_opts=opts)
    else:
        cp = os.pathsep.join([str(compiled), *(str(p) for p in dist.classpath)])
        argv = [dist.java, *opts, "-cp", cp, "QuorumVoters", *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"quorum {args[0]}: no answer within {timeout:.0f} s") from None
    lines = [line for line in proc.stdout.splitlines() if line.split(" ", 1)[0] in ("voter", "observer", "leader",
                                                                                      "ok", "error")]
    errors = [line[len("error "):] for line in lines if line.startswith("error ")]
    if proc.returncode != 0 or errors:
        last = errors or [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()][-1:] or ["no output"]
        raise HarnessError(f"quorum {args[0]} failed: {last[0][:300]}")
    return lines


#: a describe asks this many times: it only reads, and right after a leader removed itself an
#: Admin client may keep asking the resigned one until its call times out (2026-11-30, CI)
DESCRIBE_ATTEMPTS = 3


def describe(dist, bootstrap: str) -> QuorumView:
    """The quorum as its leader reports it (DescribeQuorum)."""
    for attempt in range(1, DESCRIBE_ATTEMPTS + 1):
        try:
            lines = _run(dist, "describe", bootstrap, timeout=60.0)
            break
        except HarnessError:
            if attempt == DESCRIBE_ATTEMPTS:
                raise
            time.sleep(2.0)
    voters, observers, leader = {}, {}, -1
    for line in lines:
        kind, *rest = line.split()
        if kind == "leader":
            leader = int(rest[0])
        else:
            (voters if kind == "voter" else observers)[int(rest[0])] = rest[1]
    return QuorumView(voters, observers, leader)


def remove_voter(dist, bootstrap: str, node_id: int, directory_id: str) -> None:
    _run(dist, "remove", bootstrap, str(node_id), directory_id)


def unregister_broker(dist, bootstrap_servers: str, node_id: int) -> None:
    """UnregisterBroker: a stopped broker leaves the cluster's registrations (a decommission)."""
    _run(dist, "unregister", bootstrap_servers, str(node_id))


def add_voter(dist, bootstrap: str, node_id: int, directory_id: str, listener: str, endpoint: str) -> None:
    host, port = endpoint.rsplit(":", 1)
    _run(dist, "add", bootstrap, str(node_id), directory_id, listener, host, port)
