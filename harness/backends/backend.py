"""A cluster backend as one object (ducktape's services in spirit): what a run may ask of it,
checked before anything starts, and the cluster it makes. harness.backends.registry names them;
`kipcheck run` (harness.run) asks them and never their names.

This module and the backends' own modules stay light (no client library, Docker, SSH or Spark):
a bad option must fail in well under a second, before any process starts. A backend imports its
cluster class inside `cluster()`, once the options are known to be good.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kipcheck.harness.errors import HarnessError

if TYPE_CHECKING:
    from kipcheck.faults.cluster import Cluster
    from kipcheck.harness.backends.cluster import ClusterOptions
    from kipcheck.harness.backends.kafka_dist import KafkaDistribution
    from kipcheck.harness.run import RunOptions


@dataclass(frozen=True)
class FaultSupport:
    """The fault kinds a backend can inject, and why not the others: plain values the run hands
    faults.plan.FaultPlan.asked, which picks the kinds a run injects and refuses the rest."""

    kinds: tuple[str, ...] | None = None  # None: every kind of faults.registry
    why_not: Callable[[str], str] | None = None  # one line for a kind outside `kinds`
    #: instead of the run's default (one leader isolation, packet-level): these kinds, and why
    default: tuple[str, ...] | None = None
    default_why: str = ""

    def default_note(self, asked: list[str] | None) -> str | None:
        """What the terminal says when the run's default fault is replaced."""
        if asked is not None or self.default is None:
            return None
        return f"the default leader isolation {self.default_why}: faults {','.join(self.default)} instead"


@dataclass(frozen=True)
class Capabilities:
    """What a backend's clusters can do; the run decides by these, never by the backend's name."""

    starts_kafka: bool  # kipcheck formats and starts the nodes (a distribution it resolves); else it reaches a running cluster
    faults: FaultSupport
    same_clock: bool  # the brokers stamp with this machine's clock, the history's: KIP-32 LogAppendTime is judged
    upgrades: bool  # rolling upgrades (--upgrade-from/--upgrade-to)
    tiered_refused: str | None  # None: --tiered runs; else the one line that refuses it
    #: --elr is set at format (KIP-966); False: no format of ours sets it (the option is recorded, as before,
    #: and decides nothing: a qualification plan's ELR steps still run there)
    elr: bool
    metadata_log: bool  # the controllers' metadata log can be read (KIP-966's election rule, KIP-455's completion)
    hosts: str  # the machines it touches, for the docs and `kipcheck run --help`


class Backend:
    """One backend: a name, its capabilities, and the three steps the run takes with it.

    `prepare` checks and completes the options (pure and fast: no process, no connection);
    `reach` makes sure what the backend needs outside is there, before the run directory
    exists; `cluster` makes the cluster object, `start` brings it up. A subclass overrides
    `complete` (its own options) and what else differs."""

    name: str
    capabilities: Capabilities

    def prepare(self, options: RunOptions) -> RunOptions:
        """The run's options for this backend; a bad one raises HarnessError, one line, before anything starts.
        Its fault kinds are the run's to check with what the backend declares (harness.run._prepare)."""
        if options.tiered and self.capabilities.tiered_refused:
            raise HarnessError(self.capabilities.tiered_refused)
        return self.complete(options)

    def complete(self, options: RunOptions) -> RunOptions:
        """This backend's own checks and completions of the options (none by default)."""
        return options

    def reach(self, options: RunOptions, dist: KafkaDistribution | None, ui) -> None:
        """What the backend needs outside (Docker, a running cluster), reached before the run
        directory exists: a missing one leaves nothing behind. Nothing by default."""

    def cluster(self, options: RunOptions, dist: KafkaDistribution | None, root: Path,
                cluster_options: ClusterOptions, owner_pid: int) -> Cluster:
        """The cluster object, not yet started (`root`: its directory in the run directory)."""
        raise NotImplementedError

    def start(self, cluster: Cluster, options: RunOptions, version: str, ui) -> None:
        """Bring the cluster up, its steps on the terminal."""
        with ui.step(f"starting {options.brokers} Kafka {version} nodes ({cluster.mode})"):
            cluster.up(progress=ui.substep)
