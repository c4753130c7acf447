"""The one `kipcheck run` command line that repeats a run: in config.json, the report and
campaign summaries. Only options that differ from the defaults are spelled out."""
from __future__ import annotations

import shlex

#: RunOptions field -> its `kipcheck run` flag (a True boolean is the bare flag)
_FLAGS = {"duration": "--duration", "backend": "--backend", "bootstrap": "--bootstrap",
          "kafka_version": "--kafka-version", "kafka_home": "--kafka-home", "brokers": "--brokers",
          "controllers": "--controllers", "intensity": "--intensity", "engine": "--engine",
          "profile": "--profile", "tiered": "--tiered", "require_coverage": "--require-coverage",
          "upgrade_from": "--upgrade-from", "upgrade_to": "--upgrade-to"}


def reproduce_command(options) -> str:
    """`kipcheck run --seed S ...` for a harness.run.RunOptions (the seed always)."""
    default = type(options)()  # a RunOptions of the defaults
    args = ["kipcheck", "run", "--seed", str(options.seed)]
    for field, flag in _FLAGS.items():
        value = getattr(options, field, None)
        if value == getattr(default, field, None) or value is None:
            continue
        if value is True:
            args.append(flag)
        elif value is not False:
            args += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if options.faults is not None:
        args += ["--faults", ",".join(options.faults) if options.faults else "none"]
    if not options.probes:
        args.append("--no-probes")
    return shlex.join(args)
