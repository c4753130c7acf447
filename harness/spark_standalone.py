"""A standalone Spark master and worker on loopback, from PySpark's own `spark-class`.

For tests and benchmarks of the Spark engine against a real Spark cluster (not local
mode), and for users who want one on their machine. Both JVMs die with the process that
started them (PR_SET_PDEATHSIG) and are stopped on leaving the context, whatever happens,
so no Spark daemon outlives a test, a benchmark or a killed harness.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

from kipcheck.harness.backends.ports import free_port
from kipcheck.harness.errors import HarnessError

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()


def spark_class() -> Path:
    import pyspark
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise HarnessError(f"PySpark's spark-class not found at {path}")
    return path


def _wait_for(log: Path, text: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and text in log.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    tail = log.read_text(errors="replace")[-400:] if log.exists() else ""
    raise HarnessError(f"Spark {log.stem} did not start ({text!r} not seen): {' '.join(tail.split())[-200:]}")


@contextlib.contextmanager
def standalone_spark(workdir: Path, cores: int = 2, memory: str = "2g", timeout: float = 120.0):
    """Start a master and one worker; yield the master URL (spark://127.0.0.1:PORT)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {**os.environ, "SPARK_LOG_DIR": str(workdir), "SPARK_WORKER_DIR": str(workdir / "work"),
           "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"}
    cls = str(spark_class())
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> tuple[subprocess.Popen, Path]:
        log = workdir / f"{name}.log"
        proc = subprocess.Popen([cls, *args], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                                preexec_fn=_die_with_parent)
        procs.append(proc)
        return proc, log

    try:
        master, mlog = start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", str(port), "--webui-port", str(free_port()))
        _wait_for(mlog, "I have been elected leader", master, timeout)
        url = f"spark://127.0.0.1:{port}"
        worker, wlog = start("worker", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                             "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                             "--work-dir", str(workdir / "work"))
        _wait_for(wlog, "Successfully registered with master", worker, timeout)
        yield url
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
