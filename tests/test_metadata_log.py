"""The KRaft metadata log reader and the KIP-966 election rule it feeds.

The reader is held to Kafka's own decoding (MetadataRecordSerde, through the single-file
Java program tests/support/DumpMetadataLog.java on the pinned 4.3.1 classpath) of a real
segment: the metadata log of a 3-node 4.3.1 run with kills and partitions (tests/support/). The rule
is checked on hand-made partition histories: the flagged election and its near misses.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kipcheck.checks.coverage import opportunities
from kipcheck.checks.rules.election_rules import ElectionRule
from kipcheck.harness import metadata_log
from kipcheck.harness.backends.kafka_dist import resolve
from kipcheck.reference_model import kip966
from kipcheck.checks.engine_local import check_records
from tests.support.histories import valid_history

ROOT = Path(__file__).resolve().parent.parent
SEGMENT = ROOT / "tests" / "support" / "kafka-4.3.1-cluster-metadata.log"


def _kafka_reading() -> list[tuple]:
    dist = resolve("4.3.1")
    proc = subprocess.run(dist.java_command(str(ROOT / "tests" / "support" / "DumpMetadataLog.java"), str(SEGMENT)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = []
    for line in proc.stdout.splitlines():
        offset, kind, *rest = line.split(" ", 2)
        if kind == "feature":
            name, level = rest[0].split()
            out.append((int(offset), kind, name, int(level)))
            continue
        partition, leader, tail = rest[0].split(" ", 2)
        # "[3, 1, 2] null 0": the ISR, the ELR (null: absent) and the recovery state
        isr, tail = (None, tail[5:]) if tail.startswith("null") else (tail[:tail.index("]") + 1], tail[tail.index("]") + 2:])
        elr, recovery = (None, tail[5:]) if tail.startswith("null") else (tail[:tail.index("]") + 1], tail[tail.index("]") + 2:])
        out.append((int(offset), kind, int(partition), int(leader), json.loads(isr) if isr else None,
                    json.loads(elr) if elr else None, int(recovery)))
    return out


def _ours() -> list[tuple]:
    decoded = metadata_log.decode([SEGMENT.read_bytes()])
    out = [(f["offset"], "feature", f["feature"], f["level"]) for f in decoded.features]
    for c in decoded.changes:
        if c["kind"] == "create":
            out.append((c["offset"], "create", c["partition"], c["leader"], c["isr"], c["elr"] or None, c["recovery"]))
        else:  # what a change leaves out is Kafka's default: leader -2, ISR and ELR null, recovery -1
            out.append((c["offset"], "change", c["partition"], c.get("leader", -2), c.get("isr"), c.get("elr"),
                        c.get("recovery", -1)))
    return sorted(out)


def test_the_reader_decodes_every_partition_record_as_kafka_does():
    kafka = _kafka_reading()
    assert len(kafka) > 300 and any(k[1] == "change" for k in kafka)
    assert _ours() == sorted(kafka)


def test_the_reader_names_topics_and_sees_elr_switched_on():
    decoded = metadata_log.decode([SEGMENT.read_bytes()])
    assert {"metadata.version", "eligible.leader.replicas.version"} <= {f["feature"] for f in decoded.features}
    assert {"kipcheck", "__consumer_offsets"} <= {c["topic"] for c in decoded.changes}
    assert decoded.skipped_versions == {}


def _records(*values) -> list[dict]:
    return [{"index": i, "time": i, "process": "metadata-log", "type": "ok", "f": "partition_change",
             "value": {"topic": "t", "partition": 0, "offset": 100 + i, **v}} for i, v in enumerate(values)]


CREATE = {"kind": "create", "leader": 1, "isr": [1, 2, 3], "elr": [], "recovery": 0}


def _flagged(*values) -> list:
    return [a for a in ElectionRule().check(_records(*values), "kip")]


def test_a_leader_from_the_isr_or_the_elr_holds():
    assert _flagged(CREATE, {"kind": "change", "isr": [2, 3], "leader": 2}) == []  # fenced leader, one from the ISR
    # min.insync pressure: the ISR shrinks to 2, 3 goes to the ELR; 2 is lost too, then 3 leads from the ELR
    assert _flagged(CREATE, {"kind": "change", "isr": [2], "elr": [3], "leader": 2},
                    {"kind": "change", "isr": [], "elr": [3, 2], "leader": -1},
                    {"kind": "change", "isr": [3], "elr": [2], "leader": 3}) == []


def test_a_leader_outside_isr_and_elr_is_ineligible_unless_the_election_says_unclean():
    shrunk = {"kind": "change", "isr": [1], "leader": 1}
    [a] = _flagged(CREATE, shrunk, {"kind": "change", "leader": 3})
    assert a.name == "ineligible-leader" and a.details["leader"] == 3 and a.details["isr_before"] == [1]
    assert a.indices == (1, 2) and a.details["rule"] == "kip966.may_lead"
    unclean = {"kind": "change", "leader": 3, "isr": [3], "recovery": 1}  # as Kafka marks one
    # an unclean election in a run that never asked for one (kipcheck's brokers do not allow them)
    assert len(_flagged(CREATE, shrunk, unclean)) == 1
    # ... allowed once an elect-unclean fault asked for it (anywhere in the run)
    asked = {"index": 50, "time": 0, "process": "nemesis", "type": "invoke", "f": "fault",
             "value": {"fault": "elect-unclean", "phase": "start"}}
    assert ElectionRule().check(_records(CREATE, shrunk, unclean) + [asked], "kip") == []
    # ... and as ELR's last known leader recovery: ISR and ELR empty, the one last known member back
    gone = {"kind": "change", "isr": [], "elr": [], "last_known_elr": [3], "leader": -1}
    assert _flagged(CREATE, gone, unclean) == []
    assert len(_flagged(CREATE, {**gone, "last_known_elr": [2, 3]}, unclean)) == 1  # not one member
    # marked RECOVERING but the ISR is not the leader alone: not what an unclean election writes
    assert len(ElectionRule().check(_records(CREATE, shrunk, {**unclean, "isr": [3, 1]}) + [asked], "kip")) == 1
    # a creation whose leader is not in its own ISR
    assert len(_flagged({**CREATE, "leader": 4})) == 1


def test_a_leader_the_same_change_added_to_the_isr_holds():
    """A reassignment completing in the leader's AlterPartition: 4 leaves, 3 joins, 3 leads (one record,
    as a decommissioned broker's replicas moved back showed); a leader the ISR never took in does not."""
    moved = {"kind": "change", "isr": [4, 1, 2], "replicas": [4, 1, 2], "leader": 4}  # the move off 3 completing
    back = {"kind": "change", "isr": [1, 2, 3], "replicas": [3, 1, 2], "leader": 3}
    led_by_3 = {**CREATE, "leader": 3, "isr": [3, 1, 2]}
    assert _flagged(led_by_3, moved, back) == []
    assert len(_flagged(led_by_3, moved, {**back, "isr": [1, 2]})) == 1  # 3 never joined the ISR
    # the same ISR and leader without a reassignment completing: an ISR-blind election that also wrote the ISR
    assert len(_flagged(led_by_3, moved, {k: v for k, v in back.items() if k != "replicas"})) == 1
    assert len(_flagged(led_by_3, moved, {**back, "replicas": [3, 1, 4]})) == 1  # the old leader stays a replica


def test_the_log_order_decides_not_the_history_order():
    """Records are judged in metadata-log offset order: 3 joins the ISR before it leads."""
    recs = _records(CREATE, {"kind": "change", "isr": [1, 3]}, {"kind": "change", "isr": [1]},
                    {"kind": "change", "leader": 3})
    recs[1]["value"]["offset"], recs[2]["value"]["offset"] = 102, 101  # in the log the shrink came first
    assert ElectionRule().check(recs, "kip") == []
    recs[1]["value"]["offset"], recs[2]["value"]["offset"] = 101, 102  # in the log the growth came first
    assert len(ElectionRule().check(recs, "kip")) == 1


def test_a_partition_whose_creation_the_log_lost_is_judged_from_its_first_record_on():
    # the first record only sets the state: what came before it is unknown, so it is not judged
    assert _flagged({"kind": "change", "isr": [1], "leader": 5}) == []
    # the next is judged against it
    assert len(_flagged({"kind": "change", "isr": [1], "leader": 1}, {"kind": "change", "leader": 2})) == 1


def test_the_model_rule_itself():
    before = kip966.created(1, [1], elr=[3])
    assert kip966.may_lead(before, kip966.changed(before, leader=3))
    assert not kip966.may_lead(before, kip966.changed(before, leader=2))
    assert kip966.may_lead(before, kip966.changed(before, leader=kip966.NO_LEADER))
    marked = kip966.changed(before, leader=2, isr=[2], recovery=kip966.RECOVERING)
    assert not kip966.may_lead(before, marked) and kip966.may_lead(before, marked, unclean_permitted=True)


def test_coverage_counts_creations_and_leader_changes():
    recs = _records(CREATE, {"kind": "change", "isr": [1, 2]}, {"kind": "change", "leader": 2},
                    {"kind": "change", "leader": -1})
    assert [opportunities(r) for r in recs] == [("kip966.may_lead",), (), ("kip966.may_lead",), ()]
    verdict = check_records(valid_history() + [{**r, "index": 100 + r["index"]} for r in recs])
    assert verdict["coverage"]["kip966.may_lead"]["observations"] == 2
    assert verdict["conformance"]["KIP-966"]["kip966.may_lead"]["status"] == "holds"
