"""The decommission plan: which broker takes each replica that leaves a decommissioned broker."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import assume, given, strategies as st

from kipcheck.faults.errors import FaultError
from kipcheck.faults.membership import moves_off
from kipcheck.faults.registry import DEFAULT_MIX, OPT_IN, min_brokers


@st.composite
def assignments(draw):
    brokers = list(range(1, draw(st.integers(2, 7)) + 1))
    rf = draw(st.integers(1, len(brokers)))
    n = draw(st.integers(1, 40))
    out = {}
    for p in range(n):
        out[("t", p)] = draw(st.permutations(brokers))[:rf]
    return out, brokers


@given(assignments(), st.data())
def test_every_replica_leaves_the_victim_and_the_rest_stay_in_place(case, data):
    assignment, brokers = case
    victim = data.draw(st.sampled_from(brokers))
    assume(any(victim in r for r in assignment.values()))
    assume(all(len(r) < len(brokers) for r in assignment.values() if victim in r))
    moves = moves_off(assignment, victim, brokers)
    assert set(moves) == {tp for tp, r in assignment.items() if victim in r}
    for tp, new in moves.items():
        old = assignment[tp]
        assert victim not in new and len(set(new)) == len(new) == len(old)
        assert [r for r in new if r in old] == [r for r in old if r != victim]  # order kept, one place changed
        assert new.index(next(r for r in new if r not in old)) == old.index(victim)


def test_moved_replicas_spread_over_the_brokers_with_fewest():
    # four brokers, RF 3, every partition on 1, 2, 3 -> broker 4 is the only place: all go there
    assignment = {("t", p): [1, 2, 3] for p in range(6)}
    assert set(map(tuple, moves_off(assignment, 2, [1, 2, 3, 4]).values())) == {(1, 4, 3)}
    # five brokers: the replicas leaving 1 alternate between 4 and 5
    moves = moves_off({("t", p): [1, 2, 3] for p in range(6)}, 1, [1, 2, 3, 4, 5])
    assert Counter(new[0] for new in moves.values()) == {4: 3, 5: 3}


def test_no_broker_outside_the_set_is_a_fault_error():
    with pytest.raises(FaultError, match="no other broker"):
        moves_off({("t", 0): [1, 2, 3]}, 1, [1, 2, 3])


def test_decommission_is_opt_in_and_needs_four_brokers():
    assert "broker-decommission" in OPT_IN and "broker-decommission" not in DEFAULT_MIX
    assert min_brokers(["kill", "broker-decommission"]) == 4 and min_brokers(["kill"]) == 1 == min_brokers([])
