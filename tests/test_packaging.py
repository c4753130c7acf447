"""kipcheck as a user installs it: one wheel, one top-level import name (`kipcheck`), and what
it needs shipped inside it. The wheel is built from this checkout and installed into a fresh
virtual environment outside it (its dependencies come from this machine's site-packages:
`--system-site-packages`, `--no-deps`), and used from a directory that is not the checkout."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("harness", "faults", "reference_model", "checks", "reports", "rundir")

USER_TEST = '''
from checks.mine import VALUE  # the user's own `checks` package, beside kipcheck's plugin


def test_a_users_history(history, kipcheck_check):
    for value, offset in ((VALUE, 0), ("b", 1)):
        history.invoke(0, "send", {"topic": "t", "partition": 0, "value": value}).ok(offset=offset)
    history.invoke(9, "poll", {"topic": "t"}).ok(records=[["t", 0, 0, VALUE], ["t", 0, 1, "b"]])
    assert kipcheck_check(history)["valid"] is True
'''


def test_the_declared_packages_are_every_folder_with_an_init():
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"kipcheck"} | {"kipcheck." + ".".join(p.parent.relative_to(ROOT).parts)
                            for layer in LAYERS for p in (ROOT / layer).rglob("__init__.py")}
    assert declared == found


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv, wheel): the wheel built from this checkout, installed into a new venv."""
    d = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(d),
                    str(ROOT)], check=True, capture_output=True, timeout=600)
    [wheel] = d.glob("kipcheck-*.whl")
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    # --ignore-installed: the machine's own kipcheck (an editable install of a checkout) is visible
    # through --system-site-packages and would otherwise count as already installed
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--ignore-installed", "-q",
                    "--disable-pip-version-check", str(wheel)], check=True, capture_output=True, timeout=600)
    return venv, wheel


def _in(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_wheel_has_one_top_level_name_and_ships_its_data(installed):
    _, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")} == {"kipcheck"}
    for shipped in ("kipcheck/reports/viewer.js", "kipcheck/reference_model/scenarios/kip227-session.json",
                    "kipcheck/checks/samples/leader-isolation/history.jsonl",
                    "kipcheck/harness/backends/seeded_bugs/pom.xml",
                    "kipcheck/harness/backends/seeded_bugs/src/main/java/kipcheck/seeded/Agent.java",
                    "kipcheck/harness/backends/remote_storage/pom.xml",
                    "kipcheck/harness/clients/share_schemas/ShareFetchRequest.json"):
        assert shipped in names, shipped
    assert not any(n.startswith("kipcheck/tests/") for n in names)


def test_the_installed_command_replays_a_shipped_scenario_and_checks_a_shipped_history(installed, tmp_path):
    venv, _ = installed
    where = _in(venv, tmp_path, "python", "-c", "import kipcheck.checks; print(kipcheck.checks.__file__)")
    assert where.returncode == 0 and str(venv) in where.stdout, where.stdout + where.stderr  # the wheel's, not ours
    assert _in(venv, tmp_path, "kipcheck", "--help").returncode == 0
    replay = _in(venv, tmp_path, "kipcheck", "model", "replay", "kip227-session")
    assert replay.returncode == 0 and '"session_id": 7' in replay.stdout, replay.stderr
    sample = Path(where.stdout.strip()).parent / "samples" / "leader-isolation"
    check = _in(venv, tmp_path, "kipcheck", "check", str(sample))
    assert check.returncode == 0 and check.stdout.startswith("valid: True"), check.stdout + check.stderr


def test_a_users_own_checks_package_lives_beside_the_plugin(installed, tmp_path):
    venv, _ = installed
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "__init__.py").write_text("")
    (tmp_path / "checks" / "mine.py").write_text('VALUE = "mine"\n')
    (tmp_path / "test_users.py").write_text(USER_TEST)
    proc = _in(venv, tmp_path, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_users.py")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout


def test_no_tracked_file_holds_a_merge_conflict_marker():
    """A merge once left `<<<<<<<` in docs/faults.md; nothing shipped or documented may carry one."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    markers = ("<<<<<<< ", ">>>>>>> ")
    found = [f"{name}:{number}" for name in tracked if name.endswith((".py", ".md", ".toml", ".sh", ".java", ".cfg"))
             for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
             if line.startswith(markers)]
    assert found == []
