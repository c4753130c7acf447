"""How a client library's error is written into a history record, shared by every worker
(harness.clients.workload, harness.clients.commits) without one importing the other."""
from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException


def error_text(error) -> str:
    """"<Kafka error name or exception class>: <message>", the form fatal errors are recorded in."""
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return f"{type(error).__name__}: {error}"
