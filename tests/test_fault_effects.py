"""A fault's effects: declared by its kind, written into its records, read by the checker.

The checker judges a fault by the `effects` its records carry (kipcheck.effects), never by its
kind's name; a history recorded before records carried effects is read by the kind's legacy ones."""
from __future__ import annotations

import json
import threading

import pytest

from kipcheck import effects
from kipcheck.checks.rules.log_bounds import Lives
from kipcheck.faults.base import FaultSpec
from kipcheck.faults.nemesis import Nemesis
from kipcheck.faults.registry import KINDS
from kipcheck.harness.backends.external import ExternalCluster
from kipcheck.rundir.writer import History
from tests.test_cluster_protocol import _Context


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_declares_what_it_does_in_the_known_words(name):
    declared = KINDS[name].effects
    assert declared and declared <= effects.ALL, declared


@pytest.mark.parametrize("name", sorted(set(KINDS) & set(effects.LEGACY)))
def test_an_old_history_of_every_kind_is_read_and_a_declaration_only_adds(name):
    """A history recorded before effects reads the kind's legacy effects; what a kind declares
    today keeps every one of them (re-checking an old history never judges it by less)."""
    assert effects.LEGACY[name] <= KINDS[name].effects


def test_the_legacy_table_is_closed_and_newer_kinds_declare_what_they_do():
    """Only the kinds of 2026-11-27 have old histories (reassign-while-down came later: its records
    always carry effects); each of them is in the table, and each newer kind declares known words."""
    before_effects = {"kill", "restart", "pause", "wipe", "truncate", "bitflip", "reassign", "broker-decommission"}
    assert before_effects <= set(effects.LEGACY) and set(effects.LEGACY) - {"heal-all"} <= set(KINDS)
    newer = set(KINDS) - set(effects.LEGACY)
    assert newer == {"reassign-while-down"}
    assert all(KINDS[n].effects and KINDS[n].effects <= effects.ALL for n in newer)


def test_decommission_and_the_disk_faults_say_they_stop_their_node():
    """The drift the kind lists had: broker-decommission stops its broker until the heal, as do
    bitflip and wipe-metadata (killed, damaged, started again), none of them said so."""
    for name in ("broker-decommission", "bitflip", "wipe-metadata"):
        assert effects.STOPS_NODE in KINDS[name].effects and effects.LOSES_STATE in KINDS[name].effects
    for name in ("bitflip", "wipe-metadata"):
        assert effects.STOPS_NODE not in effects.LEGACY[name]


def _fault(index, time, kind, phase, type_, targets, fx=None):
    value = {"fault": kind, "phase": phase, "targets": targets}
    if fx is not None:
        value["effects"] = sorted(fx)
    return {"index": index, "time": time, "process": "nemesis", "type": type_, "f": "fault", "value": value}


def test_the_checker_reads_effects_not_names():
    """A kind it never heard of that loses state starts a broker's new life; a `kill` whose record
    says it does nothing of the kind does not; a legacy `kill` record without effects does."""
    unknown = [_fault(1, 100, "crash-loop", "start", "invoke", [1], {effects.LOSES_STATE})]
    assert Lives(unknown).resets == [100]
    assert Lives([_fault(1, 100, "kill", "start", "invoke", [1], set())]).resets == []
    assert Lives([_fault(1, 100, "kill", "start", "invoke", [1])]).resets == [100]
    assert not effects.has({"f": "poll", "value": {"effects": [effects.LOSES_STATE]}}, effects.LOSES_STATE)


def test_the_nemesis_writes_the_effects_into_every_record_of_the_fault(tmp_path):
    """Even a fault whose inject failed: its start and its info both say what it was meant to do."""
    class Gone(ExternalCluster):
        def node(self, node_id):
            from kipcheck.harness.errors import HarnessError
            raise HarnessError(f"node {node_id}: its process is gone")

    with History(tmp_path / "history.jsonl") as history:
        Nemesis(_Context(Gone("127.0.0.1:1")), [], history, threading.Event()).apply(
            FaultSpec("restart", 0, 1, {"target": 1}))
    records = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    faults = [r for r in records if r["f"] == "fault"]
    assert [r["type"] for r in faults] == ["invoke", "info"]
    assert all(effects.of(r["value"]) == KINDS["restart"].effects for r in faults)
    assert all(r["value"]["effects"] == sorted(KINDS["restart"].effects) for r in faults)


def test_the_preferred_replica_rule_finds_a_node_down_by_its_effect():
    """`_Judge.down_throughout` (a replica's node down for a whole span) follows STOPS_NODE: a
    renamed kind that stops its node counts, a link fault on the same node does not."""
    from kipcheck.checks.rules.replica_rules import _Judge

    def judge(kind, fx):
        j = _Judge()
        for r in (_fault(1, 100, kind, "start", "invoke", [2], fx), _fault(2, 200, kind, "start", "ok", [2], fx),
                  _fault(3, 900, kind, "stop", "invoke", [2], fx), _fault(4, 950, kind, "stop", "ok", [2], fx)):
            j.add(r)
        j.fault_spans = j._fault_spans()
        return j

    assert judge("crash-loop", {effects.STOPS_NODE}).down_throughout(2, 300, 800) == 100
    assert judge("crash-loop", {effects.STOPS_NODE}).down_throughout(2, 150, 800) is None  # not yet down at 150
    assert judge("crash-loop", {effects.STOPS_NODE}).down_throughout(2, 300, 901) is None  # its stop was asked at 900
    assert judge("partition", {effects.CUTS_LINKS}).down_throughout(2, 300, 800) is None
    assert judge("crash-loop", {effects.STOPS_NODE, effects.OWN_NODE}).other_fault_running(300, 800, 2) is False
    assert judge("crash-loop", {effects.STOPS_NODE}).other_fault_running(300, 800, 2) is True
