"""KIP-932 share sessions: the model's rules (reference_model.kip932) and the checker's
`share-session-violation` (checks/rules/share_session_rules.py), each rule on both sides."""
from __future__ import annotations

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.share_rules import ShareGroupRule
from kipcheck.checks.rules.share_session_rules import NAME, ShareSessionRule
from kipcheck.reference_model import kip932
from kipcheck.reference_model.kip932 import (INVALID_SHARE_SESSION_EPOCH as WRONG, NONE, SHARE_ACKNOWLEDGE as ACK,
                                             SHARE_FETCH as FETCH, SHARE_SESSION_NOT_FOUND as GONE)

MEMBER = "0b6c7e9a-1f2d-4c3b-9a8e-5d4c3b2a1f0e"


class History:
    """A prober's share-session requests on broker 1, built in order."""

    def __init__(self):
        self.records, self.process, self.now = [], 7, 0

    def request(self, f: str, epoch: int, answer: str | None, kind: str = "ok", member: str = MEMBER, broker=1,
                connection: int | None = 1):
        value = {"broker": broker, "group": "g-prober", "member_id": member, "session_epoch": epoch,
                 **({} if connection is None else {"connection": connection})}
        self._add("invoke", f, value)
        self._add(kind, f, {**value, **({"top_error": answer, "partitions": []} if kind == "ok" else {"error": "lost"})})
        if kind == "info":
            self.process += 1
        return self

    def fault(self, kind: str, targets: list, lasts_s: float = 1.0):
        """A nemesis fault on `targets`, started and stopped `lasts_s` apart."""
        for phase, then in (("start", 0), ("stop", lasts_s)):
            self.wait(then)
            value = {"fault": kind, "phase": phase}
            self._add("invoke", "fault", value, "nemesis")
            self._add("ok", "fault", {**value, "targets": targets}, "nemesis")
        return self

    def wait(self, seconds: float):
        self.now += int(seconds * 1e9)
        return self

    def _add(self, kind: str, f: str, value: dict, process=None) -> None:
        self.now += 500
        self.records.append({"index": len(self.records), "time": self.now, "type": kind, "f": f, "value": value,
                             "process": self.process if process is None else process})

    def judged(self) -> list:
        return ShareSessionRule().check(self.records, "kip")


def opened() -> History:
    return History().request(FETCH, 0, NONE)


# -- the model ---------------------------------------------------------------------------

def test_the_epoch_after_max_int_is_1_and_after_minus_1_is_minus_1():
    assert kip932.next_share_epoch(0) == 1
    assert kip932.next_share_epoch(kip932.MAX_INT32) == 1
    assert kip932.next_share_epoch(-1) == -1


@pytest.mark.parametrize("request_, epoch, expected, allowed", [
    (FETCH, 0, None, {NONE, kip932.SHARE_SESSION_LIMIT_REACHED}),  # opens, whatever was there
    (FETCH, 0, 5, {NONE, kip932.SHARE_SESSION_LIMIT_REACHED}),
    (ACK, 0, 5, {WRONG}),  # a ShareAcknowledge cannot open a session
    (FETCH, 3, 3, {NONE}),  # the epoch it expects
    (ACK, 3, 3, {NONE}),
    (FETCH, 10, 3, {WRONG}),  # a wrong epoch
    (ACK, 2, 3, {WRONG}),
    (FETCH, 3, None, {GONE}),  # no session
    (ACK, -1, None, {GONE}),
    (FETCH, -1, 3, {NONE}),  # a close, whatever the epoch it expects
    (ACK, -1, 9, {NONE}),
    (FETCH, 3, kip932.UNKNOWN_SESSION, None),  # not judged
])
def test_the_session_answers_kip_932_allows(request_, epoch, expected, allowed):
    got = kip932.share_session_answer(request_, epoch, expected)
    assert (got if got is None else set(got)) == allowed


@pytest.mark.parametrize("request_, epoch, expected, allowed", [
    (FETCH, 3, 3, {NONE, GONE}),
    (ACK, 3, 3, {NONE, GONE}),
    (FETCH, 10, 3, {WRONG, GONE}),
    (FETCH, -1, 3, {NONE, GONE}),
    (FETCH, 0, 3, {NONE, kip932.SHARE_SESSION_LIMIT_REACHED}),  # an open never names the old session
    (ACK, 0, 3, {WRONG}),
])
def test_a_session_that_may_be_gone_may_also_answer_not_found(request_, epoch, expected, allowed):
    assert set(kip932.share_session_answer(request_, epoch, expected, may_be_gone=True)) == allowed


@pytest.mark.parametrize("opened_on, sent_on, fault, gone", [
    (1, 1, False, False),  # the opening connection, no fault: the session is there (4.3.1 never evicts)
    (1, 2, False, True),  # another connection: the opening one may have closed (disconnect listener)
    (1, 1, True, True),  # a fault on its broker since the open (a new life, a closed connection)
    (None, 1, False, True),  # not recorded (a history before 2026-11-29): unknown
    (1, None, False, True),
])
def test_a_session_may_be_gone_only_where_kafka_drops_one(opened_on, sent_on, fault, gone):
    assert kip932.share_session_may_be_gone(opened_on, sent_on, fault) is gone


def test_the_dropping_effects_are_kipcheck_effects():
    from kipcheck import effects
    assert kip932.SESSION_DROPPING_EFFECTS <= effects.ALL


@pytest.mark.parametrize("request_, epoch, expected, answer, after", [
    (FETCH, 0, None, NONE, 1),
    (FETCH, 0, 4, NONE, 1),  # a new session replaces the old
    (FETCH, 4, 4, NONE, 5),
    (ACK, 4, 4, NONE, 5),
    (FETCH, 11, 4, WRONG, 4),  # a wrong epoch changes nothing
    (ACK, 0, 4, WRONG, 4),
    (FETCH, -1, 4, NONE, None),  # closed
    (ACK, -1, 4, NONE, None),
    (FETCH, 4, 4, GONE, None),
    (FETCH, 0, 4, kip932.SHARE_SESSION_LIMIT_REACHED, None),  # the old one was discarded first
    (FETCH, 4, 4, "INVALID_REQUEST", kip932.UNKNOWN_SESSION),
    (FETCH, kip932.MAX_INT32, kip932.MAX_INT32, NONE, 1),
])
def test_the_session_after_an_answer(request_, epoch, expected, answer, after):
    assert kip932.share_session_after(request_, epoch, expected, answer) == after


# -- the rule: what it must accept ---------------------------------------------------------

def test_the_prober_round_as_kafka_answers_it_is_accepted():
    h = (opened().request(FETCH, 1, NONE).request(FETCH, 9, WRONG).request(ACK, 2, NONE)
         .request(FETCH, -1, NONE).request(FETCH, 3, GONE))
    assert h.judged() == []


def test_a_session_asked_on_another_connection_may_answer_not_found_and_then_reopen():
    h = opened().request(FETCH, 1, GONE, connection=2).request(FETCH, 0, NONE, connection=2)
    assert h.request(FETCH, 1, NONE, connection=2).judged() == []


@pytest.mark.parametrize("kind", ["kill", "restart", "pause", "partition"])
def test_a_session_whose_broker_a_fault_touched_may_answer_not_found(kind):
    assert opened().fault(kind, [1]).request(FETCH, 1, GONE).judged() == []


def test_a_fault_started_before_the_open_and_lasting_past_it_counts():
    h = History().wait(1).fault("kill", [1], lasts_s=0)
    h.records = h.records[:2]  # started, never stopped: it lasts to the end
    assert h.request(FETCH, 0, NONE).request(FETCH, 1, GONE).judged() == []


def test_a_fault_naming_no_targets_counts_for_every_broker():
    h = opened()
    h._add("invoke", "fault", {"fault": "kill", "phase": "start"}, "nemesis")
    h._add("fail", "fault", {"fault": "kill", "phase": "start"}, "nemesis")  # targets unknown
    assert h.request(FETCH, 1, GONE).judged() == []


def test_a_history_without_connections_keeps_the_allowance():
    assert History().request(FETCH, 0, NONE, connection=None).request(FETCH, 1, GONE, connection=None).judged() == []


def test_after_a_lost_answer_the_session_is_not_judged_until_reopened():
    h = opened().request(FETCH, 1, None, kind="info").request(FETCH, 5, NONE)
    assert h.judged() == []
    assert h.request(FETCH, 0, NONE).request(FETCH, 3, NONE).judged() != []  # judged again once reopened


def test_an_answer_outside_the_session_rules_is_not_judged():
    assert opened().request(FETCH, 1, "INVALID_REQUEST").request(FETCH, 7, NONE).judged() == []


def test_a_request_never_sent_changes_nothing():
    assert opened().request(FETCH, 1, None, kind="fail").request(FETCH, 1, NONE).judged() == []


def test_members_and_brokers_are_judged_apart():
    h = opened().request(FETCH, 0, NONE, broker=2).request(FETCH, 1, NONE).request(FETCH, 1, NONE, broker=2)
    assert check_records(h.records, rules=[ShareSessionRule()])["anomalies"].get(NAME, []) == []


# -- the rule: what it must flag ------------------------------------------------------------

@pytest.mark.parametrize("steps, why", [
    ([(FETCH, 1, NONE), (FETCH, 9, NONE)], "a wrong epoch accepted"),
    ([(FETCH, 1, WRONG)], "the right epoch refused"),
    ([(ACK, 0, NONE)], "a ShareAcknowledge opened a session"),
    ([(FETCH, -1, WRONG)], "a close refused for its epoch"),
    ([(FETCH, -1, NONE), (FETCH, 2, NONE)], "a closed session continued"),
    ([(FETCH, -1, NONE), (FETCH, 2, WRONG)], "a closed session named a wrong epoch, not not-found"),
])
def test_a_wrong_session_answer_is_flagged_once(steps, why):
    h = opened()
    for request_, epoch, answer in steps:
        h.request(request_, epoch, answer)
    found = h.judged()
    assert len(found) == 1, why
    assert found[0].name == NAME and found[0].details["rule"] == "kip932.share_session_answer"
    assert found[0].indices == (len(h.records) - 2, len(h.records) - 1)


# just outside the allowance for a session gone unseen (kip932.share_session_may_be_gone)

def test_not_found_on_the_opening_connection_with_no_fault_is_flagged():
    found = opened().request(FETCH, 1, NONE).request(FETCH, 2, GONE).judged()
    assert [(a.details["session_epoch"], a.details["answer"]) for a in found] == [(2, GONE)]


def test_not_found_for_an_acknowledgement_or_a_close_on_the_opening_connection_is_flagged():
    assert len(opened().request(ACK, 1, GONE).judged()) == 1
    assert len(opened().request(FETCH, -1, GONE).judged()) == 1


@pytest.mark.parametrize("kind, targets, why", [
    ("kill", [2], "a fault on another broker"),
    ("elect", [1], "a fault whose effects keep the session (elects)"),
    ("latency", [1], "slowed links keep the connection"),
])
def test_not_found_after_a_fault_that_cannot_drop_the_session_is_flagged(kind, targets, why):
    assert len(opened().fault(kind, targets).request(FETCH, 1, GONE).judged()) == 1, why


def test_not_found_after_a_fault_that_settled_before_the_open_is_flagged():
    h = History().fault("kill", [1]).wait(6)  # past the 5 s settle time
    assert len(h.request(FETCH, 0, NONE).request(FETCH, 1, GONE).judged()) == 1
    assert History().fault("kill", [1]).wait(4).request(FETCH, 0, NONE).request(FETCH, 1, GONE).judged() == []


def test_a_reopen_on_a_new_connection_moves_the_session_there():
    h = opened().request(FETCH, 0, NONE, connection=2).request(FETCH, 1, GONE, connection=2)
    assert len(h.judged()) == 1  # the session now lives on connection 2, which is still open


def test_an_open_answered_with_a_session_error_is_flagged():
    found = History().request(FETCH, 0, GONE).judged()
    assert [a.details["answer"] for a in found] == [GONE]


def test_a_member_with_no_session_answered_none_is_flagged():
    assert [a.details["session_epoch"] for a in History().request(FETCH, 4, NONE).judged()] == [4]


def test_the_verdict_names_it_and_stays_decidable():
    v = check_records(opened().request(FETCH, 1, NONE).request(FETCH, 5, NONE).records)
    assert len(v["anomalies"][NAME]) == 1 and v["valid"] is False


# -- the rule's borders ---------------------------------------------------------------------

def test_the_share_workload_rule_and_this_one_read_apart():
    h = opened().request(ACK, 1, NONE)
    assert all(not list(ShareGroupRule().group_keys(r)) for r in h.records)
    poll = {"index": 0, "time": 0, "process": 1, "type": "ok", "f": "share_poll", "value": {"group": "g"}}
    assert list(ShareSessionRule().group_keys(poll)) == []


@pytest.mark.parametrize("broken", [
    {"session_epoch": "x"}, {"session_epoch": None}, {"top_error": 5}, {"top_error": None},
])
def test_unreadable_records_give_no_traceback_and_no_judgement(broken):
    h = opened().request(FETCH, 1, NONE)
    h.records[-1]["value"].update(broken)
    h.records[-2]["value"].update({k: v for k, v in broken.items() if k == "session_epoch"})
    assert h.request(FETCH, 9, NONE).judged() == []  # the session is unknown after it
