"""One pass judged under several profiles (checks.engine_local.check_records_under, what the
seeded-bug matrix uses for each window) gives each profile the verdict a pass under it alone
gives, on real 4.3.1 runs whose verdicts differ by profile (known deviations flagged under
`kip`, accepted under `kafka-4.3`)."""
import json
from pathlib import Path

import pytest

from kipcheck.checks.engine_local import check_records, check_records_under
from kipcheck.checks.mutate.recall import load_history

RECALL = Path(__file__).parent / "data" / "recall"
PROFILES = ["kip", "kafka-4.3"]


@pytest.mark.parametrize("run", ["ci-kill"])
def test_each_profile_of_one_pass_is_its_own_pass(run):
    records = load_history(RECALL / run)
    alone = [check_records(records, profile=p) for p in PROFILES]
    assert alone[0]["valid"] is False and alone[1]["valid"] is True, "the profiles must judge this run apart"
    together = check_records_under(records, PROFILES)
    assert [json.dumps(v, sort_keys=True) for v in together] == [json.dumps(v, sort_keys=True) for v in alone]
    # either order: no profile's judges see what another's did
    assert check_records_under(records, PROFILES[::-1]) == together[::-1]
