"""Hand-made histories for the model-backed rules: ops (process, f, invoke value, completion
value) made into records, the fetches, sends and metadata answers the tests build them from,
and running one rule over a history's groups."""
import json
from pathlib import Path

from kipcheck.rundir.history import write_jsonl
from kipcheck.checks.verdict import run_rule


def history(*ops):
    """ops: (process, f, invoke value, completion value); invoke and ok records."""
    out, t = [], 0
    for proc, f, inv, done in ops:
        out.append({"index": len(out), "time": t, "process": proc, "type": "invoke", "f": f, "value": inv})
        t += 10
        if done is not None:
            out.append({"index": len(out), "time": t, "process": proc, "type": "ok", "f": f, "value": {**inv, **done}})
            t += 10
    return out


def run(rule, records, profile="kip"):
    groups = {}
    for r in records:
        for k in rule.group_keys(r):
            groups.setdefault(k, []).append(r)
    return [a for k, g in groups.items() for a in run_rule(rule, k, g, profile)]


def names(anoms, known=False):
    return sorted(a.name for a in anoms if a.known == known)


def fetch(offset, error="NONE", hwm=10, start=0, records=(), broker=2, **extra):
    inv = {"broker": broker, "replica_id": -1, "rack": "b", "session_id": 0, "session_epoch": -1, "version": 12,
           "topic": "t", "partition": 0, "fetch_offset": offset, **extra}
    return (1, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "error": error, "high_watermark": hwm,
                              "log_start_offset": start, "preferred_read_replica": extra.get("pref", -1),
                              "records": [[o, f"v{o}"] for o in records]})


def sends(n, partition=0):
    out = []
    for k in range(n):
        v = {"topic": "t", "partition": partition, "key": f"k{k}", "value": f"v{k}", "acks": "all"}
        out += [(0, "send", v, {"offset": k})]
    return out


def run_dir(tmp_path: Path, records, **config) -> Path:
    write_jsonl(records, tmp_path / "history.jsonl")
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def full_fetch_leaving_out(*left_out, session=(0, -1)):
    """A consumer's full fetch of partitions 0-2 whose answer left out `left_out` (the
    prober records such an entry with `missing` and no figures, harness.clients.prober)."""
    parts = [{"topic": "t", "partition": p, "fetch_offset": 0} for p in range(3)]
    inv = {"broker": 1, "replica_id": -1, "rack": None, "session_id": session[0], "session_epoch": session[1],
           "version": 17, "partitions": parts}
    answered = [{**e, "error": "NONE", "missing": True, "high_watermark": -1, "last_stable_offset": -1,
                 "log_start_offset": -1, "preferred_read_replica": -1, "records": []} if e["partition"] in left_out
                else {**e, "error": "NONE", "high_watermark": 0, "last_stable_offset": 0, "log_start_offset": 0,
                      "preferred_read_replica": -1, "records": []} for e in parts]
    return (1, "fetch", inv, {"top_error": "NONE", "response_session_id": 0, "partitions": answered})


def rec(i, type_, f, value, process=9):
    return {"index": i, "time": i * 1000, "process": process, "type": type_, "f": f, "value": value}


def consumer_fetch(i, offset, records, hwm, error="NONE", rack=None, preferred=-1, session=(0, -1)):
    v = {"broker": 2, "replica_id": -1, "rack": rack, "session_id": session[0], "session_epoch": session[1],
         "version": 18, "topic": "t", "partition": 0, "fetch_offset": offset}
    done = {**v, "top_error": "NONE", "response_session_id": 0, "error": error, "high_watermark": hwm,
            "last_stable_offset": hwm, "log_start_offset": 0, "preferred_read_replica": preferred,
            "records": [[o, f"v{o}"] for o in records]}
    return [rec(i, "invoke", "fetch", v), rec(i + 1, "ok", "fetch", done)]


def valid_history():
    """Sends and a poll that reads them back, plus one sessionless consumer fetch."""
    h = []
    for k in range(3):
        v = {"topic": "t", "partition": 0, "key": f"0-{k}", "value": f"v{k}"}
        h += [rec(len(h), "invoke", "send", v, 0), rec(len(h) + 1, "ok", "send", {**v, "offset": k}, 0)]
    h += [rec(len(h), "invoke", "poll", {"topic": "t"}, 1),
          rec(len(h) + 1, "ok", "poll", {"topic": "t", "records": [["t", 0, k, f"v{k}"] for k in range(3)]}, 1)]
    return h + consumer_fetch(len(h), 1, [1, 2], hwm=3)


def meta(epoch, leader, broker=2):
    return (9, "metadata", {"broker": broker, "topic": "t", "partition": 0},
            {"leader": leader, "leader_epoch": epoch, "isr": [1, 2, 3], "replicas": [1, 2, 3]})


def follower_history(*hwms_in_new_epoch, old_epoch=True):
    old = [meta(4, 3), fetch(0, hwm=8, current_leader_epoch=4)] if old_epoch else []
    return history(*old, meta(5, 1), *(fetch(0, hwm=h, current_leader_epoch=5) for h in hwms_in_new_epoch), meta(5, 1))


def leader_answers(*hwms, epoch=5, kill=False):
    """The new leader 1's answers (`current_leader_epoch` accepted) of `epoch`, then a kill of it."""
    return [fetch(0, hwm=h, current_leader_epoch=epoch, broker=1) for h in hwms] + (
        [("nemesis", "fault", {"fault": "kill", "targets": [1], "phase": "start"}, None)] if kill else [])


def follower_with_leader(before=(), between=(), drop=9):
    """Follower 2 (epoch 4 under leader 3, HWM 8) in epoch 5 under leader 1: HWM 10 carried in,
    then `drop`, then 11; leader 1's answers `before` 2's last 10 and `between` it and the drop."""
    return history(meta(4, 3), fetch(0, hwm=8, current_leader_epoch=4), meta(5, 1), *before,
                   fetch(0, hwm=10, current_leader_epoch=5), *between,
                   *(fetch(0, hwm=h, current_leader_epoch=5) for h in (drop, drop, 11)), meta(5, 1))
