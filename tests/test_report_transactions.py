"""The report's transactions section counts what the history shows and draws every span."""
from kipcheck.reports.transactions import lso_series, transactions, transactions_html
from tests.test_checker_transactions import base, reads


def test_counts_spans_and_lso():
    h = reads(base()).fetch(5, 1, lso=4, hwm=7)
    txns = transactions(h.records)
    assert {k: t["outcome"] for k, t in txns.items()} == {"x.1": "committed", "x.2": "aborted", "x.3": "committed",
                                                         "x.4": "unknown"}
    assert lso_series(h.records) == {"t/0": [(h.records[-1]["time"] / 1e9, 4, 7)]}
    page = transactions_html(h.records, end=1.0)
    assert "4 transactions: <b>2 committed</b>, <b>1 aborted</b>, <b>1 unknown</b>" in page
    assert page.count("<rect") == 4 and "LSO (blue)" in page
    assert transactions_html(base().records[:0], end=1.0) == ""  # no transactions, no section
