"""The detection matrix on live brokers: every seeded bug must be flagged by its anomaly name.

One cluster carries every seeded bug (harness.seeded, the Java agent in tests/seeded_bugs/),
switched on one at a time by `harness.selftest.run_matrix`. The default suite runs short
windows; `-m long` runs the long form. Each bug must have fired (else it proves nothing),
and be flagged under both `kip` and the version's profile; the control window (no bug on)
must be valid under both.
"""
from __future__ import annotations

import pytest

from harness import seeded
from harness.selftest import CONTROL, run_matrix

SHORT_WINDOW, LONG_WINDOW = 8.0, 30.0


@pytest.fixture(scope="module", params=[pytest.param(SHORT_WINDOW, id="short"),
                                        pytest.param(LONG_WINDOW, id="long", marks=pytest.mark.long)])
def matrix(request, kafka_version, tmp_path_factory):
    m = run_matrix(kafka_version or "4.3.1", window=request.param, out_dir=tmp_path_factory.mktemp("selftest"))
    return {r["bug"]: r for r in m["rows"]} | {"_profiles": m["profiles"]}


def describe(row: dict) -> str:
    return (f"{row['bug']}: status {row['status']}, fires {row['fires']}, flagged {row['flagged']}, "
            f"valid {row['valid']}, window {row['window_dir']}")


@pytest.mark.cluster
def test_control_window_is_valid(matrix):
    """Valid under the version's profile; under `kip` only that profile's known deviations."""
    row = matrix[CONTROL]
    assert row["valid"][matrix["_profiles"][-1]] is True, describe(row)
    assert row["status"] == "valid", describe(row)


@pytest.mark.cluster
@pytest.mark.parametrize("bug", [b.name for b in seeded.BUGS])
def test_seeded_bug_is_flagged_by_name(matrix, bug):
    row = matrix[bug]
    assert row["installed"], describe(row)
    assert row["fires"] > 0, "the bug never fired, so the window proves nothing: " + describe(row)
    for p in matrix["_profiles"]:
        assert bug in row["flagged"][p], f"not flagged under {p}: " + describe(row)
