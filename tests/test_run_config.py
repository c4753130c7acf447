"""config.json has one owner (rundir.config): every reader gets the same dict, unknown keys kept."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from kipcheck.rundir import config as run_config
from kipcheck.checks.profiles import kafka_version
from kipcheck.checks.recovery import recorded_bound

ROOT = Path(__file__).resolve().parent.parent


def test_write_then_load_keeps_unknown_keys_from_the_run_dir_or_a_file_in_it(tmp_path):
    config = run_config.RunConfig(seed=3, kafka_version="4.3.1", recovery_bound={"seconds": 40.0, "parts": {}})
    config["from_a_newer_kipcheck"] = {"x": 1}  # type: ignore[typeddict-unknown-key]
    path = run_config.write(tmp_path, config)
    assert path == tmp_path / "config.json"
    assert run_config.load(tmp_path) == config
    assert run_config.load(tmp_path / "history.jsonl") == config  # the history's own directory
    assert kafka_version(tmp_path / "history.jsonl") == "4.3.1"
    assert recorded_bound(tmp_path)["seconds"] == 40.0


def test_no_config_or_a_broken_one_reads_as_empty(tmp_path):
    assert run_config.load(tmp_path) == {}
    for text in ("{not json", "[1, 2]", '"a string"'):
        (tmp_path / "config.json").write_text(text)
        assert run_config.load(tmp_path) == {}, text
        assert kafka_version(tmp_path) is None and recorded_bound(tmp_path) is None
    (tmp_path / "config.json").write_text(json.dumps({"kafka_version": "3.9.1"}))
    assert kafka_version(tmp_path) == "3.9.1"


def test_only_the_owner_names_the_file():
    """Every other module goes through rundir.config (load, write, path_of): a new
    reader that opens "config.json" itself is named here."""
    named = []
    for package in ("harness", "faults", "checks", "reports"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "checks" / "run_config.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("config.json") \
                        and not _is_docstring_or_help(node, path):
                    named.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert named == []


def _is_docstring_or_help(node: ast.Constant, path: Path) -> bool:
    """A file name mentioned in prose (a docstring, an HTML link, a help text) opens nothing."""
    return " " in node.value or "/" in node.value
