"""The Kafka image of the testcontainers backend, built locally: no registry is needed.

Two layers. The base is a minimal root filesystem made from this machine's own files and
`docker import`ed: the JRE kipcheck already runs Kafka with (`kafka_dist.find_java`), the
shared libraries it links (its `ldd` closure) and /bin/sh. On it, a Dockerfile copies the
Kafka jars Maven resolved into the kipcheck cache (harness.backends.kafka_dist). Both are tagged
with a hash of what went into them, so an unchanged JRE and Kafka reuse the image.

Copying the host's OpenJDK (GPLv2 with the Classpath Exception) into a local image is the
same as running it from /usr/lib/jvm; the image is never pushed anywhere.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path

from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.kafka_dist import KafkaDistribution

RECIPE = "2"  # bump when the image's layout changes: old tags no longer match
REPOSITORY = "kipcheck/kafka"
KAFKA_LIB = "/opt/kafka/lib"  # where the jars are in the image
SHELL = "/bin/sh"
DOCKERFILE = f"""FROM {{base}}
COPY lib/ {KAFKA_LIB}/
ENV PATH={{java_bin}}:/bin
LABEL kipcheck.kafka-version={{version}}
"""


def java_home(java: str) -> Path:
    """The JRE directory of a `java` binary (…/bin/java, symlinks followed)."""
    return Path(os.path.realpath(java)).parent.parent


def _ldd(path: Path) -> set[Path]:
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
    return {Path(m) for m in re.findall(r"(/\S+) \(0x", out)}


def _base_files(jre: Path) -> list[Path]:
    """Every file of the base: the JRE, /bin/sh, and the libraries they link."""
    shell = Path(os.path.realpath(SHELL))
    elfs = [jre / "bin" / "java", shell, *jre.glob("lib/**/*.so")]
    libs: set[Path] = set()
    for elf in elfs:
        libs |= _ldd(elf)
    return [shell, *sorted(l for l in libs if not l.is_relative_to(jre))]  # the JRE's own go in with it


def _digest(parts: list[tuple[str, Path]]) -> str:
    """sha256 over names and contents, the first 12 hex digits."""
    h = hashlib.sha256(RECIPE.encode())
    for name, path in parts:
        h.update(name.encode() + b"\0")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:12]


def base_tag(jre: Path) -> str:
    """The base's tag: the JRE's `release` file and its `java` binary, and /bin/sh."""
    shell = Path(os.path.realpath(SHELL))
    parts = [(str(jre / "release"), jre / "release"), (str(jre / "bin/java"), jre / "bin/java"), (str(shell), shell)]
    return f"{REPOSITORY}-base:{_digest([(n, p) for n, p in parts if p.exists()])}"


def image_tag(dist: KafkaDistribution) -> str:
    """The Kafka image's tag: its version, the base it stands on and every jar's content."""
    jre = java_home(dist.java)
    base = base_tag(jre).split(":")[1]
    return f"{REPOSITORY}:{dist.version}-{_digest([(p.name, p) for p in dist.classpath] + [(base, jre / 'bin/java')])}"


def in_image(dist: KafkaDistribution) -> KafkaDistribution:
    """The same distribution as the image sees it: its jars under KAFKA_LIB, the same java path."""
    jre = java_home(dist.java)
    return KafkaDistribution(dist.version, tuple(Path(KAFKA_LIB, p.name) for p in dist.classpath),
                             str(jre / "bin" / "java"))


def ensure_image(client, dist: KafkaDistribution, progress=lambda msg: None) -> str:
    """The tag of the Kafka image for `dist`, built when this Docker has no image of that tag."""
    tag = image_tag(dist)
    if _has(client, tag):
        return tag
    jre = java_home(dist.java)
    base = base_tag(jre)
    if not _has(client, base):
        progress(f"importing a base image from {jre} (no registry needed)")
        with tempfile.TemporaryDirectory(prefix="kipcheck-rootfs-") as tmp:
            tar = Path(tmp) / "rootfs.tar"
            _write_rootfs(jre, tar)
            repo, version = base.split(":")
            with open(tar, "rb") as f:
                client.api.import_image_from_data(f, repository=repo, tag=version)
    progress(f"building {tag} ({len(dist.classpath)} Kafka jars)")
    with tempfile.TemporaryDirectory(prefix="kipcheck-image-") as tmp:
        ctx = Path(tmp)
        (ctx / "lib").mkdir()
        for jar in dist.classpath:
            os.link(jar, ctx / "lib" / jar.name) if _same_fs(jar, ctx) else _copy(jar, ctx / "lib" / jar.name)
        (ctx / "Dockerfile").write_text(DOCKERFILE.format(base=base, java_bin=jre / "bin", version=dist.version))
        try:
            client.images.build(path=str(ctx), tag=tag, rm=True, forcerm=True)
        except Exception as e:  # docker.errors.BuildError / APIError: one line
            raise HarnessError(f"building the Kafka image {tag} failed: {str(e).splitlines()[0][:300]}") from None
    return tag


def _write_rootfs(jre: Path, dest: Path) -> None:
    """The JRE, /bin/sh and their libraries as a tar, symlinks followed (`-h`: Debian links the
    JRE's conf/ and security files into /etc); then /tmp, /etc/passwd and /bin/sh."""
    files = [str(p).lstrip("/") for p in _base_files(jre)]
    argv = ["tar", "-C", "/", "-cf", str(dest), "--hard-dereference", "-h",
            "--exclude=jmods", "--exclude=include", "--exclude=man", "--exclude=demo", "--exclude=src.zip",
            str(jre).lstrip("/"), *files]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: a file changed while read (a log in /usr? never fatal here)
        raise HarnessError(f"making the base image's root filesystem failed: {proc.stderr.strip()[:300]}")
    extras = Path(dest.parent, "extras")
    (extras / "tmp").mkdir(parents=True)
    (extras / "tmp").chmod(0o1777)
    (extras / "etc").mkdir()
    (extras / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    shell = os.path.realpath(SHELL)
    if shell != SHELL:
        (extras / "bin").mkdir()
        (extras / "bin" / "sh").symlink_to(shell)
    subprocess.run(["tar", "-C", str(extras), "-rf", str(dest), *os.listdir(extras)], check=True)


def _has(client, tag: str) -> bool:
    import docker.errors
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _same_fs(a: Path, b: Path) -> bool:
    return os.stat(a).st_dev == os.stat(b).st_dev


def _copy(src: Path, dest: Path) -> None:
    import shutil
    shutil.copyfile(src, dest)
