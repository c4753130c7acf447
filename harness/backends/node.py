"""One Kafka KRaft node as a ducktape-style service: start_node, stop_node, clean_node, logs.

The node knows its directory, its host (namespace + address) and its ports; it knows
nothing of other nodes beyond the quorum string it is given. Every process it starts
is recorded in the cluster state at once, so a crashed harness leaves no orphan.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import KafkaDistribution
from kipcheck.harness.backends.network import Host
from kipcheck.harness.backends.state import ClusterState, kill_recorded

#: How long a KRaft FETCH may be parked: KafkaRaftClient.MAX_FETCH_WAIT_MS, a constant
#: (not a config) in Kafka 4.0.1, 4.1.2 and 4.3.1, sent as the FETCH's MaxWaitMs.
KRAFT_FETCH_MAX_WAIT_MS = 500
#: the JIT compilers a Kafka node's JVM runs with (ClusterOptions.jit, `--broker-jit`): HotSpot's own tiers ("full":
#: C1, then C2 for hot code), or C1 alone ("c1"), which starts a cluster on 40 % less CPU (README, --broker-jit)
JIT_FLAGS = {"full": (), "c1": ("-XX:TieredStopAtLevel=1",)}
#: the environment variable that sets the default of `--broker-jit` and ClusterOptions.jit (tests/conftest.py: c1)
JIT_ENV = "KIPCHECK_BROKER_JIT"
#: a tool's JVM (StorageTool format, the quorum program) runs for a second: C2 never pays there
TOOL_JIT = JIT_FLAGS["c1"]
#: metadata.max.idle.interval.ms default: the active controller appends a NoOpRecord this
#: often (QuorumController.registerWriteNoOpRecord); MetadataLogConfig in 4.3.1, KRaftConfigs in 4.0.1.
METADATA_MAX_IDLE_INTERVAL_MS = 500


def kraft_settings(properties: dict, controllers: list[int] | None) -> dict:
    """What the KIP-1166 bound needs to know of a cluster (recorded in config.json and in
    every `metadata_propagation` record): the fetch max wait, the controller's no-op
    interval (from a controller's `properties`) and the controller ids (None: unknown)."""
    out = {"fetch_max_wait_ms": KRAFT_FETCH_MAX_WAIT_MS,
           "max_idle_interval_ms": int(properties.get("metadata.max.idle.interval.ms", METADATA_MAX_IDLE_INTERVAL_MS))}
    if controllers is not None:
        out["controllers"] = sorted(controllers)
    return out


def consumer_group_settings(properties: dict) -> dict:
    """What the slow-rebalance bound needs of a broker (recorded in config.json as `consumer_groups`):
    the KIP-848 session timeout and heartbeat interval its group coordinator gives members, from
    its `properties`, else Kafka's defaults (a client cannot set them under KIP-848)."""
    from kipcheck.reference_model import kip848
    return {"session_timeout_ms": int(properties.get("group.consumer.session.timeout.ms", kip848.SESSION_TIMEOUT_MS)),
            "heartbeat_interval_ms": int(properties.get("group.consumer.heartbeat.interval.ms",
                                                        kip848.HEARTBEAT_INTERVAL_MS))}


#: Debian's libfaketime (package libfaketime, scripts/install.sh), preloaded into nodes that take clock faults
LIBFAKETIME = next(iter(sorted(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"))),
                   Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"))


def faketime_env(clock_file: Path, host) -> dict:
    """The environment that preloads libfaketime into a node's JVM, driven by `clock_file`.

    The file holds libfaketime's offset ("+60", "-300"); while it is absent the clock is real.
    libfaketime re-reads it on the first clock call whose whole second exceeds that of its last
    read by more than FAKETIME_CACHE_DURATION (1): a running JVM's wall clock moves up to 2 s
    after the file changed (faults/clock.py's heals wait that out); the monotonic clock
    (System.nanoTime) stays real (without that the JVM hangs). Debian's 0.9.10 then turns on its
    pthread_cond_timedwait "monotonic fix", which makes the JVM's timed waits spin: a Kafka tool
    took 26 s instead of 1.7 s, so it is off."""
    if not host.exists(LIBFAKETIME):  # on the node's own machine
        where = f"host {host.name}: " if host.remote else ""
        raise HarnessError(f"{where}clock faults need libfaketime ({LIBFAKETIME}): apt-get install libfaketime "
                           "(scripts/install.sh does here)")
    return {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME_TIMESTAMP_FILE": str(clock_file),
            "FAKETIME_CACHE_DURATION": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1", "FAKETIME_FORCE_MONOTONIC_FIX": "0"}


LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {logfile}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.controller.name = org.apache.kafka.controller
logger.controller.level = INFO
"""


#: the group coordinators' topic's replication factor: a cluster with fewer brokers has no group coordinator
OFFSETS_TOPIC_REPLICATION = 3


@dataclass(frozen=True)
class NodeSpec:
    node_id: int
    roles: tuple[str, ...]  # ("broker", "controller"), ("broker",) or ("controller",)
    rack: str
    host: Host
    internal_port: int  # inter-broker listener
    controller_port: int
    client_port: int  # what clients (and the fetch prober) connect to
    advertised_client: str | None = None  # host:port clients are told (a proxy, when one fronts the node)
    extra_config: dict = field(default_factory=dict)
    # host:port peers are told for the INTERNAL and CONTROLLER listeners: a proxy in the node's own
    # namespace when links between nodes are proxied (harness.backends.toxiproxy.front_node_listeners)
    advertised_internal: str | None = None
    advertised_controller: str | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def client_address(self) -> str:
        return f"{self.host.address}:{self.client_port}"

    @property
    def client_endpoint(self) -> str:
        """Where a client connects: the proxy when one fronts the node, else the node itself."""
        return self.advertised_client or self.client_address

    @property
    def internal_endpoint(self) -> str:
        """Where other brokers (followers' fetches) reach this broker."""
        return self.advertised_internal or f"{self.host.address}:{self.internal_port}"

    @property
    def controller_endpoint(self) -> str:
        """Where brokers and other controllers reach this controller (its entry in the voter list)."""
        return self.advertised_controller or f"{self.host.address}:{self.controller_port}"


def default_jit() -> str:
    """`JIT_ENV`'s value, else "full" (checked where a cluster is made: `check_jit`)."""
    return os.environ.get(JIT_ENV) or "full"


def check_jit(jit: str) -> str:
    """`jit` when it names a JIT_FLAGS entry; else a HarnessError that says so, before anything starts."""
    if jit not in JIT_FLAGS:
        raise HarnessError(f"broker JIT {jit!r} (--broker-jit or {JIT_ENV}): expected one of {', '.join(JIT_FLAGS)}")
    return jit


def quorum_voters(specs) -> str:
    """controller.quorum.voters for these nodes: id@endpoint of each controller."""
    return ",".join(f"{s.node_id}@{s.controller_endpoint}" for s in specs if s.is_controller)


class KafkaNode:
    def __init__(self, spec: NodeSpec, root: Path, dist: KafkaDistribution, state: ClusterState,
                 cluster_uuid: str, quorum_voters: str, heap: str = "512m", jvm_args: tuple[str, ...] = (),
                 local_root: Path | None = None, log_dirs: int = 1, fake_clock: bool = False, jit: str = "full"):
        self.spec = spec
        # on the node's host (spec.host runs every command and file verb there); `local_dir`
        # is where its logs are read on this machine: the same directory unless the host is remote
        self.dir = root / f"node-{spec.node_id}"
        self.local_dir = (local_root or root) / f"node-{spec.node_id}"
        self.data_dir = self.dir / "data"
        # JBOD (ClusterOptions.log_dirs): data, data-2, ...; the metadata log stays apart
        self.data_dirs = [self.data_dir, *(self.dir / f"data-{i}" for i in range(2, log_dirs + 1))]
        # libfaketime's offset file (ClusterOptions.fake_clocks); None: the JVM runs without the preload
        self.clock_file = self.dir / "faketime" if fake_clock else None
        self.metadata_dir = self.dir / "metadata"
        self.dist = dist
        self.state = state
        self.cluster_uuid = cluster_uuid
        self.quorum_voters = quorum_voters
        self.heap = heap
        self.jvm_args = tuple(a.replace("{node_dir}", str(self.dir)) for a in jvm_args)  # ClusterOptions.broker_jvm_args
        self.jit_flags = JIT_FLAGS[check_jit(jit)]  # ClusterOptions.jit
        self.proc: subprocess.Popen | None = None
        # Held while the process is stopped or started, so a fault's restart and a rolling
        # upgrade's stop-swap-start never interleave on one node (harness.upgrade).
        self.lock = threading.RLock()
        self.release_version: str | None = None  # ClusterOptions.release_version
        self.features: tuple[tuple[str, int], ...] = ()  # ClusterOptions.features
        self.dynamic_quorum = None  # harness.backends.quorum.DynamicQuorum (ClusterOptions.dynamic_quorum)

    # -- configuration -------------------------------------------------------------
    def server_properties(self) -> dict:
        s = self.spec
        listeners, protocol_map = [], ["CONTROLLER:PLAINTEXT"]
        if s.is_broker:
            listeners += [f"INTERNAL://{s.host.address}:{s.internal_port}", f"CLIENT://{s.host.address}:{s.client_port}"]
            protocol_map += ["INTERNAL:PLAINTEXT", "CLIENT:PLAINTEXT"]
        if s.is_controller:
            listeners.append(f"CONTROLLER://{s.host.address}:{s.controller_port}")
        props = {
            "process.roles": ",".join(s.roles),
            "node.id": s.node_id,
            **({"controller.quorum.bootstrap.servers": self.dynamic_quorum.bootstrap} if self.dynamic_quorum
               else {"controller.quorum.voters": self.quorum_voters}),
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": ",".join(protocol_map),
            "log.dirs": ",".join(str(d) for d in self.data_dirs),
            "metadata.log.dir": str(self.metadata_dir),
        }
        if s.is_broker:
            props.update({
                "advertised.listeners": f"INTERNAL://{s.internal_endpoint},CLIENT://{s.client_endpoint}",
                "inter.broker.listener.name": "INTERNAL",
                "broker.rack": s.rack,
                # KIP-392: consumers with client.rack fetch from the closest in-sync replica
                "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
                "offsets.topic.replication.factor": OFFSETS_TOPIC_REPLICATION,
                "transaction.state.log.replication.factor": 3,
                "transaction.state.log.min.isr": 2,
                "default.replication.factor": 3,
                "min.insync.replicas": 2,
                "auto.create.topics.enable": "false",
                "group.initial.rebalance.delay.ms": 0,
                # faults should show within a short run: drop lagging followers after 8 s
                "replica.lag.time.max.ms": 8000,
                "unclean.leader.election.enable": "false",
                "num.network.threads": 2,
                "num.io.threads": 4,
                "log.flush.interval.messages": 9223372036854775807,
            })
        if self.dynamic_quorum and s.is_controller:  # KIP-853: a voter's endpoint is what it advertises
            advertised = props.get("advertised.listeners")
            props["advertised.listeners"] = ",".join(
                x for x in (advertised, f"CONTROLLER://{s.controller_endpoint}") if x)
        props.update(s.extra_config)
        return props

    def write_config(self) -> Path:
        path = self.dir / "server.properties"
        self.spec.host.write_text(path, "".join(f"{k}={v}\n" for k, v in self.server_properties().items()))
        self.spec.host.write_text(self.dir / "log4j2.properties", LOG4J2.format(logfile=self.dir / "server.log"))
        return path

    def _jvm_opts(self) -> tuple[str, ...]:
        return (f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", *self.jit_flags,
                "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}",
                "-Dkafka.logs.dir=" + str(self.dir), *self.jvm_args)

    # -- lifecycle -------------------------------------------------------------------
    def format_command(self, config: Path) -> list[str]:
        """`kafka.tools.StorageTool format` with the cluster's id; with `release_version` set, at
        that release's metadata.version (`--release-version`, KIP-778) instead of this
        distribution's newest; with `features`, at those feature levels (`--feature`, KIP-1022); with
        `dynamic_quorum`, the controllers' first voters (`--initial-controllers`, KIP-853)."""
        release = ("--release-version", self.release_version) if self.release_version else ()
        release += tuple(a for name, level in self.features for a in ("--feature", f"{name}={level}"))
        if self.dynamic_quorum:  # KIP-853: the controllers' first voter set, or none on a broker
            release += self.dynamic_quorum.format_args(self.spec.is_controller)
        return self.dist.java_command(
            "kafka.tools.StorageTool", "format", "-t", self.cluster_uuid, "-c", str(config), "--ignore-formatted",
            *release,
            jvm_opts=("-Xmx256m", *TOOL_JIT, f"-Dlog4j2.configurationFile={self.dir / 'log4j2.properties'}"))

    def format(self) -> None:
        """Format storage (`format_command`) on the node's host."""
        argv = self.format_command(self.write_config())
        proc = self.spec.host.run(argv, timeout=120)
        if proc.returncode != 0:
            raise HarnessError(f"formatting node {self.spec.node_id} failed: {_first_error(proc.stderr + proc.stdout)}")

    def formatted(self) -> bool:
        """Every log directory and the metadata log hold a meta.properties (a wiped one does not)."""
        return all(self.spec.host.exists(d / "meta.properties") for d in (*self.data_dirs, self.metadata_dir))

    def start_node(self) -> None:
        """Start the JVM of the node's own distribution (`dist`: after a rolling upgrade step,
        the new release's), so any restart, a fault's heal included, keeps the node's version."""
        with self.lock:
            if self.alive():
                return
            config = self.write_config()
            argv = self.dist.java_command("kafka.Kafka", str(config), jvm_opts=self._jvm_opts())
            env = faketime_env(self.clock_file, self.spec.host) if self.clock_file else None
            pid, start, self.proc = self.spec.host.spawn(argv, self.dir / "stdout.log", env)
            self._record(pid, start)

    def _record(self, pid: int | None, start: int | None = None) -> None:
        self.state.set_entry("nodes", str(self.spec.node_id), {
            "pid": pid, "start": start,
            "netns": self.spec.host.netns, "address": self.spec.host.address, "host": self.spec.host.name,
            "dir": str(self.dir), "kafka_version": self.dist.version,
        })

    @property
    def pid(self) -> int | None:
        rec = self.state.data["nodes"].get(str(self.spec.node_id))
        return rec["pid"] if rec and self.alive() else None

    def alive(self) -> bool:
        rec = self.state.data["nodes"].get(str(self.spec.node_id))
        return bool(rec) and bool(rec.get("pid")) and self.spec.host.alive(rec.get("pid"), rec.get("start"))

    def paused(self) -> bool:
        """Stopped by SIGSTOP (its state letter is T)."""
        pid = self.pid
        return pid is not None and self.spec.host.process_state(pid) == "T"

    def stop_node(self, clean_shutdown: bool = True, timeout: float = 30.0) -> None:
        """SIGTERM (a controlled shutdown) and wait; SIGKILL after `timeout` or when not clean."""
        with self.lock:
            rec = self.state.data["nodes"].get(str(self.spec.node_id))
            if rec:
                kill_recorded(rec.get("pid"), rec.get("start"), grace=timeout if clean_shutdown else 0.0,
                              host=self.spec.host)
            if self.proc is not None:  # a local child: reap it
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                self.proc = None
            self._record(None)

    def signal(self, sig: int) -> None:
        pid = self.pid
        if pid is None:
            raise HarnessError(f"node {self.spec.node_id} is not running")
        self.spec.host.signal(pid, sig)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def clean_node(self, metadata: bool = False) -> None:
        """Wipe the log directory (and with `metadata`, the metadata log), then reformat."""
        if self.alive():
            raise HarnessError(f"node {self.spec.node_id} must be stopped before its disk is wiped")
        for d in self.data_dirs:
            self.spec.host.remove_tree(d)
        if metadata:
            self.spec.host.remove_tree(self.metadata_dir)
        self.format()

    def set_clock(self, offset: str | None) -> None:
        """Move the JVM's wall clock by a libfaketime offset ("+60", "-300"); None: the real clock again
        (nothing to do on a node without the preload)."""
        if self.clock_file is None and offset is None:
            return
        if self.clock_file is None:
            raise HarnessError(f"node {self.spec.node_id} runs without libfaketime: clock faults need a cluster "
                               "started with ClusterOptions(fake_clocks=True)")
        if offset is None:
            self.files.remove(self.clock_file)
        else:
            self.files.write_text(self.clock_file, offset + "\n")  # whole: libfaketime never reads half a line

    @property
    def files(self):
        """The file verbs of the node's machine (faults.cluster.NodeFiles): its host's, here or over SSH."""
        return self.spec.host

    def logs(self) -> list[Path]:
        """The node's logs, readable here (copied from a remote host into `local_dir`)."""
        found = (self.spec.host.fetch(self.dir / name, self.local_dir / name) for name in ("server.log", "stdout.log"))
        return [p for p in found if p is not None]

    # -- packet filter (partitions: faults.partition) ---------------------------------------
    def drop_packets_from(self, peer: KafkaNode) -> None:
        """Drop, in this node's namespace, every packet from the peer's address (its KIPCHECK chain)."""
        self.spec.host.iptables("-A", self.spec.host.chain, "-s", peer.spec.host.address, "-j", "DROP")

    def allow_packets_from(self, peer: KafkaNode) -> None:
        self.spec.host.iptables("-D", self.spec.host.chain, "-s", peer.spec.host.address, "-j", "DROP", check=False)

    def allow_all_packets(self) -> None:
        """Flush the kipcheck chain; a node in the root namespace (loopback mode) has none."""
        if self.spec.host.netns or self.spec.host.remote:
            self.spec.host.iptables("-F", self.spec.host.chain, check=False)

    def wait_listening(self, timeout: float) -> None:
        """Wait until the node accepts TCP connections on its main port."""
        port = self.spec.client_port if self.spec.is_broker else self.spec.controller_port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                tail = _tail(self.spec.host.read_text(self.dir / "stdout.log")) or \
                    _tail(self.spec.host.read_text(self.dir / "server.log"))
                raise HarnessError(f"node {self.spec.node_id} exited during start: {tail}")
            try:
                with socket.create_connection((self.spec.host.address, port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise HarnessError(f"node {self.spec.node_id} did not listen on port {port} within {timeout:.0f} s")


def _tail(text: str | None, lines: int = 3) -> str:
    """The error lines at the end of a log's text (None: no log)."""
    if not text:
        return ""
    text = text.strip().splitlines()
    errs = [l for l in text if "ERROR" in l or "Exception" in l]
    return " | ".join((errs or text)[-lines:])[-400:]


def _first_error(output: str) -> str:
    """The line of a JVM tool's output that says what went wrong (not the stack trace)."""
    lines = [l.strip() for l in output.splitlines() if l.strip() and not l.strip().startswith("at ")]
    errs = [l for l in lines if "Exception" in l or "Error" in l or "error" in l]
    return (errs or lines or ["no output"])[0][:300]
