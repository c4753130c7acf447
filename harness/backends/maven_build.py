"""Build one of kipcheck's own Java jars with Maven into the kipcheck cache, keyed by a hash of
its sources, so it is built once per source change (the seeded-bug agent, harness.backends.seeded;
the remote storage manager, harness.backends.tiered)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import cache_root


def source_hash(sources: Path) -> str:
    h = hashlib.sha256()
    for p in sorted([sources / "pom.xml", *(sources / "src").rglob("*.java")]):
        h.update(p.relative_to(sources).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def cached_jar(sources: Path, name: str, what: str) -> Path:
    """`<cache>/<name>/<source hash>/<name>.jar`: from the cache, or built by `mvn package` once
    (the pom's artifactId is `name`, its version 1). `what` names the jar in errors."""
    if not (sources / "pom.xml").exists():
        raise HarnessError(f"the sources of {what} are missing ({sources})")
    jar = cache_root() / name / source_hash(sources) / f"{name}.jar"
    if jar.exists():
        os.utime(jar.parent)  # in use: `_prune` keeps it
        return jar
    mvn = shutil.which("mvn")
    if not mvn:
        raise HarnessError(f"mvn not found: install Maven (apt-get install maven) to build {what}")
    build = jar.parent / "build"
    shutil.rmtree(build, ignore_errors=True)
    shutil.copytree(sources, build, ignore=shutil.ignore_patterns("target"))
    proc = subprocess.run(
        [mvn, "-q", "-B", "-f", str(build / "pom.xml"), "package", "-DskipTests",
         *([f"-Dmaven.repo.local={os.environ['KIPCHECK_MAVEN_REPO']}"] if os.environ.get("KIPCHECK_MAVEN_REPO") else [])],
        capture_output=True, text=True)
    built = build / "target" / f"{name}-1.jar"
    if proc.returncode != 0 or not built.exists():
        lines = [l for l in (proc.stdout + proc.stderr).splitlines() if "ERROR" in l]
        raise HarnessError(f"building {what} failed: " + (lines[0] if lines else "see mvn output")[:300])
    shutil.move(str(built), jar)
    shutil.rmtree(build, ignore_errors=True)
    _prune(jar.parent.parent, keep=jar.parent)
    return jar


#: a jar built from other sources is removed only when nothing built or used it this long: another checkout on
#: the machine (a CI clone, a worktree) may still start or restart brokers with its own
STALE_AFTER_S = 7 * 86400


def _prune(root: Path, keep: Path, now: float | None = None) -> None:
    now = time.time() if now is None else now
    for old in root.iterdir():
        if old != keep and now - old.stat().st_mtime > STALE_AFTER_S:
            shutil.rmtree(old, ignore_errors=True)


def print_jar(what: str, build) -> None:
    """`python -m` of a module that builds a jar (install.sh warms the cache with it): print
    `what: path` from `build()`, or one line on stderr and exit 2."""
    import sys
    try:
        print(f"{what}: {build()}")
    except HarnessError as e:
        print(f"kipcheck: {e}", file=sys.stderr)
        sys.exit(2)
