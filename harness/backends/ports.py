"""A free TCP port on loopback, for listeners the harness starts (Kafka nodes, Toxiproxy, Spark)."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A port the kernel has just handed out and released: free now, almost surely still free when used."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
