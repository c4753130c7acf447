"""The plugin's shared `cluster` stops once the next test does not use it, and starts again for
a later test that does (harness.pytest_plugin.pytest_runtest_teardown).

A user's project runs in a pytest subprocess with the plugin's cluster start replaced by a
stand-in that writes each start and stop to a file: what is judged is when pytest sets the
fixture up and tears it down, not Kafka (the live tests start real shared clusters).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFTEST = '''
import os
import pytest
import kipcheck.harness.pytest_plugin as plugin

LOG = os.environ["SHARED_CLUSTER_LOG"]


def note(line):
    with open(LOG, "a") as fh:
        fh.write(line + "\\n")


class StandIn:
    started = 0

    def __init__(self):
        StandIn.started += 1
        self.n = StandIn.started
        note(f"up {self.n}")

    def down(self):
        note(f"down {self.n}")


plugin._start = lambda *args, **kwargs: StandIn()


@pytest.fixture(scope="session")
def kafka_dist():
    return None


@pytest.fixture(autouse=True)
def _named(request):
    note(request.node.name)
'''

TESTS = {
    "test_1_shares.py": "def test_first(cluster):\n    pass\n\ndef test_second(cluster):\n    pass\n",
    "test_2_pure.py": "def test_pure():\n    pass\n",
    "test_3_own.py": ("import pytest\n\n@pytest.fixture(scope='module')\ndef cluster():\n    return 'its own'\n\n"
                      "def test_own(cluster):\n    assert cluster == 'its own'\n"),
    "test_4_shares_again.py": "def test_again(cluster):\n    pass\n",
}


def test_the_shared_cluster_stops_between_its_users_and_starts_again(tmp_path):
    for name, text in {"conftest.py": CONFTEST, **TESTS}.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    log = tmp_path / "log"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-p", "no:xdist"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT), "SHARED_CLUSTER_LOG": str(log)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # the first module's two tests share one start; the pure test and the module with a cluster of its
    # own run with it stopped; the last test gets a new one, stopped at the session's end
    assert log.read_text().split("\n") == [
        "up 1", "test_first", "test_second", "down 1", "test_pure", "test_own", "up 2", "test_again", "down 2", ""]
