"""A run's faults as one object: the kinds asked for, checked once before anything starts, and
all the harness asks of them afterwards.

`kipcheck run --faults X` crosses from the harness into faults twice (tests/test_cluster_protocol.py
holds it): `FaultPlan.asked` when the options are checked (the names and `all`, the kinds the
backend injects and why not the others, the brokers they need, what the cluster must provide:
proxies, JBOD, libfaketime; and the seeded schedule), and `FaultPlan.nemesis` when the run's
session starts the workload: the thread that injects, records and heals the schedule. The run
carries the plan in between; `heal_all` undoes every kind at its end. Faults never see the
harness: what the backend supports arrives as plain values.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from kipcheck.faults import schedule as schedules
from kipcheck.faults.base import FaultContext, FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.nemesis import Nemesis, heal_all
from kipcheck.faults.registry import cluster_options, min_brokers, parse_kinds, require_kinds


@dataclass(frozen=True)
class FaultPlan:
    kinds: tuple[str, ...] | None = ()  # the kinds the run injects; None: its default, one leader isolation
    schedule: tuple[FaultSpec, ...] = ()  # when and on what (faults.schedule), as config.json records it
    refused: tuple[tuple[str, str], ...] = ()  # asked kinds the backend cannot inject, each with why
    cluster_options: dict = field(default_factory=dict)  # the ClusterOptions fields the kinds need

    @classmethod
    def asked(cls, names: list[str] | None, *, seed: int, duration: float, topic: str, intensity: float = 1.0,
              partitions: int = 3, transactional_ids: tuple[str, ...] = (),
              share_group: str | None = None, runs: Collection[str] | None = None,
              why_not: Callable[[str], str] | None = None, default: tuple[str, ...] | None = None,
              brokers: int | None = None) -> FaultPlan:
        """The run's faults, checked: `names` are kinds or `all` (None: the run's default). The backend
        injects `runs` (None: every kind), `why_not` says why not another, and `default` replaces the
        run's default where it cannot isolate a leader. `brokers`: how many the run starts (None:
        kipcheck starts none). `share_group`: the share workload's group, whose coordinators the
        schedule may aim at. An unknown kind or too few brokers is one line (FaultError)."""
        # [] is 'none' on purpose; names that parse to no kind ('', ',') are refused (require_kinds)
        asked = None if names is None else (require_kinds if names else parse_kinds)(",".join(names))
        if asked is None:
            kinds = None if default is None else tuple(default)
        else:
            kinds = tuple(asked if runs is None else (k for k in asked if k in runs))
        refused = () if asked is None or runs is None else tuple((k, why_not(k)) for k in asked if k not in runs)
        if brokers is not None:
            _refuse_too_few(kinds or (), brokers)
        if kinds is None:
            specs = schedules.single_partition(duration, topic)
        else:
            specs = schedules.generate(seed, list(kinds), duration, topic, intensity, partitions=partitions,
                                       transactional_ids=transactional_ids, share_group=share_group)
        return cls(kinds, tuple(specs), refused, cluster_options(kinds or ()))

    @classmethod
    def of(cls, specs: Iterable[FaultSpec]) -> FaultPlan:
        """A plan of given specs: a test's own (the pytest `workload` fixture), or none."""
        specs = tuple(specs)
        return cls(tuple(dict.fromkeys(s.kind for s in specs)), specs)

    def nemesis(self, ctx: FaultContext, history, stop) -> Nemesis:
        """The thread that runs the schedule on `ctx` until `stop` is set (faults.nemesis)."""
        return Nemesis(ctx, list(self.schedule), history, stop)

    def heal_all(self, ctx: FaultContext, history=None) -> None:
        """Undo every fault kind, whatever the run did (faults.nemesis.heal_all); recorded with a history."""
        heal_all(ctx, history)


def _refuse_too_few(kinds: Collection[str], brokers: int) -> None:
    """A kind that needs more brokers than the run starts (broker-decommission: 4) is refused before anything starts."""
    needed = min_brokers(kinds)
    if brokers < needed:
        wants = [k for k in kinds if min_brokers([k]) > brokers]
        raise FaultError(f"{', '.join(wants)} needs {needed} brokers, the run has {brokers}: add --brokers {needed}")
