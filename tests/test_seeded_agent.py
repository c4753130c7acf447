"""The seeded-bug agent in a real JVM: a Kafka class without the target method is reported
"missing" (the matrix's "not installable"), and the JVM runs on. Needs java, javac and the
agent jar (built by Maven on first use, as scripts/install.sh does)."""
from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from kipcheck.harness.backends import seeded

STUB = """package kafka.cluster;
public class Partition {
    public long readRecords(long offset) { return offset; }  // not the 7-argument method of Kafka 4.3.1
}
"""
MAIN = """public class Main {
    public static void main(String[] args) throws Exception {
        System.out.println(new kafka.cluster.Partition().readRecords(41L) + 1);
        Thread.sleep(1500);  // the agent reports every 500 ms
    }
}
"""


@pytest.mark.skipif(not (shutil.which("javac") and shutil.which("mvn")), reason="needs a JDK and Maven")
def test_a_class_without_the_target_method_is_reported_missing(tmp_path):
    jar = seeded.agent_jar()
    (tmp_path / "kafka" / "cluster").mkdir(parents=True)
    (tmp_path / "kafka" / "cluster" / "Partition.java").write_text(STUB)
    (tmp_path / "Main.java").write_text(MAIN)
    subprocess.run(["javac", "-d", str(tmp_path), str(tmp_path / "kafka" / "cluster" / "Partition.java"),
                    str(tmp_path / "Main.java")], check=True, timeout=120)
    report = tmp_path / "report.json"
    control = tmp_path / "control"
    seeded.switch(control, "hwm-regression")
    proc = subprocess.run(["java", f"-javaagent:{jar}=control={control},report={report}", "-cp", str(tmp_path),
                           "Main"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"  # the stub ran untouched
    deadline = time.monotonic() + 60  # the agent writes it from its own thread: slow on a loaded machine
    while not report.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    rep = json.loads(report.read_text())
    assert set(rep["missing"]) == {"hwm-regression", "lso-violation", "duplicate"}  # kafka.cluster.Partition stub
    assert rep["missing"]["hwm-regression"] == "kafka.cluster.Partition.readRecords"
    assert "hwm-regression" not in rep["installed"] and "duplicate" not in rep["installed"]
    assert rep["active"] == "hwm-regression" and rep["fired"] == {}
