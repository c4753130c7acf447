"""The bound of the liveness rule (checks/rules/liveness_rules.py): asked for, recorded in
the run's config.json, or derived from the cluster's own timeouts. Also the bound of KIP-848's
group liveness rule (`group_liveness_rule`), from the group timeouts the run recorded.

After a heal, recovery can wait out, one after another, each of the mechanisms below; the
default bound is their sum, so a cluster that takes longer has a mechanism stuck, not
merely slow. The parts (seconds) are recorded beside the bound in config.json and in the
verdict, so a reader sees what the bound is made of:

* `broker.session.timeout.ms`: a broker that stopped heartbeating is fenced by the
  controller after this, and its partitions get new leaders (KRaftConfigs
  BROKER_SESSION_TIMEOUT_MS_DEFAULT = 9000; fencing in BrokerHeartbeatManager);
* `replica.lag.time.max.ms`: a leader drops a follower that has not caught up for this
  long (Partition.maybeShrinkIsr; ReplicationConfigs REPLICA_LAG_TIME_MAX_MS_DEFAULT = 30000,
  the harness sets 8000);
* `controller.quorum.fetch.timeout.ms` + `controller.quorum.election.timeout.ms`: a
  controller quorum without a leader elects one (QuorumConfig DEFAULT_QUORUM_FETCH_TIMEOUT_MS
  = 2000, DEFAULT_QUORUM_ELECTION_TIMEOUT_MS = 1000);
* the clients' `request.timeout.ms`: a request stuck on a dead connection is retried
  (elsewhere) only after it (the workload's producers use 5000);
* `node start`: the run measures its own cluster start (JVMs start, brokers register, a
  probe topic gets a full ISR), else `NODE_START_ALLOWANCE` seconds. A restarted node, once
  its port listens, still registers, replays the metadata it missed and is unfenced before
  its fetchers start: this part covers that.

That is the run's bound. Each heal's bound adds what that heal's node had to do, read from
the history by the rule (checks/rules/liveness_rules.py `heal_bound`): its `restart` (the
heal's own duration: a node killed with -9 recovers its logs before it listens, which a
fresh start does not) and its `catch-up` (the sends acknowledged while the fault lasted, at
the peak rate the history showed). A bound given with `--recovery-bound` is the whole bound
of every heal.
"""
from __future__ import annotations

from pathlib import Path

from kipcheck.rundir.history import HistoryError
from kipcheck.rundir import config as run_config

#: Kafka's defaults (ms) for the broker and controller parts of the bound
KAFKA_DEFAULTS_MS = {
    "broker.session.timeout.ms": 9000,
    "replica.lag.time.max.ms": 30000,
    "controller.quorum.fetch.timeout.ms": 2000,
    "controller.quorum.election.timeout.ms": 1000,
}
#: the clients' request.timeout.ms when the run does not say (Kafka's and librdkafka's default)
CLIENT_REQUEST_TIMEOUT_MS = 30000
#: seconds allowed for a node restart when the run did not measure its own node start
NODE_START_ALLOWANCE = 30.0
#: more crashes than this in a row is a client-crash-loop
DEFAULT_CRASH_LOOP = 5


def derive_bound(broker_config: dict | None = None, client_request_timeout_ms: float | None = None,
                 node_start_s: float | None = None) -> dict:
    """{"seconds", "parts", "source"}: the sum of the parts above, each from `broker_config`
    (a broker's server.properties as a dict) when it sets it, else Kafka's default."""
    config = broker_config or {}
    parts = {}
    for name, default in KAFKA_DEFAULTS_MS.items():
        try:
            parts[name] = float(config.get(name, default)) / 1000
        except (TypeError, ValueError):
            parts[name] = default / 1000
    parts["client request.timeout.ms"] = float(client_request_timeout_ms or CLIENT_REQUEST_TIMEOUT_MS) / 1000
    measured = node_start_s is not None and node_start_s > 0
    parts["node start"] = round(float(node_start_s), 1) if measured else NODE_START_ALLOWANCE
    source = "derived from the cluster's timeouts" + ("" if measured else " (node start: allowance)")
    return {"seconds": round(sum(parts.values()), 1), "parts": parts, "source": source}


def recorded_bound(path: str | Path) -> dict | None:
    """The `recovery_bound` the run recorded in config.json beside the history, if any."""
    bound = run_config.load(path).get("recovery_bound")
    if isinstance(bound, dict) and isinstance(bound.get("seconds"), (int, float)) and bound["seconds"] > 0:
        return bound
    return None


def choose_bound(path: str | Path | None, asked: float | None = None) -> dict:
    """The bound to judge `path` with: `asked` (seconds) if given, else the run's recorded
    one, else one derived from Kafka's defaults. The derived parts are kept for reference."""
    recorded = recorded_bound(path) if path is not None else None
    base = recorded or {**derive_bound(), "source": "Kafka's default timeouts (the run recorded none)"}
    if asked is None:
        return base
    if not asked > 0:
        raise HistoryError(f"--recovery-bound must be > 0 seconds, got {asked}")
    return {"seconds": float(asked), "parts": base["parts"], "per_heal": False,
            "source": f"given (the default would be {base['seconds']:g} s, {base['source']})"}


def liveness_rule(bound: dict | None = None, crash_loop: int | None = None):
    from kipcheck.checks.rules.liveness_rules import LivenessRule
    bound = bound or choose_bound(None)
    return LivenessRule(bound["seconds"], bound.get("parts"), bound.get("source", ""),
                        DEFAULT_CRASH_LOOP if crash_loop is None else crash_loop, bound.get("per_heal", True))


def group_liveness_rule(path: str | Path | None = None):
    """The slow-rebalance rule (checks/rules/group_liveness_rules.py) bound by the brokers' own
    group.consumer.session.timeout.ms and group.consumer.heartbeat.interval.ms, as the run recorded
    them in config.json (`consumer_groups`); Kafka's defaults for one it lacks (an older history)."""
    from kipcheck.checks.rules.group_liveness_rules import GroupLivenessRule
    from kipcheck.reference_model import kip848
    recorded = run_config.load(path).get("consumer_groups") if path is not None else None
    recorded = recorded if isinstance(recorded, dict) else {}
    settings, defaulted = {}, []
    for key, default in (("session_timeout_ms", kip848.SESSION_TIMEOUT_MS),
                         ("heartbeat_interval_ms", kip848.HEARTBEAT_INTERVAL_MS)):
        value = recorded.get(key)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
        settings[key] = value if ok else default
        if not ok:
            defaulted.append(key)
    source = ("the brokers' group.consumer timeouts" if not defaulted else "Kafka's default timeouts" if len(defaulted) == 2
              else f"the brokers' group.consumer timeouts ({defaulted[0]}: Kafka's default)")
    return GroupLivenessRule(kip848.reown_bound_ns(**settings), source)
