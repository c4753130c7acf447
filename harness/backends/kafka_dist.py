"""Find a Kafka to run: jars resolved from Maven Central by Maven, or an unpacked distribution.

Resolution writes a throw-away pom and lets Maven copy the runtime classpath of
`kafka_2.13` (plus a log4j2 SLF4J binding) into a per-version cache, so a warm run needs no
network. Tiered storage needs no jar of Kafka's beyond these: its remote storage manager is
kipcheck's own (harness.backends.tiered).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kipcheck.harness.backends import releases
from kipcheck.harness.errors import HarnessError

#: where `--kafka-version latest` reads the released versions; KIPCHECK_MAVEN_METADATA overrides it
#: (a file:// listing lets the "a newer release appeared" path be tested offline)
MAVEN_METADATA = "https://repo1.maven.org/maven2/org/apache/kafka/kafka_2.13/maven-metadata.xml"
LATEST = "latest"
LOG4J_VERSION = "2.24.3"


def cache_root() -> Path:
    return Path(os.environ.get("KIPCHECK_CACHE", Path.home() / ".cache" / "kipcheck"))


@dataclass(frozen=True)
class KafkaDistribution:
    version: str
    classpath: tuple[Path, ...]
    java: str

    def java_command(self, main_class: str, *args: str, jvm_opts: tuple[str, ...] = ()) -> list[str]:
        cp = os.pathsep.join(str(p) for p in self.classpath)
        return [self.java, *jvm_opts, "-cp", cp, main_class, *args]


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "java") if java_home else None
    java = str(candidate) if candidate and candidate.exists() else shutil.which("java")
    if not java:
        raise HarnessError("java not found: install a JDK 17+ or set JAVA_HOME")
    return java


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def listed_versions() -> list[str]:
    """Every KRaft release x.y.z Maven Central lists for kafka_2.13, newest first."""
    url = os.environ.get("KIPCHECK_MAVEN_METADATA", MAVEN_METADATA)
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:
            xml = resp.read().decode()
    except (OSError, ValueError) as e:
        raise HarnessError(f"cannot read Kafka versions from {url} ({e}); pass --kafka-version X.Y.Z") from e
    versions = {v for v in re.findall(r"<version>(\d+\.\d+\.\d+)</version>", xml) if releases.is_kraft(v)}
    return sorted(versions, key=_version_key, reverse=True)


def latest_version() -> str:
    """`--kafka-version latest`: the newest release whose whole classpath Maven Central serves.

    Asked on purpose only: the default is the pinned `releases.DEFAULT_VERSION`. A listed
    release is sometimes only partly published (seen: 4.4.0 lacked kafka-tools-api for weeks),
    so each candidate is resolved before it is chosen, newest first."""
    errors = []
    for v in listed_versions():
        try:
            _resolve_maven(v)
        except HarnessError as e:
            errors.append(f"{v}: {e}")
            continue
        return v
    raise HarnessError("no Kafka release resolves from Maven Central: " + ("; ".join(errors[:3]) or "none listed"))


def version_of(requested: str | None) -> str:
    """The release a `--kafka-version` value names: the pinned default for None, the newest
    published one for `latest`, else the value itself (checked)."""
    if requested is None:
        return releases.DEFAULT_VERSION
    if requested == LATEST:
        return latest_version()
    if not re.fullmatch(r"\d+\.\d+\.\d+", requested):
        raise HarnessError(f"not a Kafka version: {requested!r} (expected e.g. {releases.DEFAULT_VERSION}, or {LATEST})")
    if not releases.is_kraft(requested):
        raise HarnessError(f"Kafka {requested} predates production KRaft: kipcheck runs "
                           f"{'.'.join(map(str, releases.FIRST_KRAFT))}.0 or newer")
    return requested


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>kipcheck</groupId><artifactId>kafka-classpath</artifactId><version>1</version><packaging>pom</packaging>
<dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{v}</version></dependency>
<dependency><groupId>org.apache.logging.log4j</groupId><artifactId>{binding}</artifactId><version>{log4j}</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>{slf4j}</version></dependency>
</dependencies></project>
"""
def _resolve_maven(version: str) -> Path:
    lib = cache_root() / "kafka" / version
    if (lib / ".complete").exists():
        return lib
    mvn = shutil.which("mvn")
    if not mvn:
        raise HarnessError("mvn not found: install Maven (apt-get install maven) or pass --kafka-home")
    binding, slf4j = releases.slf4j_binding(version)
    staging = Path(tempfile.mkdtemp(prefix="kipcheck-mvn-"))
    try:
        (staging / "pom.xml").write_text(_POM.format(v=version, binding=binding, log4j=LOG4J_VERSION, slf4j=slf4j))
        out = staging / "lib"
        proc = subprocess.run(
            [mvn, "-q", "-B", "-U", "-f", str(staging / "pom.xml"), "dependency:copy-dependencies",
             "-DincludeScope=runtime", f"-DoutputDirectory={out}",
             *([f"-Dmaven.repo.local={os.environ['KIPCHECK_MAVEN_REPO']}"] if os.environ.get("KIPCHECK_MAVEN_REPO") else [])],
            capture_output=True, text=True)
        if proc.returncode != 0:
            out = proc.stdout + proc.stderr
            missing = (re.search(r"artifacts? could not be resolved: ([^\s,]+?)[,:]?\s", out)
                       or re.search(r"Could not find artifact ([^\s]+)", out))
            why = f"missing {missing.group(1)}" if missing else "no network? see `mvn -X`"
            raise HarnessError(f"Kafka {version} does not resolve from Maven Central ({why})")
        lib.parent.mkdir(parents=True, exist_ok=True)
        if lib.exists():
            shutil.rmtree(lib)
        shutil.move(str(out), lib)
        (lib / ".complete").write_text(version)
        return lib
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _home_version(home: Path) -> str:
    for jar in (home / "libs").glob("kafka_2.13-*.jar"):
        m = re.match(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar$", jar.name)
        if m:
            return m.group(1)
    raise HarnessError(f"{home} is not an unpacked Kafka distribution (no libs/kafka_2.13-*.jar)")


def resolve(version: str | None = None, kafka_home: str | None = None) -> KafkaDistribution:
    """The Kafka to run, as a classpath and a java binary."""
    java = find_java()
    if kafka_home:
        home = Path(kafka_home)
        v = _home_version(home)
        jars = sorted((home / "libs").glob("*.jar"))
        return KafkaDistribution(v, tuple(jars), java)
    v = version_of(version)
    lib = _resolve_maven(v)
    return KafkaDistribution(v, tuple(sorted(lib.glob("*.jar"))), java)


if __name__ == "__main__":  # `python -m harness.backends.kafka_dist [VERSION]`: fill the cache (used by install.sh)
    import sys
    try:
        d = resolve(sys.argv[1] if len(sys.argv) > 1 else None)
    except HarnessError as e:
        print(f"kipcheck: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"Kafka {d.version}: {len(d.classpath)} jars in {d.classpath[0].parent}")
