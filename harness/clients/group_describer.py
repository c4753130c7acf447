"""The group coordinator's own view of the run's consumer group, beside the members' callbacks.

Once a second the describer asks ConsumerGroupDescribe (KIP-848, API key 69; confluent-kafka's
`describe_consumer_groups`) for the run's subscriber group and records the answer as a
`group_describe`: each member's assigned partitions and its target assignment, as the coordinator
has them (docs/history.md, "Consumer groups"). The members' own callbacks show ownership as each
member learned it; the coordinator's answer shows what it had decided, so a partition it lists for
two members at once is a `group-ownership-violation` whichever member heard first
(checks/rules/group_rules.py).

Only for subscribers of the consumer protocol, on a cluster that answers ConsumerGroupDescribe
(capabilities.GROUP_DESCRIBE_API, 4.0 on): the older DescribeGroups path is not taken, because
librdkafka 2.16's admin response parser once aborted the process against 3.3.2
(harness.clients.admin.Admin.broker_ids).
"""
from __future__ import annotations

import itertools
import threading

from confluent_kafka.admin import AdminClient

from kipcheck.harness.clients.admin import quiet_logger
from kipcheck.harness.clients.client_errors import error_text
from kipcheck.harness.clients.workload import Worker
from kipcheck.rundir.writer import History

DESCRIBE = "group_describe"


class GroupDescriber(Worker):
    def __init__(self, bootstrap: str, group: str, history: History, stop: threading.Event,
                 interval: float = 1.0, timeout: float = 5.0):
        super().__init__("group-describer", history, stop)
        self.bootstrap, self.group, self.interval, self.timeout = bootstrap, group, interval, timeout
        self._generations = itertools.count(1)
        self.process = "describer"

    def work(self):
        admin = self._admin()
        while not self.stop_event.wait(self.interval):
            op = self.history.invoke(self.process, DESCRIBE, {"group": self.group})
            try:
                [future] = admin.describe_consumer_groups([self.group], request_timeout=self.timeout).values()
                described = future.result(timeout=self.timeout + 1)
            except Exception as e:  # a read: it changed nothing, whatever the error
                op.fail(error=error_text(e))
                self.process = f"describer-{next(self._generations)}"  # a new process, as after any failure
                admin = self._admin()
                continue
            op.ok(**describe_value(described))

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "logger": quiet_logger()})


def describe_value(described) -> dict:
    """A ConsumerGroupDescription as the history keeps it: state, protocol type, coordinator and,
    per member, its id, client id, assigned partitions and target assignment ([topic, partition])."""
    def partitions(assignment) -> list[list]:
        return sorted([tp.topic, tp.partition] for tp in (getattr(assignment, "topic_partitions", None) or ()))

    return {"state": _name(described.state), "type": _name(getattr(described, "type", None)),
            "coordinator": getattr(described.coordinator, "id", None),
            "members": [{"member": m.member_id, "client": m.client_id, "assigned": partitions(m.assignment),
                         "target": partitions(m.target_assignment)}
                        for m in sorted(described.members, key=lambda m: m.member_id)]}


def _name(value) -> str | None:
    return None if value is None else getattr(value, "name", str(value))
