"""KIP-227 "Handling Partition Size Limits" as Kafka reads (`ReplicaManager.readFromLog`):
when the response's byte limits may leave a partition with data at its fetch offset empty,
and which reads prove a first batch fits the partition limit. Each bound is held at its
edge: allowed on it, flagged one byte past it."""
from hypothesis import assume, given, strategies as st

from kipcheck.reference_model import kip227

LIMIT, BUDGET = 16384, 1 << 20


def test_a_read_before_any_other_returned_bytes_is_never_emptied():
    """The first partition to return bytes reads with minOneMessage: whatever its first batch."""
    assert not kip227.size_limits_may_empty_read(None, [], LIMIT, BUDGET)
    assert not kip227.size_limits_may_empty_read(10 * LIMIT, [], LIMIT, BUDGET)


def test_an_unbounded_first_batch_after_another_read_may_be_emptied():
    assert kip227.size_limits_may_empty_read(None, [LIMIT], LIMIT, BUDGET)
    assert kip227.size_limits_may_empty_read(LIMIT, [None], LIMIT, BUDGET)


def test_a_fitting_batch_is_emptied_only_when_the_budget_runs_out_at_its_edge():
    """Budget exactly one partition limit short after n earlier reads: still read; a byte less: emptied."""
    n = BUDGET // LIMIT - 1  # earlier reads that leave exactly LIMIT bytes of the budget
    assert not kip227.size_limits_may_empty_read(LIMIT, [LIMIT] * n, LIMIT, BUDGET)
    assert kip227.size_limits_may_empty_read(LIMIT, [LIMIT] * n, LIMIT, BUDGET - 1)
    assert kip227.size_limits_may_empty_read(LIMIT + 1, [LIMIT], LIMIT, BUDGET)  # larger than its own limit


def test_an_oversized_head_read_with_min_one_message_spends_its_whole_batch():
    """The head read may return one batch above the limit; the later ones at most the limit."""
    head = BUDGET - LIMIT  # leaves exactly one limit
    assert not kip227.size_limits_may_empty_read(LIMIT, [head], LIMIT, BUDGET)
    assert kip227.size_limits_may_empty_read(LIMIT, [head + 1], LIMIT, BUDGET)
    # order unknown: any earlier partition may have been the head with its oversized batch
    assert not kip227.size_limits_may_empty_read(LIMIT, [LIMIT, head], LIMIT, BUDGET, order_known=True)
    assert kip227.size_limits_may_empty_read(LIMIT, [LIMIT, head], LIMIT, BUDGET, order_known=False)


def _kafka_reads(first, order):
    """Kafka's reads of one response, worst case for the last partition: each earlier log holds
    its first batch then one-byte batches, so every read fills what it may (`readFromLog`: the
    head with minOneMessage returns max(limit, its batch), the later ones their limit). Whether
    the last partition, first batch `first`, comes back empty (None: an earlier one could not
    have returned bytes, so the case cannot happen)."""
    remaining = BUDGET
    for i, batch in enumerate(order):
        limit = min(LIMIT, remaining)
        if i and batch > limit:
            return None
        remaining -= max(limit, batch) if i == 0 else limit
    return first > min(LIMIT, remaining)


@given(st.integers(1, 4 * LIMIT), st.lists(st.integers(1, 4 * LIMIT), min_size=1, max_size=80), st.booleans())
def test_emptied_when_some_read_order_kafka_may_take_leaves_less_than_the_batch(first, earlier, order_known):
    heads = range(1) if order_known else range(len(earlier))
    outcomes = [_kafka_reads(first, [earlier[h], *earlier[:h], *earlier[h + 1:]]) for h in heads]
    possible = [o for o in outcomes if o is not None]
    assume(possible)
    assert kip227.size_limits_may_empty_read(first, earlier, LIMIT, BUDGET, order_known) == any(possible)


def test_a_read_without_min_one_message_proves_its_first_batch_fits():
    assert kip227.first_batch_within_limit([(None, (5, 6)), (False, (5,))]) == (1,)
    assert kip227.first_batch_within_limit([(True, (5, 6, 7))]) == ()


def test_two_reads_returning_different_offsets_prove_the_batch_fits():
    """An oversized batch is only ever returned alone, the same offsets each time."""
    assert kip227.first_batch_within_limit([(True, (5, 6)), (None, (5, 6)), (True, (5, 6, 7))]) == (0, 2)
    assert kip227.first_batch_within_limit([(True, (5, 6)), (None, (5, 6))]) == ()


@given(st.lists(st.tuples(st.sampled_from([True, None]), st.just((3, 4))), min_size=1, max_size=6))
def test_equal_reads_with_min_one_message_prove_nothing(reads):
    assume(all(one is not False for one, _ in reads))
    assert kip227.first_batch_within_limit(reads) == ()
