"""The per-KIP conformance table of a verdict, and the release summary built from many.

For each KIP rule the checker judges (checks.coverage.OBSERVED, grouped by KIP) one status:

* "fails": some anomaly of that rule (an anomaly names its model rule: checks.rules.base.RULE);
* "not in this release": the run's release lacks the KIP's feature (config.json `features`,
  harness.backends.releases), and no anomaly says otherwise (under `--profile kip` the absence of a
  KIP's behaviour is flagged, so the row fails);
* "known deviation": only deviations the profile accepts (for a release newer than every read
  profile, judged under the newest one, the row says they are inherited, not confirmed);
* "not asked": no observation could have broken the rule: the broker could not be asked
  (config.json `skipped`, harness.clients.capabilities) or the history holds none;
* "undecided": observations, but fewer than the rule needs to decide anything (the KIP-1166
  statistic below its 20 changes: checks.coverage.MINIMUM_SAMPLE);
* "holds": observed (the coverage count), no anomaly.

A status is computed from counts alone (`status`), so tables of several runs of one release
merge by adding counts (`merge`), and the release summary is those merged tables side by
side. Pure: the run's config.json is read by `run_context` before the engines judge.
"""
from __future__ import annotations

from pathlib import Path

from kipcheck.rundir import config as run_config

from kipcheck.checks.coverage import OBSERVED, model_rules
from kipcheck.reference_model.profiles import inherited

#: the verdict key of the table
CONFORMANCE = "conformance"
#: NOT_IN_RELEASE is also config.json's `features` value for a feature the release lacks
#: (harness.backends.releases.NOT_IN_RELEASE, the same words)
FAILS, NOT_IN_RELEASE, KNOWN, NOT_ASKED, HOLDS = "fails", "not in this release", "known deviation", "not asked", "holds"
UNDECIDED = "undecided"
STATUSES = (HOLDS, FAILS, KNOWN, NOT_ASKED, UNDECIDED, NOT_IN_RELEASE)

#: a config.json `skipped` key (its part before "@") -> the judged rules only that probe or
#: workload feature observes (the keys are harness.clients.capabilities'). A rule with some
#: observations still holds; the skip is then named as a limit of what was asked.
SKIPPED_RULES = {
    "prober.kip392_cases": ("kip392.records_committed", "kip392.read_value_committed",
                            "kip392.consumer_fetch_outcomes", "kip392.hwm_may_go_back"),
    "prober.fetch_session": tuple(r for r in OBSERVED if r.startswith("kip227.")),
    "prober.list_offsets": ("kip1023.offset_order",),
    "prober.offsets_for_leader_epoch": ("kip392.epoch_end_offset_possible",),
    "observer.metadata_propagation": ("kip1166.propagation_statistic",),
    "consumer.follower_fetching": ("kip392.preferred_read_replica_outcomes",),
    "harness.metadata_log": ("kip966.may_lead",),
    "prober.list_offsets@-3": ("kip734.max_timestamp_answer_allowed",),
    "workload.log_append_time": ("kip32.append_time_allowed", "kip32.offset_for_time_allowed",
                                 "kip734.max_timestamp_answer_allowed"),
}


def run_context(path: str | Path) -> dict | None:
    """What the table needs from the run's config.json (`rundir.config`): {"kafka_version",
    "skipped", "features"}; None for a history without one (nothing skipped, every feature assumed)."""
    data = run_config.load(path)
    if not data:
        return None
    return {"kafka_version": data.get("kafka_version"), "skipped": list(data.get("skipped") or []),
            "features": dict(data.get("features") or {})}


def kip_of(rule: str) -> str:
    """"kip1023.offset_order" -> "KIP-1023"; a rule of another module (transactions) -> the
    first KIP its docstring names ("KIP-98")."""
    module = rule.split(".", 1)[0]
    if module.startswith("kip"):
        return "KIP-" + module[len("kip"):]
    return model_rules()[rule]["kip"].split(" / ")[0]


def conformance_table(verdict: dict, context: dict | None = None) -> dict[str, dict[str, dict]]:
    """{KIP: {rule: row}} for every judged rule, from the verdict's coverage and per-rule
    anomaly counts and the run's `context` (`run_context`)."""
    context = context or {}
    coverage = verdict.get("coverage") or {}
    by_rule = (verdict.get("counts") or {}).get("by_rule") or {}
    lacking = {f"KIP-{name[len('kip-'):]}": name for name, state in (context.get("features") or {}).items()
               if name.startswith("kip-") and state == NOT_IN_RELEASE}
    version = context.get("kafka_version")
    judged = inherited(version)  # a release newer than every read profile: its deviations are inherited
    inherited_from = judged["short"] if judged and verdict.get("profile") == judged["profile"] else None
    meta = model_rules()
    table: dict[str, dict[str, dict]] = {}
    for rule in OBSERVED:
        kip = kip_of(rule)
        counts = by_rule.get(rule) or {}
        row = {"section": meta[rule]["section"],
               "observations": (coverage.get(rule) or {}).get("observations") or 0,
               "undecided": (coverage.get(rule) or {}).get("undecided"),
               "anomalies": dict(counts.get("anomalies") or {}), "known": dict(counts.get("known") or {}),
               "deviations": dict(counts.get("deviations") or {}),
               "not_asked": [f"{s.get('feature')}: {s.get('reason')}" for s in context.get("skipped") or []
                             if rule in SKIPPED_RULES.get(str(s.get("key", "")).split("@", 1)[0], ())],
               "not_in_release": (f"{lacking[kip]} is not in Kafka {version}" if kip in lacking else None),
               "inherited": inherited_from}
        table.setdefault(kip, {})[rule] = with_status(row)
    return table


def with_status(row: dict) -> dict:
    """The row with its `status` and a one-line `why`, from its counts alone."""
    def named(counts):
        return ", ".join(f"{name} x{n}" for name, n in sorted(counts.items()))
    n = row["observations"]
    if row["anomalies"]:
        status, why = FAILS, named(row["anomalies"])
    elif row["not_in_release"]:
        status, why = NOT_IN_RELEASE, row["not_in_release"]
    elif row["known"]:
        accepted = sorted(row.get("deviations") or {})
        status, why = KNOWN, named(row["known"]) + (f", accepted as {', '.join(accepted)}" if accepted else "") + (
            f" ({row['inherited']})" if row.get("inherited") else "")
    elif n == 0 and row.get("undecided"):
        status, why = UNDECIDED, f"too few observations: {row['undecided']}"
    elif n == 0:
        status, why = NOT_ASKED, "no observation in the history" + (
            f"; not asked: {'; '.join(row['not_asked'])}" if row["not_asked"] else "")
    else:
        status = HOLDS
        why = f"{n} observation{'' if n == 1 else 's'}" + (
            f" (partly not asked: {'; '.join(row['not_asked'])})" if row["not_asked"] else "")
    return {**row, "status": status, "why": why}


def merge(tables: list[dict]) -> dict[str, dict[str, dict]]:
    """Several runs' tables as one (e.g. every run of one release): counts added, a rule
    not in the release only if no run's release had it, skips of every run listed."""
    out: dict[str, dict[str, dict]] = {}
    for table in tables:
        for kip, rows in table.items():
            for rule, row in rows.items():
                acc = out.setdefault(kip, {}).get(rule)
                if acc is None:
                    out[kip][rule] = {**row, "anomalies": dict(row["anomalies"]), "known": dict(row["known"]),
                                      "deviations": dict(row.get("deviations") or {}),
                                      "not_asked": list(row["not_asked"])}
                    continue
                acc["observations"] += row["observations"]
                acc["undecided"] = acc.get("undecided") if row.get("undecided") else None
                for key in ("anomalies", "known", "deviations"):
                    for name, n in (row.get(key) or {}).items():
                        acc[key][name] = acc[key].get(name, 0) + n
                acc["not_asked"] += [r for r in row["not_asked"] if r not in acc["not_asked"]]
                acc["not_in_release"] = acc["not_in_release"] if row["not_in_release"] else None
                acc["inherited"] = acc.get("inherited") or row.get("inherited")
    return {kip: {rule: with_status(row) for rule, row in rows.items()} for kip, rows in out.items()}


def release_summary(columns: dict[str, list[dict]]) -> dict:
    """The conformance tables side by side: `columns` maps a release (column label) to the
    verdicts of its runs. {"releases": [...], "rules": {KIP: {rule: {release: row}}}}."""
    merged = {label: merge([v[CONFORMANCE] for v in verdicts if v and v.get(CONFORMANCE)])
              for label, verdicts in columns.items()}
    rules: dict[str, dict[str, dict]] = {}
    for rule in OBSERVED:
        kip = kip_of(rule)
        rules.setdefault(kip, {})[rule] = {label: (table.get(kip) or {}).get(rule) for label, table in merged.items()}
    runs = {label: len([v for v in verdicts if v]) for label, verdicts in columns.items()}
    judged_by = {label: sorted({v.get("profile") for v in verdicts if v and v.get("profile")})
                 for label, verdicts in columns.items()}
    return {"releases": list(columns), "runs": runs, "profiles": judged_by, "rules": rules}


def summary_markdown(summary: dict) -> str:
    """The release summary as a Markdown table: one row per KIP rule, one column per release."""
    releases = summary["releases"]
    head = "| KIP | rule | " + " | ".join(f"{r} ({summary['runs'][r]} run{'' if summary['runs'][r] == 1 else 's'})"
                                             for r in releases) + " |"
    lines = ["# KIP conformance per release", "",
             "Statuses: holds (observed, no anomaly), fails (anomalies named), known deviation "
             "(only deviations the release's profile accepts), not asked (nothing observed), undecided (too few "
             "observations to decide), "
             "not in this release (the release lacks the KIP's feature).", "",
             "Profiles: " + "; ".join(f"{r}: {', '.join(summary['profiles'].get(r) or ['none'])}" for r in releases)
             + ".", "", head, "|" + " --- |" * (2 + len(releases))]
    for kip, rows in summary["rules"].items():
        for rule, cells in rows.items():
            shown = [_cell(cells.get(r)) for r in releases]
            lines.append(f"| {kip} | {rule.split('.', 1)[1]} | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def _cell(row: dict | None) -> str:
    if row is None:
        return "no verdict"
    if row["status"] in (FAILS, KNOWN):
        return f"{row['status']}: {row['why']}"
    if row["status"] == HOLDS:
        return f"holds ({row['observations']})"
    return row["status"]


def table_lines(table: dict[str, dict[str, dict]]) -> list[str]:
    """The table as terminal lines (`kipcheck check`, `kipcheck run`)."""
    width = max((len(rule.split(".", 1)[1]) for rows in table.values() for rule in rows), default=0)
    return [f"    {kip:<9} {rule.split('.', 1)[1]:<{width}}  {row['status']:<19}  {row['why']}"
            for kip, rows in table.items() for rule, row in rows.items()]
