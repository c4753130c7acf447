"""The pytest plugin's verdict as a user meets it: `kipcheck_check(history)` fails a test whose
history has an anomaly (with the anomaly and its proof records in the message) and passes a
valid one; under allure-pytest each test becomes one Allure test carrying the verdict, and the
Allure command line renders a report whose page, loaded in headless Chromium, names the anomaly.

The tests run a small test file in a pytest subprocess: its histories are forged by hand,
one with an offset that holds two values (inconsistent-offset), so no cluster is needed.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORGED = '''
def _sends(history):
    for value, offset in (("a", 0), ("b", 1)):
        history.invoke(0, "send", {"topic": "t", "partition": 0, "value": value}).ok(offset=offset)


def test_forged_anomaly(history, kipcheck_check):
    _sends(history)
    # forged: offset 1 read back holding "x", which was never written there
    history.invoke(9, "poll", {"topic": "t"}).ok(records=[["t", 0, 0, "a"], ["t", 0, 1, "x"]])
    kipcheck_check(history)


def test_valid_history(history, kipcheck_check):
    _sends(history)
    history.invoke(9, "poll", {"topic": "t"}).ok(records=[["t", 0, 0, "a"], ["t", 0, 1, "b"]])
    assert kipcheck_check(history)["valid"] is True
'''


@pytest.fixture(scope="module")
def forged_run(tmp_path_factory):
    """The forged test file run by pytest with `--alluredir`: (process, allure results directory)."""
    d = tmp_path_factory.mktemp("forged")
    (d / "test_forged.py").write_text(FORGED)
    results = d / "allure-results"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KIPCHECK_SEED": "7"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf",
                           "-c", str(ROOT / "pyproject.toml"), f"--alluredir={results}", "--rootdir", str(d), str(d / "test_forged.py")],
                          cwd=d, env=env, capture_output=True, text=True, timeout=300)
    return proc, results


def _results(results: Path) -> dict[str, dict]:
    found = [json.loads(p.read_text()) for p in results.glob("*-result.json")]
    return {r["name"]: r for r in found}


def _steps(item: dict):
    for s in item.get("steps", []):
        yield s
        yield from _steps(s)


def test_check_fails_the_forged_anomaly_with_its_proof(forged_run):
    proc, _ = forged_run
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "1 failed, 1 passed" in out, out[-3000:]
    assert "FAILED" in out and "test_forged_anomaly" in out
    assert "kipcheck: the history is invalid" in out
    assert "inconsistent-offset: 1 example(s)" in out
    assert "t/0 offset 1 holds 2 values" in out
    # the proof records themselves: the send of "b" at offset 1 and the poll that read "x" there
    assert 'proof [3] {"index":3' in out and '"value":"b"' in out
    assert 'proof [5] {"index":5' in out and '"x"' in out
    assert "DeprecationWarning" not in out  # third-party warnings are filtered (pyproject)


def test_one_allure_test_per_test_with_the_verdict(forged_run):
    _, results = forged_run
    tests = _results(results)
    assert set(tests) == {"test_forged_anomaly", "test_valid_history"}
    bad, good = tests["test_forged_anomaly"], tests["test_valid_history"]
    assert bad["status"] == "failed" and good["status"] == "passed"
    assert "inconsistent-offset" in bad["statusDetails"]["message"]
    for t, verdict in ((bad, "invalid"), (good, "valid")):
        assert {"name": "tag", "value": f"verdict {verdict}"} in t["labels"]
        params = {p["name"]: p["value"] for p in t["parameters"]}
        assert params["seed"] == "7" and params["profile"] == "'kip'"  # allure-pytest shows repr()
        names = {a["name"] for a in t["attachments"]}
        assert {"verdict", "fault schedule", "history excerpt"} <= names
        for a in t["attachments"]:
            assert (results / a["source"]).exists()
    steps = list(_steps(bad))
    anomaly = next(s for s in steps if s["name"].startswith("anomaly inconsistent-offset"))
    assert anomaly["status"] == "failed"
    example = anomaly["steps"][0]
    assert "offset 1 holds 2 values" in example["name"] and example["status"] == "failed"
    proof = json.loads((results / example["attachments"][0]["source"]).read_text())
    assert [r["index"] for r in proof["records"]] == [3, 5]
    assert not [s for s in _steps(good) if s["name"].startswith("anomaly")]


def allure_command() -> str:
    """The Allure command line: on PATH, or installed from npm into the kipcheck cache
    (what `scripts/install.sh --allure` does)."""
    found = shutil.which("allure")
    if found:
        return found
    prefix = Path(os.environ.get("KIPCHECK_CACHE", Path.home() / ".cache" / "kipcheck")) / "allure"
    local = prefix / "node_modules" / ".bin" / "allure"
    if not local.exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                        "allure-commandline@2"], check=True, capture_output=True, timeout=600)
    return str(local)


def test_rendered_report_shows_the_anomaly_in_chromium(forged_run, tmp_path):
    _, results = forged_run
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is missing: run scripts/install.sh --allure")
    report = tmp_path / "allure-report"
    subprocess.run([allure_command(), "generate", str(results), "-o", str(report), "--clean"],
                   check=True, capture_output=True, timeout=300)
    suite = json.loads((report / "data" / "suites.json").read_text())["children"][0]
    failed_case = next(c for c in suite["children"] if c["name"] == "test_forged_anomaly")
    # the Allure UI is a JS app reading data/ by fetch: serve it, load the failed test's page
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                               "--directory", str(report)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    shots = ROOT / "tests" / "artifacts"
    shots.mkdir(exist_ok=True)
    browser = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
               "--window-size=1400,1000"]

    def page(route: str, shot: Path) -> str:
        """The DOM of one route after the app has loaded; a screenshot of it beside the tests' artifacts."""
        url = f"http://127.0.0.1:{port}/index.html#{route}"
        subprocess.run([*browser, f"--screenshot={shot}", url], capture_output=True, timeout=180)
        assert shot.exists() and shot.stat().st_size > 10_000
        return subprocess.run([*browser, "--dump-dom", url], capture_output=True, text=True, timeout=180).stdout

    try:
        port = int(server.stdout.readline().split(" port ")[1].split(" ")[0])
        # the suite's tree opened on the failed test: both tests listed, the failed one's steps shown
        failed = page(f"suites/{suite['uid']}/{failed_case['uid']}/", shots / "allure-failed-test.png")
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "test_forged_anomaly" in failed and "test_valid_history" in failed
    assert "anomaly inconsistent-offset: 1 example(s)" in failed
    assert "offset 1 holds 2 values" in failed
    assert "fault schedule" in failed and "history excerpt" in failed


USER_PROJECT = '''
import warnings


def test_imports_the_harness_and_warns_itself():
    import kipcheck.harness.clients.wire  # kafka-python's protocol schemas: 109 DeprecationWarnings from inside it
    warnings.warn("the user's own deprecation", DeprecationWarning)


def test_on_each_version(kafka_version):
    assert kafka_version
'''


def _user_project_run(tmp_path, *args) -> str:
    """pytest in a project of the user's own (no kipcheck pyproject), in a fresh interpreter."""
    (tmp_path / "test_user.py").write_text(USER_PROJECT)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, "test_user.py"],
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=300)
    return proc.stdout + proc.stderr


def test_dependency_deprecations_are_silenced_the_users_own_are_not(tmp_path):
    out = _user_project_run(tmp_path, "-k", "imports")
    assert "1 passed, 1 deselected, 1 warning in" in out, out[-2000:]
    assert "the user's own deprecation" in out and "is deprecated. Use files()" not in out
    # without the kipcheck plugin the same run shows kafka-python's warnings: the filter is what hides them
    bare = _user_project_run(tmp_path, "-k", "imports", "-p", "no:kipcheck")
    assert "is deprecated. Use files()" in bare, bare[-2000:]


def test_the_version_matrix_becomes_allure_parameters(tmp_path):
    results = tmp_path / "allure-results"
    out = _user_project_run(tmp_path, "-k", "each_version", "--kafka-matrix", "4.2.1,4.3.1", f"--alluredir={results}")
    assert "2 passed" in out, out[-2000:]
    tests = [json.loads(p.read_text()) for p in results.glob("*-result.json")]
    versions = sorted(p["value"] for t in tests for p in t["parameters"] if p["name"] == "kafka_version")
    assert versions == ["'4.2.1'", "'4.3.1'"]
