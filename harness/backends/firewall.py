"""kipcheck's bridge beside a host firewall (Docker, ufw): one ACCEPT rule, and a reachability check.

With br_netfilter loaded (`net.bridge.bridge-nf-call-iptables=1`), frames crossing a Linux
bridge pass iptables' FORWARD chain, and Docker (like ufw) sets that chain's policy to DROP:
the nodes on kipcheck's bridge could not reach each other. So, when bridged traffic is
filtered, kipcheck inserts one rule at the top of FORWARD that accepts what enters *and*
leaves its own bridge, nothing else (no route into or out of the cluster is opened).

FORWARD rather than DOCKER-USER: FORWARD exists with or without Docker (which may start
after kipcheck), and Docker's (re)start never flushes it: it puts its own rules back above
kipcheck's and rebuilds its DOCKER* chains, none of which match kipcheck's bridge, so the rule
survives and still takes effect (seen with Debian 12's docker.io 20.10, restarted beside it). Each rule is recorded in the cluster state
before it is inserted and deleted by teardown (end of run, reaper, `kipcheck cluster down`);
a rule whose comment names a cluster no state knows is an orphan, removed by `sweep.reap_stale`.
Rules live in the network namespace the harness runs in (the bridge's).
"""
from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

CHAIN = "FORWARD"
COMMENT_PREFIX = "kipcheck "
BRIDGE_NF = Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
PROBE_PORT = 9  # discard: nothing listens on a fresh node, so a reachable node answers with a RST


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", *args], capture_output=True, text=True)


def bridge_filtered() -> bool:
    """True when bridged frames pass iptables in this network namespace (br_netfilter on)."""
    try:
        return BRIDGE_NF.read_text().strip() == "1"
    except OSError:
        return False


def _filter_table_exists() -> bool:
    """Without a filter table nothing can drop forwarded traffic. Asking must not create one:
    `iptables -S` would not, but iptables-nft's `-I` would, and it would stay after `-D`."""
    try:
        return "*filter" in subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    except OSError:
        return False


def forward_policy() -> str | None:
    """The FORWARD chain's policy (ACCEPT, DROP), None when iptables cannot say."""
    if not shutil.which("iptables"):
        return None
    for line in _iptables("-S", CHAIN).stdout.splitlines():
        if line.startswith(f"-P {CHAIN} "):
            return line.split()[2]
    return None


def accept_rule(bridge: str, cluster_id: str) -> list[str]:
    """The rule (chain first) that lets traffic between the nodes of one bridge through FORWARD."""
    return [CHAIN, "-i", bridge, "-o", bridge, "-m", "comment", "--comment", f"{COMMENT_PREFIX}{cluster_id}",
            "-j", "ACCEPT"]


def accept_bridge(state, bridge: str, cluster_id: str) -> str | None:
    """Insert the bridge's ACCEPT rule when bridged traffic is filtered; the error text if that failed."""
    if not shutil.which("iptables") or not bridge_filtered() or not _filter_table_exists():
        return None
    rule = accept_rule(bridge, cluster_id)
    state.append("forward_rules", rule)
    proc = _iptables("-I", *rule)
    if proc.returncode != 0:
        return proc.stderr.strip() or f"iptables exit {proc.returncode}"
    return None


def rule_present(rule: list[str]) -> bool:
    return shutil.which("iptables") is not None and _iptables("-C", *rule).returncode == 0


def delete_rules(rules: list[list[str]]) -> None:
    """Delete recorded rules that are present (a rule recorded but never inserted is skipped)."""
    for rule in rules:
        for _ in range(5):  # inserted once; a copy left by a retried insert goes too
            if not rule_present(rule) or _iptables("-D", *rule).returncode != 0:
                break


def kipcheck_rules() -> list[tuple[str, list[str]]]:
    """(cluster id, rule) for every FORWARD rule whose comment says kipcheck put it there."""
    if not shutil.which("iptables"):
        return []
    found = []
    for line in _iptables("-S", CHAIN).stdout.splitlines():
        if not line.startswith(f"-A {CHAIN} ") or COMMENT_PREFIX not in line:
            continue
        words = shlex.split(line)[1:]
        comment = words[words.index("--comment") + 1] if "--comment" in words else ""
        if comment.startswith(COMMENT_PREFIX):
            found.append((comment[len(COMMENT_PREFIX):], words))
    return found


# -- reachability -----------------------------------------------------------------------
_PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
except ConnectionRefusedError:
    pass
except OSError as e:
    print(e.strerror or ("timed out" if isinstance(e, TimeoutError) else type(e).__name__)); sys.exit(1)
"""


def probe(address: str, timeout: float = 3.0, wrap=lambda argv: argv) -> str | None:
    """None when `address` answers a TCP connect (a refusal counts: the packets got there); else why not.

    Runs in a fresh interpreter so that `wrap` (e.g. `Host.wrap`) can place it in a node's namespace."""
    argv = wrap([sys.executable, "-c", _PROBE, address, str(PROBE_PORT), str(timeout)])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 10)
    return None if proc.returncode == 0 else (proc.stdout.strip() or proc.stderr.strip()[-200:] or "no answer")


def why_blocked(bridge: str, cluster_id: str, rule_error: str | None) -> str:
    """What in this namespace's firewall stands between two nodes on `bridge`, as one clause."""
    parts = []
    if bridge_filtered():
        parts.append("bridged traffic passes iptables (br_netfilter: net.bridge.bridge-nf-call-iptables=1)")
    policy = forward_policy()
    if policy and policy != "ACCEPT":
        parts.append(f"the iptables FORWARD policy is {policy} (Docker and ufw set it)")
    if rule_error:
        parts.append(f"kipcheck could not add its ACCEPT rule for {bridge}: {rule_error}")
    elif rule_present(accept_rule(bridge, cluster_id)):
        parts.append(f"kipcheck's ACCEPT rule for {bridge} is in FORWARD, so a rule before it (DOCKER-USER?) "
                     "or another firewall (nftables, ebtables, iptables-legacy beside iptables-nft) drops the traffic")
    return "; ".join(parts) or "no firewall rule found in the way (check `ip link`, ebtables, nftables)"

