"""Remote hosts over SSH: the cluster file, connections, and `SshHost`, a node's command runner.

`SshHost` has the verbs of `harness.backends.network.Host` (run, spawn, signal, files,
iptables), so a `KafkaNode` on another machine is the same code as a native one; only the
runner differs. The cluster file is ducktape's `cluster.json` (nodes with
`externally_routable_ip` and `ssh_config`), so a ducktape user's file works as it is;
kipcheck's own settings sit in a `kipcheck` object beside them, which ducktape ignores.

paramiko (not the `ssh` binary): one Transport per host carries every command as its own
channel (connection reuse without ControlMaster sockets), each with a deadline, and SFTP
copies files. Every failure is one line naming the host: unreachable, key refused, no
passwordless sudo, a command that timed out.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import select
import shlex
import socket
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.state import parse_stat

# paramiko logs a failed handshake, traceback and all, from its own thread to stderr; the
# HarnessError raised here says it in one line naming the host
logging.getLogger("paramiko").addHandler(logging.NullHandler())

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 60.0
DEFAULT_DIR = "/tmp/kipcheck-hosts"  # kipcheck's own directory on every host: nothing of ours outside it
CHAIN_PREFIX = "KIPCHECK-"  # + the cluster id: one chain per cluster on a host
PIDFILE = "kipcheck.{host}.pid"  # beside a node's log: its /proc stat line, for `kipcheck cluster down --hosts`
ROLES = {"broker", "controller", "client"}
#: kipcheck's remote storage manager keeps the remote tier in a directory every broker shares
TIERED_REFUSED = "--tiered is not supported on the ssh backend: its remote tier is a directory every broker shares"


@dataclass(frozen=True)
class SshConfig:
    """ducktape's `ssh_config` of one node (its `password` is not supported: keys only)."""

    host: str  # the node's name
    hostname: str
    user: str = "root"
    port: int = 22
    identityfile: str | None = None


@dataclass(frozen=True)
class HostEntry:
    """One node of the cluster file."""

    ssh: SshConfig
    address: str  # externally_routable_ip: where the harness, clients and peers reach it
    roles: tuple[str, ...] | None = None  # None: decided by --controllers; ("client",): the control host
    rack: str | None = None

    @property
    def is_client(self) -> bool:
        return self.roles == ("client",)


@dataclass(frozen=True)
class HostsFile:
    path: str
    nodes: tuple[HostEntry, ...]
    dir: str = DEFAULT_DIR
    java: str | None = None  # the java binary on the hosts (default: `java` on the login PATH)
    ports: tuple[int, int, int] | None = None  # inter-broker, controller, client (default: the native ones)

    @property
    def kafka_nodes(self) -> list[HostEntry]:
        return [n for n in self.nodes if not n.is_client]

    def as_json(self) -> dict:
        return {"path": self.path, "dir": self.dir, "java": self.java, "ports": self.ports,
                "nodes": [asdict(n) for n in self.nodes]}

    @classmethod
    def from_json(cls, d: dict) -> "HostsFile":
        nodes = tuple(HostEntry(SshConfig(**n["ssh"]), n["address"], tuple(n["roles"]) if n.get("roles") else None,
                                n.get("rack")) for n in d["nodes"])
        return cls(d["path"], nodes, d["dir"], d.get("java"), tuple(d["ports"]) if d.get("ports") else None)


def load_hosts(path: str | Path) -> HostsFile:
    """Read a cluster file; anything wrong in it is one line naming the file and the node."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read the cluster file {path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list) or not data["nodes"]:
        raise HarnessError(f"{path}: expected ducktape's shape, {{\"nodes\": [{{\"externally_routable_ip\", "
                           f"\"ssh_config\": {{...}}}}, ...]}}")
    nodes = []
    for i, n in enumerate(data["nodes"]):
        where = f"{path}: node {i}"
        ssh = n.get("ssh_config") if isinstance(n, dict) else None
        if not isinstance(ssh, dict) or not (ssh.get("hostname") or n.get("externally_routable_ip")):
            raise HarnessError(f"{where}: needs an ssh_config with a hostname")
        if ssh.get("password"):
            raise HarnessError(f"{where}: password logins are not supported; give an identityfile")
        mine = n.get("kipcheck") or {}
        roles = mine.get("roles")
        if roles is not None and (not roles or set(roles) - ROLES or ("client" in roles and len(roles) > 1)):
            raise HarnessError(f"{where}: roles must be [\"client\"] or from broker, controller; got {roles}")
        hostname = ssh.get("hostname") or n["externally_routable_ip"]
        identity = ssh.get("identityfile")
        if isinstance(identity, list):  # ssh_config allows several; paramiko takes one here
            identity = identity[0] if identity else None
        config = SshConfig(host=ssh.get("host") or hostname, hostname=hostname, user=ssh.get("user") or "root",
                           port=int(ssh.get("port") or 22),
                           identityfile=os.path.expanduser(identity) if identity else None)
        nodes.append(HostEntry(config, n.get("externally_routable_ip") or hostname,
                               tuple(roles) if roles else None, mine.get("rack")))
    names = [n.ssh.host for n in nodes]
    if len(set(names)) != len(names):
        raise HarnessError(f"{path}: two nodes share a host name ({', '.join(sorted({x for x in names if names.count(x) > 1}))})")
    top = data.get("kipcheck") or {}
    hosts = HostsFile(str(path.resolve()), tuple(nodes), top.get("dir", DEFAULT_DIR), top.get("java"),
                      tuple(top["ports"]) if top.get("ports") else None)
    if not hosts.kafka_nodes:
        raise HarnessError(f"{path}: every node is a client; at least one must run Kafka")
    if not PurePosixPath(hosts.dir).is_absolute() or hosts.dir.rstrip("/") in ("", "/tmp", "/var/tmp", "/home"):
        raise HarnessError(f"{path}: kipcheck.dir must be a directory of kipcheck's own (it is deleted at the end), "
                           f"not {hosts.dir!r}")
    return hosts


# -- connections ---------------------------------------------------------------------------

_CONNECTIONS: dict[SshConfig, object] = {}
_CONNECTIONS_LOCK = threading.Lock()
_HOST_LOCKS: dict[SshConfig, threading.Lock] = {}


def _describe(c: SshConfig) -> str:
    return f"host {c.host} ({c.user}@{c.hostname}:{c.port})"


def connect(config: SshConfig):
    """The one paramiko SSHClient for this host in this process (opened on first use, reopened when dropped)."""
    import paramiko
    with _CONNECTIONS_LOCK:  # one lock per host: a slow host does not hold up the others
        lock = _HOST_LOCKS.setdefault(config, threading.Lock())
    with lock:
        client = _CONNECTIONS.get(config)
        if client is not None and client.get_transport() is not None and client.get_transport().is_active():
            return client
        client = paramiko.SSHClient()
        client.load_system_host_keys()
        # like ducktape: a host not yet in known_hosts is accepted; one whose key changed is refused
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(config.hostname, port=config.port, username=config.user,
                           key_filename=config.identityfile, timeout=CONNECT_TIMEOUT, banner_timeout=CONNECT_TIMEOUT,
                           auth_timeout=CONNECT_TIMEOUT, allow_agent=False, look_for_keys=config.identityfile is None)
        except paramiko.AuthenticationException:
            key = config.identityfile or "the default keys"
            raise HarnessError(f"{_describe(config)}: key refused ({key})") from None
        except paramiko.BadHostKeyException:
            raise HarnessError(f"{_describe(config)}: its host key differs from known_hosts") from None
        except (OSError, paramiko.SSHException, EOFError) as e:
            raise HarnessError(f"{_describe(config)} unreachable: {_reason(e)}") from None
        client.get_transport().set_keepalive(15)
        _CONNECTIONS[config] = client
        return client


def _reason(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:200]


def close_all() -> None:
    """Close every connection of this process (end of a run; tests that stop their sshd)."""
    with _CONNECTIONS_LOCK:
        for client in list(_CONNECTIONS.values()):
            client.close()
        _CONNECTIONS.clear()


class SshHost:
    """A remote node's place and command runner: `network.Host`'s verbs over SSH.

    Commands run as the cluster file's user through a login-less shell; only iptables needs
    root, so a user other than root runs it with `sudo -n` (passwordless for iptables)."""

    remote = True
    netns = None

    def __init__(self, config: SshConfig, address: str, chain: str):
        self.config = config
        self.address = address
        self.chain = chain
        self.sudo = "" if config.user == "root" else "sudo -n "
        self._sftp = None
        self._sftp_lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.config.host

    def __repr__(self) -> str:
        return f"SshHost({self.name}, {self.address})"

    def shell(self, command: str, timeout: float = COMMAND_TIMEOUT, stdin: bytes | None = None,
              check: bool = False) -> subprocess.CompletedProcess:
        """Run a shell command line on the host within `timeout` s; its exit code, stdout and stderr."""
        import paramiko
        for attempt in (1, 2):  # a connection dropped since its last use is reopened once
            client = connect(self.config)
            try:
                chan = client.get_transport().open_session(timeout=CONNECT_TIMEOUT)
                break
            except (paramiko.SSHException, OSError, EOFError) as e:
                client.close()
                if attempt == 2:
                    raise HarnessError(f"{_describe(self.config)} unreachable: {_reason(e)}") from None
        try:
            chan.settimeout(timeout)
            chan.exec_command(command)
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            out, err = bytearray(), bytearray()
            deadline = time.monotonic() + timeout
            while True:
                while chan.recv_ready():
                    out += chan.recv(65536)
                while chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HarnessError(f"host {self.name}: `{_short(command)}` did not finish within {timeout:.0f} s")
                select.select([chan], [], [], min(left, 0.2))
            code = chan.recv_exit_status()
        except (socket.timeout, paramiko.SSHException, OSError, EOFError) as e:
            raise HarnessError(f"host {self.name}: `{_short(command)}` failed: {_reason(e)}") from None
        finally:
            chan.close()
        proc = subprocess.CompletedProcess(command, code, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and code != 0:
            raise HarnessError(f"host {self.name}: `{_short(command)}` exited {code}: "
                               f"{_reason(Exception(proc.stderr or proc.stdout or 'no output'))}")
        return proc

    def run(self, argv: list[str], timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess:
        return self.shell(shlex.join(argv), timeout=timeout)

    def iptables(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        proc = self.shell(self.sudo + shlex.join(["iptables", "-w", *args]))
        if check and proc.returncode != 0:
            why = proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else f"exit {proc.returncode}"
            if self.sudo and "password" in why:
                raise HarnessError(f"host {self.name}: user {self.config.user} cannot run iptables with passwordless "
                                   f"sudo ({why})")
            raise HarnessError(f"iptables {' '.join(args)} on host {self.name} failed: {why}")
        return proc

    def spawn(self, argv: list[str], log: Path, env: dict | None = None) -> tuple[int, int, None]:
        """Start a long-running process in its own session, output appended to `log`; its /proc
        stat line goes to `kipcheck.<host>.pid` beside the log, for `clean_host` after a lost harness
        (named by host: hosts that share a filesystem, as the tests' do, each find only their own)."""
        pidfile = shlex.quote(str(PurePosixPath(log).parent / PIDFILE.format(host=self.name)))
        line = self.shell(f"mkdir -p {shlex.quote(str(PurePosixPath(log).parent))} && "
                          f"{{ setsid {shlex.join(_with_env(argv, env))} >>{shlex.quote(str(log))} 2>&1 </dev/null & p=$!; "
                          f"s=$(cat /proc/$p/stat); echo \"$s\" >{pidfile}; echo \"$s\"; }}", check=True).stdout
        try:
            _, start = parse_stat(line)
            return int(line.split()[0]), start, None
        except (ValueError, IndexError):
            raise HarnessError(f"host {self.name}: the process did not start ({line.strip()[:200] or 'no output'})") from None

    def _stat(self, pid: int) -> tuple[str, int] | None:
        text = self.shell(f"cat /proc/{int(pid)}/stat 2>/dev/null").stdout
        try:
            return parse_stat(text)
        except (ValueError, IndexError):
            return None

    def alive(self, pid: int | None, start: int | None) -> bool:
        stat = self._stat(pid) if pid else None
        return stat is not None and stat[0] != "Z" and (start is None or stat[1] == start)

    def process_state(self, pid: int) -> str | None:
        stat = self._stat(pid)
        return stat[0] if stat else None

    def signal(self, pid: int, sig: int) -> None:
        proc = self.shell(f"kill -{int(sig)} {int(pid)}")
        if proc.returncode != 0:
            if "No such process" in proc.stderr:
                raise ProcessLookupError(pid)
            raise HarnessError(f"host {self.name}: kill -{int(sig)} {pid} failed: {proc.stderr.strip()[:200]}")

    # -- files ------------------------------------------------------------------------------
    def write_text(self, path: Path, text: str) -> None:
        p = shlex.quote(str(path))
        self.shell(f"mkdir -p {shlex.quote(str(PurePosixPath(path).parent))} && cat >{p}.tmp && mv {p}.tmp {p}",
                   stdin=text.encode(), check=True)

    def read_text(self, path: Path) -> str | None:
        proc = self.shell(f"cat {shlex.quote(str(path))}")
        return proc.stdout if proc.returncode == 0 else None

    def exists(self, path: Path) -> bool:
        return self.shell(f"test -e {shlex.quote(str(path))}").returncode == 0

    def remove_tree(self, path: Path) -> None:
        self.shell(f"rm -rf {shlex.quote(str(path))}", check=True)

    def file_sizes(self, directory: Path, suffix: str) -> dict[str, int]:
        out = self.shell(f"find {shlex.quote(str(directory))} -maxdepth 1 -type f "
                         f"-name {shlex.quote('*' + suffix)} -printf '%f %s\\n' 2>/dev/null").stdout
        return {name: int(size) for name, size in (l.rsplit(" ", 1) for l in out.splitlines() if " " in l)}

    def truncate(self, path: Path, size: int) -> None:
        self.shell(f"truncate -s {int(size)} {shlex.quote(str(path))}", check=True)

    def read_bytes(self, path: Path) -> bytes | None:
        """A file's bytes, over SFTP (a shell's output is text); None when the host has no such file."""
        try:
            with self.sftp().open(str(path), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HarnessError(f"host {self.name}: reading {path} failed: {_reason(e)}") from None

    def write_bytes(self, path: Path, data: bytes) -> None:
        """Written beside, then renamed over `path` (SFTP's posix-rename): a reader never sees half."""
        tmp = f"{path}.kipcheck-tmp"
        try:
            with self.sftp().open(tmp, "wb") as f:
                f.write(data)
            self.sftp().posix_rename(tmp, str(path))
        except OSError as e:
            raise HarnessError(f"host {self.name}: writing {path} failed: {_reason(e)}") from None

    def list_dir(self, directory: Path, dirs_only: bool = False) -> list[str]:
        kind = " -type d" if dirs_only else ""
        out = self.shell(f"find {shlex.quote(str(directory))} -mindepth 1 -maxdepth 1{kind} -printf '%f\\n' "
                         "2>/dev/null").stdout
        return sorted(l for l in out.splitlines() if l)

    def is_dir(self, path: Path) -> bool:
        return self.shell(f"test -d {shlex.quote(str(path))}").returncode == 0

    def rename(self, source: Path, target: Path) -> None:
        self.shell(f"mv -T {shlex.quote(str(source))} {shlex.quote(str(target))}", check=True)

    def remove(self, path: Path) -> None:
        self.shell(f"rm -f {shlex.quote(str(path))}", check=True)

    def sftp(self):
        with self._sftp_lock:
            if self._sftp is None or self._sftp.get_channel().closed:
                self._sftp = connect(self.config).open_sftp()
                self._sftp.get_channel().settimeout(COMMAND_TIMEOUT)
            return self._sftp

    def fetch(self, path: Path, local: Path) -> Path | None:
        """Copy a file of the host to `local` (SFTP); None when the host has no such file."""
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.sftp().get(str(path), str(local))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise HarnessError(f"host {self.name}: copying {path} failed: {_reason(e)}") from None
        return local

    def put_files(self, files: list[Path], directory: PurePosixPath) -> None:
        """Copy local files into a directory of the host (SFTP, pipelined writes)."""
        sftp = self.sftp()
        for f in files:
            try:
                sftp.put(str(f), str(directory / f.name))
            except OSError as e:
                raise HarnessError(f"host {self.name}: copying {f.name} failed: {_reason(e)}") from None


def _short(command: str) -> str:
    return command if len(command) <= 80 else command[:77] + "..."


# -- what a host needs --------------------------------------------------------------------

def check_java(host: SshHost, java: str | None, kafka_version: str) -> str:
    """The host's java binary, checked to run and to be new enough for this Kafka; one line if not."""
    need = 17 if int(kafka_version.split(".")[0]) >= 4 else 11
    binary = java or "java"
    proc = host.shell(f"{shlex.quote(binary)} -version 2>&1")
    m = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stdout)
    if proc.returncode != 0 or not m:
        raise HarnessError(f"host {host.name}: no java to run Kafka ({binary}: "
                           f"{_reason(Exception(proc.stdout or 'not found'))}); install a JDK {need}+ "
                           f"or set \"kipcheck\": {{\"java\": PATH}} in the cluster file")
    major = int(m.group(1)) if m.group(1) != "1" else int(m.group(2) or 0)
    if major < need:
        raise HarnessError(f"host {host.name}: java {major} is too old for Kafka {kafka_version} (needs {need}+)")
    if java is None:  # the absolute path, so a node's command line does not depend on a login PATH
        binary = host.shell("command -v java", check=True).stdout.strip() or binary
    return binary


def check_sudo(host: SshHost) -> None:
    """A user other than root needs passwordless sudo for iptables (partitions)."""
    if host.sudo:
        host.iptables("-S", "INPUT")


def classpath_tag(classpath) -> str:
    """Names and sizes of the jars: a changed local cache makes a new directory on the hosts."""
    h = hashlib.sha256()
    for p in classpath:
        h.update(f"{Path(p).name}:{Path(p).stat().st_size}\n".encode())
    return h.hexdigest()[:12]


def sync_classpath(host: SshHost, classpath, remote: PurePosixPath) -> list[PurePosixPath]:
    """The Kafka jars in `remote` on the host, copied over SFTP only when that directory is not
    complete there (a `.complete` marker); a copy goes to a directory of its own first and is
    renamed, so hosts sharing a filesystem (and runs racing) never see half a classpath."""
    jars = [Path(p) for p in classpath]
    if not host.exists(remote / ".complete"):
        tmp = remote.with_name(f"{remote.name}.{host.name}.{os.getpid()}.tmp")
        host.shell(f"rm -rf {shlex.quote(str(tmp))} && mkdir -p {shlex.quote(str(tmp))}", check=True)
        host.put_files(jars, tmp)
        host.shell(f"touch {shlex.quote(str(tmp / '.complete'))} && "
                   f"{{ mv -T {shlex.quote(str(tmp))} {shlex.quote(str(remote))} 2>/dev/null || "
                   f"rm -rf {shlex.quote(str(tmp))}; }}", check=True)
    return [remote / p.name for p in jars]


def sync_binary(host: SshHost, local: Path, remote_dir: PurePosixPath) -> PurePosixPath:
    """An executable in `remote_dir` on the host, copied over SFTP when it is not there yet (to a
    name of its own first, then renamed: a racing copy never runs half a binary)."""
    target = remote_dir / local.name
    if not host.exists(target):
        tmp = remote_dir / f"{local.name}.{host.name}.{os.getpid()}.tmp"
        host.shell(f"mkdir -p {shlex.quote(str(remote_dir))}", check=True)
        try:
            host.sftp().put(str(local), str(tmp))
        except OSError as e:
            raise HarnessError(f"host {host.name}: copying {local.name} failed: {_reason(e)}") from None
        host.shell(f"chmod 755 {shlex.quote(str(tmp))} && mv -f {shlex.quote(str(tmp))} {shlex.quote(str(target))}",
                   check=True)
    return target


def clean_host(config: SshConfig, directory: str) -> list[str]:
    """Leave a host as kipcheck found it, from what is on the host alone (after a harness and
    its state were lost): kill every process a `kipcheck.<host>.pid` under `directory` records, delete
    every KIPCHECK-* chain, delete `directory`. Returns what it removed."""
    from kipcheck.harness.backends.network import remove_chain
    from kipcheck.harness.backends.state import kill_recorded
    host = SshHost(config, config.hostname, "")
    done = []
    base = shlex.quote(directory.rstrip("/"))
    pidfile = shlex.quote(PIDFILE.format(host=config.host))
    pidfiles = f"{base}/*/node-*/{pidfile} {base}/*/node-*/toxiproxy/{pidfile}"  # nodes, their Toxiproxy
    for line in host.shell(f"cat {pidfiles} 2>/dev/null").stdout.splitlines():
        try:
            pid, start = int(line.split()[0]), parse_stat(line)[1]
        except (ValueError, IndexError):
            continue
        if host.alive(pid, start):
            kill_recorded(pid, start, host=host)
            done.append(f"process {pid}")
    for chain in kipcheck_chains(host):
        remove_chain(SshHost(config, config.hostname, chain))
        done.append(f"chain {chain}")
    if host.exists(PurePosixPath(directory)):
        host.remove_tree(PurePosixPath(directory))
        done.append(directory)
    return done


def kipcheck_chains(host: SshHost) -> list[str]:
    """The KIPCHECK-* chains in the host's filter table."""
    out = host.iptables("-S", check=False).stdout
    return sorted({l.split()[1] for l in out.splitlines() if l.startswith(f"-N {CHAIN_PREFIX}")})


def _with_env(argv: list[str], env: dict | None) -> list[str]:
    """`argv` run with `env` added to the login environment (env(1) on the host)."""
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else argv
