"""harness.backends.firewall against the real iptables, in a throwaway network namespace (root only).

The Docker case end to end is tests/integration/test_beside_docker.py; this covers when the
rule is (not) inserted, that it is recorded first, and that teardown and the orphan sweep
delete exactly kipcheck's rules."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("iptables"), reason="needs root and iptables")


@pytest.fixture
def netns():
    name = f"kcfw{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    yield name
    subprocess.run(["ip", "netns", "del", name])


PRELUDE = """
import json, re, subprocess
from kipcheck.harness.backends import firewall
from kipcheck.harness.backends.state import ClusterState
def sh(*argv): return subprocess.run(argv, capture_output=True, text=True, check=True).stdout
def saved():  # the rules without timestamps and packet counters
    return "\\n".join(re.sub(r" \\[\\d+:\\d+\\]$", "", l) for l in sh("iptables-save").splitlines() if not l.startswith("#"))
"""


def _in_ns(ns: str, tmp_path, code: str) -> dict:
    """Run `code` in the namespace with a private state directory; it prints one JSON object."""
    proc = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
                          env={**os.environ, "KIPCHECK_STATE_DIR": str(tmp_path / "state")},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_no_rule_where_bridged_traffic_is_not_filtered(netns, tmp_path):
    out = _in_ns(netns, tmp_path, """
    results = {}
    state = ClusterState.create("c0ffee01", None)
    results["no filter table"] = [firewall.accept_bridge(state, "kcbc0ffee01", "c0ffee01"), saved()]
    sh("iptables", "-P", "FORWARD", "DROP")
    open(firewall.BRIDGE_NF, "w").write("0")  # per network namespace since Linux 5.3
    results["br_netfilter off"] = [firewall.accept_bridge(state, "kcbc0ffee01", "c0ffee01"), sh("iptables", "-S", "FORWARD")]
    results["recorded"] = state.data.get("forward_rules", [])
    print(json.dumps(results))
    """)
    assert out["no filter table"] == [None, ""]  # asking created no table either
    assert out["br_netfilter off"] == [None, "-P FORWARD DROP\n"]
    assert out["recorded"] == []


def test_rule_is_recorded_inserted_and_deleted_and_orphans_are_swept(netns, tmp_path):
    out = _in_ns(netns, tmp_path, """
    from kipcheck.harness.backends.sweep import reap_orphan_rules
    sh("iptables", "-P", "FORWARD", "DROP")
    sh("iptables", "-A", "FORWARD", "-i", "docker0", "-j", "ACCEPT")  # someone else's rule stays
    before = saved()
    kept, gone = ClusterState.create("aaaa0001", None), ClusterState.create("bbbb0002", None)
    errors = [firewall.accept_bridge(s, "kcb" + s.data["cluster_id"], s.data["cluster_id"]) for s in (kept, gone)]
    during = sh("iptables", "-S", "FORWARD")
    gone.remove()  # its state file deleted by hand: the rule is an orphan
    swept = reap_orphan_rules()
    after_sweep = sh("iptables", "-S", "FORWARD")
    firewall.delete_rules(kept.data["forward_rules"])
    print(json.dumps({"errors": errors, "recorded": kept.data["forward_rules"], "during": during, "swept": swept,
                      "after_sweep": after_sweep, "restored": saved() == before}))
    """)
    assert out["errors"] == [None, None]
    assert out["recorded"] == [["FORWARD", "-i", "kcbaaaa0001", "-o", "kcbaaaa0001", "-m", "comment",
                                "--comment", "kipcheck aaaa0001", "-j", "ACCEPT"]]
    first = out["during"].splitlines()[1]  # inserted at the top, above the existing rule
    assert first.startswith("-A FORWARD -i kcbbbbb0002 -o kcbbbbb0002") and first.endswith("-j ACCEPT"), out["during"]
    assert "kcbaaaa0001" in out["during"]
    assert len(out["swept"]) == 1 and "bbbb0002" in out["swept"][0]
    assert "kcbbbbb0002" not in out["after_sweep"] and "kcbaaaa0001" in out["after_sweep"]
    assert out["restored"] is True
