"""Checks of command-line options that `run`, `campaign`, `qualify`, `cluster` and `selftest` share: each
refuses a bad value in one line (argparse's error, or a HarnessError) before anything starts. Its own
module, importing none of the commands, so that each command may use it (harness.cli imports the others)."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

from kipcheck.harness.errors import HarnessError


def positive(kind, zero: bool = False):
    """An argparse type: a finite number > 0 (>= 0 with `zero`); a bad value is argparse's one-line error, exit 2.
    float() reads 'nan' and 'inf', which pass every comparison with 0: a run of --duration nan would start its
    cluster and never stop, so they are refused here with the other bad numbers."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
        if value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(f"must be {'>=' if zero else '>'} 0, got {text}")
        return value
    parse.__name__ = kind.__name__
    return parse


def given_options(args, flags: dict[str, str]) -> list[str]:
    """The flags among `flags` (args field -> flag) the command line gave: its field away from the parser's
    default (None, False, 0 or an empty list). Every check that refuses an option nothing would read asks
    this, so "given" means one thing for all of them."""
    return [flag for field, flag in flags.items() if getattr(args, field, None) not in (None, False, 0, [])]


def refuse_unused(given: list[str], why: str) -> None:
    """One line saying why nothing would read the options given, and to drop them (a HarnessError, exit 2)."""
    if given:
        raise HarnessError(f"{why}: drop {', '.join(given)}")


#: an option only one backend reads -> that backend (`run` and `campaign`)
BACKEND_OPTIONS = {"bootstrap": ("--bootstrap", "external"), "hosts": ("--hosts", "ssh")}


#: options only a backend that starts its own Kafka nodes reads (its brokers' JVMs, its quorum's shape)
STARTING_OPTIONS = {"broker_jvm_args": "--broker-jvm-arg", "broker_jit": "--broker-jit", "controllers": "--controllers"}


def check_backend_options(args) -> None:
    """--bootstrap is the external backend's and --hosts the ssh backend's: with another backend they were
    silently unused (`--hosts cluster.json` without `--backend ssh` started a local cluster), so refused.
    So are the options of the brokers' JVMs and the quorum's shape with a backend that starts no Kafka
    (`--backend external` reaches a running cluster)."""
    for field, (flag, backend) in BACKEND_OPTIONS.items():
        if args.backend != backend:
            refuse_unused(given_options(args, {field: flag}), f"{flag} is for --backend {backend}, and this run's "
                          f"backend is {args.backend} (or add --backend {backend})")
    from kipcheck.harness.backends import registry
    if not registry.get(args.backend).capabilities.starts_kafka:
        refuse_unused(given_options(args, STARTING_OPTIONS),
                      f"--backend {args.backend} starts no Kafka node, so its JVMs and quorum take no option")


def check_directory(option: str, path: str | None) -> None:
    """A directory option (run's and selftest's --runs-dir, campaign's, qualify's and cluster up's --dir) is
    made only after Kafka is resolved and the backend reached (a Docker image built, a storage manager
    compiled): one that is, or lies under, a file would fail only then, as an internal error; it is
    refused first, one line."""
    if path is None:
        return
    for place in (Path(path), *Path(path).absolute().parents):
        if place.exists():
            if not place.is_dir():
                raise HarnessError(f"{option} {path}: {place} is not a directory")
            return
