"""KIP-848 partition ownership (`group-ownership-violation`, checks/rules/group_rules.py) on
hand-made histories: a handoff is judged by what the previous owner did next, and flagged only
when that owner went on owning the partition and revoked it afterwards as an ordinary revocation."""
from __future__ import annotations

import pytest

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.group_rules import ANOMALY, GroupOwnershipRule
from kipcheck.reference_model import kip848

A, B = 11, 12  # two subscriber processes of one group


class GroupHistory:
    def __init__(self):
        self.records: list[dict] = []

    def _op(self, process, f, value, **result):
        for type_, extra in (("invoke", {}), ("ok", result)):
            self.records.append({"index": len(self.records), "time": len(self.records) * 1000, "process": process,
                                 "type": type_, "f": f, "value": {**value, **extra}})
        return len(self.records) - 2  # the invoke's index

    def assign(self, process, *partitions, group="g"):
        return self._op(process, "assign", {"partitions": [["t", p] for p in partitions], "rebalance": True,
                                            "seek_to_beginning": True, "group": group, "member": f"m{process}"})

    def revoke(self, process, *partitions, lost=False, group="g"):
        return self._op(process, "revoke", {"partitions": [["t", p] for p in partitions], "group": group,
                                            "member": f"m{process}", "lost": lost})

    def fetch(self, process, *partitions, group="g", member=None):
        """The committed offsets an assign callback asks before it records its `assign` (commits.py `resume`)."""
        return self._op(process, "committed", {"partitions": [["t", p] for p in partitions], "group": group,
                                               "member": member or f"m{process}", "protocol": "consumer"},
                        offsets={})

    def crash(self, process):
        self.records.append({"index": len(self.records), "time": len(self.records) * 1000, "process": process,
                             "type": "invoke", "f": "poll", "value": {"topic": "t"}})
        self.records.append({"index": len(self.records), "time": len(self.records) * 1000, "process": process,
                             "type": "fail", "f": "poll", "value": {"topic": "t", "error": "boom", "fatal": True}})

    def judged(self):
        return GroupOwnershipRule().check([r for r in self.records if [*GroupOwnershipRule().group_keys(r)]], "kip")


def test_a_handoff_after_the_owner_revoked_is_allowed():
    h = GroupHistory()
    h.assign(A, 0, 1, 2)
    h.revoke(A, 2)
    h.assign(B, 2)
    h.revoke(A, 0, 1)
    assert h.judged() == []


def test_given_one_record_before_the_owner_revoked_it_is_two_owners():
    """Just outside the bound: the other member's assign runs before the owner's revoke begins."""
    h = GroupHistory()
    owned = h.assign(A, 0, 1, 2)
    given = h.assign(B, 2)
    revoked = h.revoke(A, 2)
    [anomaly] = h.judged()
    assert anomaly.name == ANOMALY and anomaly.indices == (owned, given, revoked)
    assert anomaly.details["partition"] == 2 and anomaly.details["owner_state"] == kip848.HELD


def test_a_fenced_owner_that_learns_it_lost_the_partition_is_allowed():
    h = GroupHistory()
    h.assign(A, 2)
    h.assign(B, 2)
    h.revoke(A, 2, lost=True)
    assert h.judged() == []


def test_an_owner_whose_client_failed_is_gone():
    h = GroupHistory()
    h.assign(A, 2)
    h.assign(B, 2)
    h.crash(A)
    h.revoke(A, 2)  # the close of the failed client, after it was replaced
    assert h.judged() == []


def test_an_owner_that_never_lets_go_before_the_end_is_not_judged():
    h = GroupHistory()
    h.assign(A, 2)
    h.assign(B, 2)
    assert h.judged() == []


def test_only_the_partitions_still_owned_count():
    h = GroupHistory()
    h.assign(A, 0, 1)
    h.revoke(A, 0)
    h.assign(B, 0, 1)  # 0 was released, 1 was not
    h.revoke(A, 1)
    [anomaly] = h.judged()
    assert anomaly.details["partition"] == 1


def test_other_groups_and_the_same_member_are_no_handoff():
    h = GroupHistory()
    h.assign(A, 2, group="g1")
    h.assign(B, 2, group="g2")
    h.assign(A, 2, group="g1")  # the same member again (a repeated callback)
    h.revoke(A, 2, group="g1")
    assert h.judged() == []


def test_manual_assignments_are_no_group_records():
    h = GroupHistory()
    h.assign(A, 2)
    h.records.append({"index": len(h.records), "time": 0, "process": B, "type": "invoke", "f": "assign",
                      "value": {"partitions": [["t", 2]], "seek_to_beginning": True}})
    h.revoke(A, 2)
    assert h.judged() == []


def test_the_checker_reports_it_by_name_and_counts_handoffs():
    h = GroupHistory()
    h.assign(A, 2)
    h.assign(B, 2)
    h.revoke(A, 2)
    verdict = check_records(h.records)
    assert verdict["valid"] is False and verdict["anomalies"][ANOMALY]
    assert verdict["coverage"]["kip848.handoff_allowed"]["observations"] == 2


@pytest.mark.parametrize("state", kip848.OWNER_STATES)
def test_the_model_allows_every_state_but_held(state):
    assert kip848.handoff_allowed(state) is (state != kip848.HELD)


def test_the_model_refuses_a_state_it_does_not_know():
    with pytest.raises(ValueError):
        kip848.handoff_allowed("asleep")


@pytest.mark.parametrize("fetch_first,expect", [(True, [ANOMALY]), (False, [])])
def test_a_member_owns_a_partition_from_its_callbacks_offset_fetch(fetch_first, expect):
    """B's callback asks its new partition's committed offset before the owner A revokes it, and records
    its `assign` only after: B was given the partition while A still owned it. Without that fetch
    before the revoke (B's callback began afterwards) the handoff is a clean one."""
    h = GroupHistory()
    owned = h.assign(A, 0, 1, 2)
    if fetch_first:
        began = h.fetch(B, 2)
    revoked = h.revoke(A, 2)
    if not fetch_first:
        h.fetch(B, 2)
    h.assign(B, 2)
    h.revoke(A, 0, 1)
    found = h.judged()
    assert [a.name for a in found] == expect
    if found:  # the evidence cites the fetch, before the revoke
        assert found[0].indices == (owned, began, revoked)


def test_a_fetch_for_other_partitions_or_another_member_does_not_start_the_assign():
    for fetch in ({"partitions": (1,)}, {"partitions": (2,), "member": "someone-else"}):
        h = GroupHistory()
        h.assign(A, 0, 1, 2)
        h.fetch(B, *fetch["partitions"], member=fetch.get("member"))
        h.revoke(A, 2)
        h.assign(B, 2)
        assert h.judged() == [], fetch


# --- the coordinator's own view (ConsumerGroupDescribe answers, `group_describe`) ------------------

def _describe(h: GroupHistory, *members):
    """One answered `group_describe`: `members` are (member id, assigned partitions of topic t)."""
    value = {"group": "g", "state": "STABLE", "type": "CONSUMER", "coordinator": 1,
             "members": [{"member": m, "client": "c", "assigned": [["t", p] for p in parts], "target": []}
                         for m, parts in members]}
    return h._op("describer", "group_describe", {"group": "g"}, **value)


def test_an_answer_listing_a_partition_for_two_members_is_two_owners():
    """Just outside: partition 2 listed for both members in one answer; the callbacks show nothing."""
    h = GroupHistory()
    _describe(h, ("ma", [0, 1, 2]), ("mb", [2]))
    [a] = h.judged()
    assert a.name == ANOMALY and a.details["rule"] == "kip848.assigned_to_one_member"
    assert (a.details["topic"], a.details["partition"], a.details["members"]) == ("t", 2, ["ma", "mb"])


def test_answers_that_move_a_partition_between_members_are_allowed():
    """Just inside: the owner's assignment drops the partition in one answer (pending revocation is not
    listed) and the next lists it for the new member; a member listing it twice is no second owner."""
    h = GroupHistory()
    _describe(h, ("ma", [0, 1, 2]), ("mb", []))
    _describe(h, ("ma", [0, 1]), ("mb", []))
    _describe(h, ("ma", [0, 1]), ("mb", [2]))
    assert h.judged() == []
    assert kip848.assigned_to_one_member([[("t", 0), ("t", 0)], [("t", 1)]])
    assert not kip848.assigned_to_one_member([[("t", 0)], [("u", 1)], [("t", 0)]])


def test_failed_or_empty_answers_are_not_judged_or_counted():
    from kipcheck.checks.coverage import opportunities as rules_for
    h = GroupHistory()
    _describe(h, ("ma", []), ("mb", []))
    h.records.append({"index": 2, "time": 2000, "process": "describer", "type": "fail", "f": "group_describe",
                      "value": {"group": "g", "error": "timed out"}})
    assert h.judged() == [] and [rules_for(r) for r in h.records if r["type"] != "invoke"] == [(), ()]
    _describe(h, ("ma", [0]))
    assert rules_for(h.records[-1]) == ("kip848.assigned_to_one_member",)
