"""`kipcheck check RUN_OR_HISTORY... [--engine local|spark] [--master M] [--profile P]
[--require-coverage SPEC] [--recovery-bound SECONDS] [--crash-loop N] [--json]`.

Several runs with `--engine spark` are judged in one Spark job (`checks.api.check_many`);
the exit code is then the worst of theirs (anomalies > unknown > valid).

The CLI owner mounts it:  `add_check_arguments(subparsers.add_parser("check"))` and
dispatches to `run_check_command(args)`. Exit codes: 0 valid, 1 anomalies found,
2 error (bad input: one line on stderr), 3 unknown (undecided: no reads, budget)."""
from __future__ import annotations

import argparse
import json
import sys

from kipcheck.checks.api import ENGINES
from kipcheck.errors import EXIT_ANOMALIES, EXIT_ERROR, EXIT_UNKNOWN, EXIT_VALID, exit_code


def add_check_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("paths", metavar="RUN_OR_HISTORY", nargs="+",
                        help="run directories, history.jsonl or history.parquet files")
    parser.add_argument("--engine", choices=ENGINES, default="local",
                        help="local: plain Python; spark: Spark job (default: local)")
    parser.add_argument("--master", default=None,
                        help="Spark master for --engine spark (default local[*]; e.g. spark://host:7077)")
    parser.add_argument("--profile", default=None,
                        help="model profile: kip or kafka-X.Y (default: from the run's config.json)")
    parser.add_argument("--require-coverage", default=None, metavar="N|RULE=N,...",
                        help="a valid verdict becomes unknown (exit 3) unless every judged KIP rule "
                             "(or each RULE named) had at least N observations (see verdict 'coverage')")
    add_liveness_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--out", default=None,
                        help="also write the verdict to this file (a directory gets verdict.json)")
    return parser


def add_liveness_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--recovery-bound and --crash-loop (shared by `kipcheck check` and `kipcheck run`);
    read them with `liveness_options`, which words a bad value as one line."""
    parser.add_argument("--recovery-bound", default=None, metavar="SECONDS",
                        help="slow-recovery when sends, ISR or reads take longer than this after a heal "
                             "(default: the run's recorded bound, derived from the cluster's timeouts)")
    parser.add_argument("--crash-loop", default=None, metavar="N",
                        help="client-crash-loop when clients crash more than N times in a row (default 5)")
    return parser


def liveness_options(args: argparse.Namespace) -> tuple[float | None, int | None]:
    """(recovery bound, crash-loop limit) from the arguments; ValueError (one line) when bad."""
    def positive(option, text, kind):
        if text is None:
            return None
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or value != value or value == float("inf"):
            raise ValueError(f"{option} must be a {'whole ' if kind is int else ''}number > 0, got {text!r}")
        return value
    return (positive("--recovery-bound", getattr(args, "recovery_bound", None), float),
            positive("--crash-loop", getattr(args, "crash_loop", None), int))


def liveness_line(verdict: dict) -> str | None:
    """One line on the liveness block: recovered / slow / undecided heals and crashes."""
    block = verdict.get("liveness")
    if not block:
        return None
    status: dict = {}
    for entry in block.get("faults", []):
        status[entry["status"]] = status.get(entry["status"], 0) + 1
    shown = ", ".join(f"{n} {s}" for s, n in sorted(status.items())) or "no heals"
    return (f"  liveness: {shown} (bound {block['bound']:g} s); client crashes: {block.get('client_crashes', 0)}")


def commits_line(verdict: dict) -> str | None:
    """One line on the subscribers' offset commits: by outcome, and where members resumed."""
    block = verdict.get("offset_commits")
    if not block or not (block.get("answers") or any((block.get("commits") or {}).values())):
        return None
    c = block.get("commits") or {}
    return (f"  offset commits: {c.get('applied', 0)} acknowledged, {c.get('refused', 0)} refused, "
            f"{c.get('maybe', 0)} open or unknown; resumes: {block.get('answers', 0)} (at the acknowledged "
            f"offset {block.get('at_floor', 0)}, ahead of it {block.get('ahead_of_floor', 0)}, no committed offset "
            f"{block.get('no_committed_offset', 0)}, redeliveries {block.get('redeliveries', 0)} "
            f"of {block.get('redelivered_offsets', 0)} offsets)")


def share_line(verdict: dict) -> str | None:
    """One line on the share group (KIP-932): polls, records acquired, acks by type, redeliveries."""
    block = verdict.get("share_groups")
    if not block or not block.get("polls"):
        return None
    acks = ", ".join(f"{k} {n}" for k, n in sorted((block.get("acks") or {}).items())) or "none"
    return (f"  share group: {block['polls']} polls, {block.get('records_acquired', 0)} records acquired "
            f"({block.get('records', 0)} distinct, {block.get('redeliveries', 0)} redeliveries); acks: {acks}; "
            f"pairs across consumers judged {block.get('pairs_judged', 0)}, not (fault) {block.get('pairs_not_judged_fault', 0)}; "
            f"deliveries after an accept judged {block.get('redeliveries_judged_accept_rule', 0)}, "
            f"not {block.get('redeliveries_not_judged_accept_rule', 0)}; "
            f"lock {block.get('lock_duration_ms')} ms, delivery limit {block.get('delivery_count_limit')}")


def deviation_lines(verdict: dict) -> list[str]:
    """Which of the profile's deviations accepted the known anomalies, and how many each."""
    by_deviation = verdict.get("counts", {}).get("by_deviation") or {}
    judged = verdict.get("judged_as")
    inherited = f" ({judged['short']})" if judged else ""
    return [f"  accepted as {d}{inherited}: " + ", ".join(f"{name} {n}" for name, n in sorted(row.items()))
            for d, row in by_deviation.items()]


def unknown_lines(verdict: dict) -> list[str]:
    """Why the verdict is unknown (undecided rules, a spent budget), a line each."""
    return [f"  unknown: {reason['message']}" for reason in verdict.get("unknown", [])]


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
    lines += deviation_lines(verdict) + unknown_lines(verdict)
    for line in (liveness_line(verdict), commits_line(verdict), share_line(verdict)):
        if line:
            lines.append(line)
    judged = {rid: row for rid, row in (verdict.get("coverage") or {}).items() if row["observations"] is not None}
    if judged:
        never = sorted(rid for rid, row in judged.items() if row["observations"] == 0)
        lines.append(f"  coverage: {len(judged) - len(never)} of {len(judged)} judged KIP rules exercised"
                     + (f"; never: {', '.join(never)}" if never else ""))
    lines += conformance_lines(verdict)
    return "\n".join(lines)


def conformance_lines(verdict: dict) -> list[str]:
    """The verdict's per-KIP conformance table as terminal lines (none for an older verdict)."""
    from kipcheck.checks.conformance import CONFORMANCE, table_lines  # the rules: not for a command line's parse
    table = verdict.get(CONFORMANCE)
    return ["  conformance (per KIP rule):", *table_lines(table)] if table else []


def worst_exit_code(verdicts) -> int:
    codes = {exit_code(v) for v in verdicts}
    return next(c for c in (EXIT_ANOMALIES, EXIT_UNKNOWN, EXIT_VALID) if c in codes)


def run_check_command(args: argparse.Namespace) -> int:
    from kipcheck.checks.api import check_many, write_verdict  # Arrow: not for a command line's parse
    from kipcheck.rundir.history import HistoryError
    try:
        if args.out and len(args.paths) > 1:
            raise ValueError("--out takes one run; with several, each verdict is printed (use --json)")
        bound, crash_loop = liveness_options(args)
        verdicts = check_many(args.paths, engine=args.engine, master=args.master, profile=args.profile,
                              require_coverage=args.require_coverage, recovery_bound=bound, crash_loop=crash_loop)
        if args.out:
            write_verdict(verdicts[0], args.out)
    except (HistoryError, ValueError, OSError) as e:
        print(f"kipcheck check: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ERROR
    if len(verdicts) == 1:
        print(json.dumps(verdicts[0], indent=2) if args.json else summary(verdicts[0]))
    elif args.json:
        print(json.dumps({"runs": dict(zip(map(str, args.paths), verdicts))}, indent=2))
    else:
        print("\n".join(f"{path}\n{summary(v)}" for path, v in zip(args.paths, verdicts)))
    return worst_exit_code(verdicts)


def main(argv=None) -> int:
    parser = add_check_arguments(argparse.ArgumentParser(prog="kipcheck check"))
    return run_check_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
