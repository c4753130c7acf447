"""A complete kipcheck test as a user writes one (docs/pytest.md): the run's clients on a
fresh topic of the session's cluster, a fault in the middle, then one call that heals, reads
everything back, checks the history and fails the test with any anomaly and its proof.

Run it with `pytest examples/test_example_workload.py --alluredir allure-results` (the test suite
runs it that way too, tests/integration/test_pytest_services.py; it is outside tests/ so that
it runs once).
"""
import pytest

from kipcheck.faults.base import FaultSpec

pytestmark = pytest.mark.cluster


def test_acks_all_survives_isolating_the_leader(workload, nemesis, topic):
    workload.start(producers=2, consumers=1)  # WorkloadOptions fields; acks=all, idempotent
    workload.wait(5)
    isolate = FaultSpec("partition", 0, 0, {"topic": topic, "partition": 0, "target": "leader"})
    injected = nemesis.inject(isolate)  # recorded in the history, healed at teardown at the latest
    workload.wait(10)
    nemesis.heal(isolate, injected)
    workload.wait(5)
    verdict = workload.verify()  # heal all, final reads, check: fails the test unless valid
    assert workload.progress()["sent"] > 0 and verdict["counts"]["records"] > 0


def test_a_fault_plan_runs_with_the_workload(workload, topic):
    """The same with the fault as a plan: the nemesis isolates the leader 4 s after start, for 8 s."""
    plan = [FaultSpec("partition", 4, 8, {"topic": topic, "partition": 0, "target": "leader"})]
    workload.start(faults=plan, producers=2, consumers=1)
    workload.wait(16)
    assert workload.progress()["faults"] == 1  # the window opened and closed while the clients ran
    workload.verify()
