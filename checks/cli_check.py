"""`kipcheck check RUN_OR_HISTORY [--engine local|spark] [--master M] [--profile P] [--json]`.

The CLI owner mounts it:  `add_check_arguments(subparsers.add_parser("check"))` and
dispatches to `run_check_command(args)`. Exit codes: 0 valid, 1 anomalies found,
2 error (bad input: one line on stderr), 3 unknown (undecided: no reads, budget)."""
from __future__ import annotations

import argparse
import json
import sys

from checks.api import ENGINES, check, write_verdict
from checks.history import HistoryError

EXIT_VALID, EXIT_ANOMALIES, EXIT_ERROR, EXIT_UNKNOWN = 0, 1, 2, 3


def add_check_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("path", metavar="RUN_OR_HISTORY",
                        help="run directory, history.jsonl or history.parquet")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: plain Python; spark: Spark job (default: local)")
    parser.add_argument("--master", default=None,
                        help="Spark master for --engine spark (default local[*]; e.g. spark://host:7077)")
    parser.add_argument("--profile", default=None,
                        help="model profile: kip or kafka-X.Y (default: from the run's config.json)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--out", default=None,
                        help="also write the verdict to this file (a directory gets verdict.json)")
    return parser


def summary(verdict: dict) -> str:
    lines = [f"valid: {verdict['valid']}  (profile {verdict['profile']}, "
             f"{verdict['counts']['records']} records, engine {verdict['engine']})"]
    if verdict.get("profile_note"):
        lines.append(f"  profile note: {verdict['profile_note']}")
    for section in ("anomalies", "known"):
        for name, examples in verdict[section].items():
            if examples:
                total = verdict["counts"][section][name]
                first = examples[0]
                lines.append(f"  {'known ' if section == 'known' else ''}{name}: {total}"
                             f"  e.g. indices {first['indices']}: {first['message']}")
    for reason in verdict.get("unknown", []):
        lines.append(f"  unknown: {reason['message']}")
    return "\n".join(lines)


def exit_code(verdict: dict) -> int:
    return {True: EXIT_VALID, False: EXIT_ANOMALIES}.get(verdict["valid"], EXIT_UNKNOWN)


def run_check_command(args: argparse.Namespace) -> int:
    try:
        verdict = check(args.path, engine=args.engine, master=args.master, profile=args.profile)
        if getattr(args, "out", None):
            write_verdict(verdict, args.out)
    except (HistoryError, ValueError, OSError) as e:
        print(f"kipcheck check: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ERROR
    print(json.dumps(verdict, indent=2) if args.json else summary(verdict))
    return exit_code(verdict)


def main(argv=None) -> int:
    parser = add_check_arguments(argparse.ArgumentParser(prog="kipcheck check"))
    return run_check_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
