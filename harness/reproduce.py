"""The one `kipcheck run` command line that repeats a run: in config.json, the report and
campaign summaries. It names everything that decides the outcome: the seed, the release the
run resolved (always, so the same line starts the same Kafka next month, whatever the default
or `latest` is then) and every option that differs from its default."""
from __future__ import annotations

import shlex

#: RunOptions field -> its `kipcheck run` flag (a True boolean is the bare flag)
_FLAGS = {"duration": "--duration", "backend": "--backend", "bootstrap": "--bootstrap", "hosts": "--hosts",
          "kafka_home": "--kafka-home", "brokers": "--brokers",
          "controllers": "--controllers", "intensity": "--intensity", "engine": "--engine",
          "profile": "--profile", "tiered": "--tiered", "require_coverage": "--require-coverage",
          "allow_uncovered": "--allow-uncovered",
          "recovery_bound": "--recovery-bound", "crash_loop": "--crash-loop",
          "upgrade_from": "--upgrade-from", "upgrade_to": "--upgrade-to", "elr": "--elr"}
#: WorkloadOptions field -> its flag (the workload options `kipcheck run` takes)
_WORKLOAD_FLAGS = {"producers": "--producers", "in_flight": "--in-flight", "rate": "--rate",
                   "consumers": "--consumers", "workload": "--workload", "share_consumers": "--share-consumers",
                   "share_group": "--share-group", "group_protocol": "--group-protocol"}  # as resolved: the release's default is pinned too


def _changed(options, flags: dict[str, str]) -> list[str]:
    """The flags of `options`' fields that differ from a default-constructed one of its type."""
    default = type(options)()
    args: list[str] = []
    for field, flag in flags.items():
        value = getattr(options, field, None)
        if value == getattr(default, field, None) or value is None or value is False:
            continue
        args += [flag] if value is True else [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return args


def reproduce_command(options, kafka_version: str | None = None) -> str:
    """`kipcheck run --seed S ...` for a harness.run.RunOptions. `kafka_version` is the release
    the run resolved: it is named unless the run rolled between two releases or ran a local
    distribution (`--kafka-home`, which names it) or an external cluster it was not told about."""
    args = ["kipcheck", "run", "--seed", str(options.seed)]
    version = kafka_version or options.kafka_version
    if version and version != "unknown" and not (options.upgrade_from or options.kafka_home):
        args += ["--kafka-version", version]
    args += _changed(options, _FLAGS) + _changed(options.workload, _WORKLOAD_FLAGS)
    if options.broker_jit != "full":  # named even when the environment set it (its default follows the environment)
        args.append(f"--broker-jit={options.broker_jit}")
    for jvm_arg in options.broker_jvm_args:
        args.append(f"--broker-jvm-arg={jvm_arg}")
    if options.faults is not None:
        args += ["--faults", ",".join(options.faults) if options.faults else "none"]
    if not options.probes:
        args.append("--no-probes")
    return shlex.join(args)
