"""The Porcupine-style model: `init`, `step`, `equal`, `describe` over immutable state.

`step(state, operation)` returns the allowed outcomes (JSON-able dicts) and the next
state. Where the KIPs leave a choice (a new session id, an eviction victim), the next
state follows `operation["observed"]` when it names one of the allowed outcomes, else
the first allowed outcome, so replay is deterministic.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from . import kip227, kip392, kip1023, kip1166, profiles
from .profiles import Profile
from .state import PartitionState, Replica, SessionCache, TieredLog

Key = tuple[str, int]


@dataclass(frozen=True)
class ModelState:
    partitions: tuple[tuple[Key, PartitionState], ...] = ()
    epochs: tuple[tuple[Key, tuple[tuple[int, int], ...]], ...] = ()
    tiered: tuple[tuple[Key, TieredLog], ...] = ()
    caches: tuple[tuple[int, SessionCache], ...] = ()

    def partition(self, key: Key) -> PartitionState:
        return dict(self.partitions)[key]

    def cache(self, broker: int) -> SessionCache:
        return dict(self.caches).get(broker, SessionCache())

    def set_partition(self, key: Key, value: PartitionState) -> "ModelState":
        return replace(self, partitions=_put(self.partitions, key, value))

    def set_cache(self, broker: int, value: SessionCache) -> "ModelState":
        return replace(self, caches=_put(self.caches, broker, value))


def _put(pairs: tuple, key, value) -> tuple:
    return tuple(sorted({**dict(pairs), key: value}.items(), key=lambda kv: repr(kv[0])))


def _key(op: dict) -> Key:
    return (op["topic"], int(op["partition"]))


def _jsonable(value):
    if isinstance(value, (frozenset, set, tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return value


def _sorted(outcomes) -> list[dict]:
    return sorted((_jsonable(o) for o in outcomes), key=repr)


@dataclass(frozen=True)
class Model:
    profile: Profile = field(default_factory=lambda: profiles.KIP)

    # -- init -----------------------------------------------------------------
    def init(self, spec: dict) -> ModelState:
        """Build the initial state from a scenario's "state" object (docs/model.md)."""
        state = ModelState()
        for p in spec.get("partitions", []):
            key = _key(p)
            replicas = tuple(
                Replica(
                    int(r["broker"]), r.get("rack"), r.get("log_start", 0), r.get("leo", 0), r.get("hwm", 0),
                    r.get("lso"), r.get("local_log_start"),
                )
                for r in p["replicas"]
            )
            isr = frozenset(int(b) for b in p.get("isr", [r.broker for r in replicas]))
            ps = PartitionState(int(p["leader"]), int(p.get("leader_epoch", 0)), isr, replicas, bool(p.get("hwm_pending", False)))
            state = state.set_partition(key, ps)
            epochs = tuple(tuple(e) for e in p.get("epochs", [[ps.leader_epoch, 0]]))
            state = replace(state, epochs=_put(state.epochs, key, epochs))
            if "tiered" in p:
                state = replace(state, tiered=_put(state.tiered, key, TieredLog(**p["tiered"])))
        for broker, conf in spec.get("brokers", {}).items():
            state = state.set_cache(int(broker), SessionCache(conf.get("session_slots", 1000), conf.get("eviction_ms", 120_000), shards=conf.get("session_shards")))
        return state

    # -- step -----------------------------------------------------------------
    def step(self, state: ModelState, op: dict) -> tuple[list[dict], ModelState]:
        handler = getattr(self, "_op_" + op["op"], None)
        if handler is None:
            raise ValueError(f"unknown operation {op['op']!r}")
        return handler(state, op)

    def equal(self, a: ModelState, b: ModelState) -> bool:
        return a == b

    def describe(self, state: ModelState) -> dict:
        return _jsonable(
            {
                "profile": self.profile.name,
                "partitions": {f"{t}/{p}": v for (t, p), v in state.partitions},
                "tiered": {f"{t}/{p}": v for (t, p), v in state.tiered},
                "sessions": {b: c.sessions for b, c in state.caches},
            }
        )

    # -- KIP-392 --------------------------------------------------------------
    def _op_fetch(self, state, op):
        ps = state.partition(_key(op))
        broker, offset, replica_id = int(op["broker"]), int(op["fetch_offset"]), int(op.get("replica_id", -1))
        if replica_id >= 0:
            base = kip392.follower_fetch_outcomes(ps.leader_replica, offset)
        else:
            base = kip392.consumer_fetch_outcomes(ps.replica(broker), offset, self.profile)
        preferred = kip392.preferred_read_replica_outcomes(
            ps, broker, replica_id, op.get("rack"), offset, op.get("selector", "RackAwareReplicaSelector")
        )
        out = [
            {"error": o.error, "records_below": o.records_below, "high_watermark": o.hwm,
             "log_start_offset": o.log_start, "preferred_read_replica": pr}
            for o in base for pr in preferred
        ]
        return _sorted(out), state

    def _op_select_replica(self, state, op):
        ps = state.partition(_key(op))
        chosen = kip392.SELECTORS[op.get("selector", "RackAwareReplicaSelector")](ps, op.get("rack"), int(op["fetch_offset"]))
        return _sorted({"replica": b} for b in chosen), state

    def _op_offsets_for_leader_epoch(self, state, op):
        key = _key(op)
        out = kip392.offsets_for_leader_epoch(
            state.partition(key), int(op["broker"]), dict(state.epochs)[key], int(op["leader_epoch"]),
            int(op.get("replica_id", -1)) < 0, self.profile,
        )
        return _sorted(out), state

    def _op_reset(self, state, op):
        ps = state.partition(_key(op))
        try:
            return [{"offset": kip392.reset_offset(op["policy"], ps.replica(int(op["serving"])), ps.leader_replica)}], state
        except LookupError as e:
            return [{"error": str(e)}], state

    def _op_out_of_range(self, state, op):
        action = kip392.out_of_range_action(int(op["fetch_offset"]), int(op["log_start_offset"]), bool(op.get("epoch_known", True)))
        return [{"action": action}], state

    def _op_update_replica(self, state, op):
        key = _key(op)
        ps = state.partition(key)
        fields = {k: op[k] for k in ("log_start", "leo", "hwm", "lso", "local_log_start", "rack") if k in op}
        ps = ps.with_replica(ps.replica(int(op["broker"])).with_(**fields))
        changes = {k: op[k] for k in ("leader", "leader_epoch", "hwm_pending") if k in op}
        if "isr" in op:
            changes["isr"] = frozenset(op["isr"])
        return [{}], state.set_partition(key, replace(ps, **changes))

    def _op_replicate(self, state, op):
        key = _key(op)
        ps = state.partition(key)
        follower = kip392.follower_learns_hwm(ps.replica(int(op["broker"])), ps.leader_replica.hwm, self.profile)
        return [{"high_watermark": follower.hwm}], state.set_partition(key, ps.with_replica(follower))

    # -- KIP-227 --------------------------------------------------------------
    def _op_session(self, state, op):
        broker = int(op["broker"])
        req = kip227.FetchRequest(
            int(op["session_id"]), int(op["session_epoch"]), int(op.get("replica_id", -1)) >= 0,
            tuple((t, int(p), int(o)) for t, p, o in op.get("partitions", [])),
            tuple((t, int(p)) for t, p in op.get("forgotten", [])), int(op.get("now_ms", 0)),
        )
        results = kip227.handle_request(state.cache(broker), req, self.profile, op.get("new_session_id"))
        outcomes = [_jsonable(resp) for resp, _ in results]
        observed = op.get("observed")
        chosen = next((c for r, c in results if observed is not None and _jsonable(r) == observed), results[0][1])
        return _sorted(outcomes), state.set_cache(broker, chosen)

    # -- KIP-1023 -------------------------------------------------------------
    def _op_list_offsets(self, state, op):
        log = dict(state.tiered)[_key(op)]
        offset = kip1023.list_offsets(log, int(op["timestamp"]), op.get("isolation_level", "read_uncommitted"), int(op.get("replica_id", -1)), self.profile)
        return [{"offset": offset}], state

    def _op_tiered_inequalities(self, state, op):
        return [{"violations": list(kip1023.inequality_violations(dict(state.tiered)[_key(op)]))}], state

    def _op_bootstrap(self, state, op):
        log = dict(state.tiered)[_key(op)]
        b = kip1023.follower_bootstrap(
            op.get("error", "OFFSET_MOVED_TO_TIERED_STORAGE"), bool(op.get("enabled", True)), bool(op.get("follower_empty", True)),
            log.log_start, log.local_log_start, kip1023.earliest_pending_upload(log, self.profile), self.profile,
        )
        return [_jsonable(b)], state

    # -- KIP-1166 -------------------------------------------------------------
    def _op_kraft_fetch(self, state, op):
        remote = int(op["remote_hwm"])
        park = kip1166.should_park(bool(op["response_empty"]), remote, int(op["leader_hwm"]))
        return [{"park": park, "remote_hwm": kip1166.remote_hwm_meaning(remote)}], state

    def _op_propagation(self, state, op):
        ok = kip1166.propagation_within_bound(op["seen_by"], int(op["bound_ms"]) * 1_000_000)
        return [{"within_bound": ok}], state

    def _op_propagation_run(self, state, op):
        window = kip1166.parking_window_ms(int(op.get("fetch_max_wait_ms", kip1166.KIP_MAX_PARK_MS)),
                                           int(op.get("max_idle_interval_ms", 0)))
        outcome = kip1166.propagation_statistic([int(x * 1_000_000) for x in op["lags_ms"]], window)
        return [{"outcome": outcome, "accepted": kip1166.propagation_accepted(outcome, self.profile)}], state
