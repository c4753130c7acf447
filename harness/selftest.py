"""`kipcheck selftest`: the detection matrix. Seeded broker bugs must be flagged by name.

One cluster whose brokers carry every seeded bug (harness.backends.seeded), all off. Then one window
per bug, after a control window with none: a fresh topic, the bug switched on, the usual
workload (one idempotent and one non-idempotent acks=all producer, a rack-aware consumer;
none for a bug whose slip no client reaches, `SeededBug.clients`; subscribers that rejoin within
seconds for a slip seen only at an assignment, `SeededBug.rejoin_after_s` (and `rejoin_gap_s`), and then in the control
too; share consumers beside them for a KIP-932 slip, on a LogAppendTime topic, and then in the control
too, `window_workload`), the raw-protocol prober
and the metadata observer (the brokers' KIP-848 session timeout is short, `SELFTEST_GROUP_CONFIG`, so that
slow-rebalance's bound fits a window) for `window` seconds, the bug switched off,
final reads from the beginning, and the window's own history checked under `kip` and the
version's profile. A bug that never fired is "not exercised", never "caught"; one whose
Kafka method the agent did not find is "not installable".
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from kipcheck.faults.plan import FaultPlan
from kipcheck.rundir import config as run_config
from kipcheck.harness import metadata_log
from kipcheck.harness.backends import seeded
from kipcheck.harness.backends.cluster import ClusterOptions, NativeCluster
from kipcheck.rundir.writer import History
from kipcheck.harness.backends.kafka_dist import resolve
from kipcheck.harness.clients.workload import WorkloadOptions, final_read
from kipcheck.harness.session import RunContext, create_topic, drive, follower_rack
from kipcheck.rundir.records import JSONL_NAME

CONTROL = "control"
PROPAGATION_ANOMALY = "hwm-propagation-delay"  # KIP-1166's anomaly: its windows need the statistic's sample
PRODUCER_MODES = (("all", True), ("all", False))  # a non-idempotent retry is how `duplicate` shows
#: the selftest brokers' KIP-848 timeouts: slow-rebalance's bound is their sum (checks.recovery.group_liveness_rule),
#: 22 s instead of Kafka's 50 s, so a short window judges a freed partition; the minimums are lowered to allow them.
#: The session outlasts a subscriber's stall in its assign callback (the OffsetFetch's 10 s timeout,
#: commits.COMMITTED_TIMEOUT_S, with no heartbeat sent meanwhile): at 10 s such a member was fenced and then
#: revoked as an ordinary revocation, two owners in a healthy control (2026-11-29)
SELFTEST_GROUP_CONFIG = (("group.consumer.min.session.timeout.ms", "20000"), ("group.consumer.session.timeout.ms", "20000"),
                         ("group.consumer.min.heartbeat.interval.ms", "2000"),
                         ("group.consumer.heartbeat.interval.ms", "2000"))
SHARE = "share"  # the KIP-932 slips' workload (harness.clients.share_workload)
# The share windows' consumers (and the control's) stall on 10 in 100 of their polls that returned a first delivery
# (the workload's default: 3 in 100 of any poll), half of the stalls for 2.5 s (inside the 5 s lock) and half for 6 s
# (past it, the lock lapses the other share rules judge). A consumer acknowledges within milliseconds of its poll
# otherwise, and a second consumer's delivery is proven inside the first one's lock only while the first holds the
# record, within 5 s of its append. Stalling on any poll, every stall 6 s, 15 in 100 (until 2026-11-29): most polls
# are single old records near the delivery limit (Kafka hands those out one at a time), the consumers were stalled
# most of the time, both members of a share-partition often at once, and share-double-acquire was missed in 1 of 3
# suite matrices (CI, 411 fires). The producers send 300 records/s in all (the workload's default: 2500): the share
# consumers keep up, a record is acquired moments after its append and its LogAppendTime bounds the acquisition
# closely; at 2500/s they lagged by seconds and a stalled poll's records were older than one lock
SHARE_OPTIONS = {"share_stall": 0.10, "share_stall_ms": (2500, 6000), "share_stall_fresh_only": True, "rate": 300.0}


def run_matrix(kafka_version: str | None = None, kafka_home: str | None = None, window: float = 20.0,
               bugs: list[str] | None = None, out_dir: str | Path = "runs", ui=None) -> dict:
    """Run the matrix; return {"kafka_version", "profiles", "window", "rows": [...]} (also matrix.json)."""
    from kipcheck.checks.profiles import profile_for_version
    from kipcheck.harness.progress import ProgressUI
    ui = ui or ProgressUI(quiet=True)
    names = list(bugs) if bugs else [b.name for b in seeded.BUGS]
    for n in names:
        seeded.bug(n)
    with ui.step("resolving Kafka and the seeded-bug agent"):
        dist = resolve(kafka_version, kafka_home)
        jar = seeded.agent_jar()
    root = Path(out_dir) / f"selftest-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    root.mkdir(parents=True)
    ui.note(f"selftest directory {root}")
    control = root / "seeded-bugs.control"
    seeded.switch(control, None)
    profiles = list(dict.fromkeys(["kip", profile_for_version(dist.version)]))
    matrix = {"kafka_version": dist.version, "profiles": profiles, "window": window, "rows": [],
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    share = window_workload(CONTROL, names) == SHARE
    cluster = NativeCluster(dist, root / "cluster",
                            ClusterOptions(brokers=3, broker_jvm_args=seeded.jvm_args(jar, control),
                                           tiered=any(seeded.bug(n).tiered for n in names),
                                           # KIP-848's short session; the share workload's lock and delivery
                                           # limit, as `kipcheck run` sets them
                                           extra_config=SELFTEST_GROUP_CONFIG + (
                                               WorkloadOptions(workload=SHARE).share_broker_config() if share else ())),
                            owner_pid=os.getpid())
    matrix["broker_jit"] = cluster.options.jit  # what the windows' timings depend on (harness.backends.node.JIT_FLAGS)
    try:
        with ui.step(f"starting 3 Kafka {dist.version} brokers carrying the seeded bugs"):
            cluster.up(progress=ui.substep)
        # KIP-1166's statistic needs 20 metadata changes, which a short window has only when it goes on
        # past its length (session.gather_propagation_sample): only the windows that judge it wait for
        # them, the control too when a KIP-1166 bug is in the matrix (its `kip` column is read against
        # the control's); every other bug is flagged by another rule within seconds
        kip1166_judged = {n for n in names if seeded.bug(n).anomaly == PROPAGATION_ANOMALY}
        if kip1166_judged:
            kip1166_judged.add(CONTROL)
        for name in [CONTROL, *names]:
            with ui.step(f"window: {name}"):
                # the control's topic is tiered when any bug's is, so that it covers what they run on
                tiered = cluster.options.tiered if name == CONTROL else seeded.bug(name).tiered
                seconds = window_seconds(name, names, window)
                row = _window(cluster, control, root / name, None if name == CONTROL else name, seconds, profiles,
                              dist.version, tiered, ui, propagation_sample=name in kip1166_judged,
                              rejoin=window_rejoin(name, names), rejoin_gap=window_rejoin_gap(name, names),
                              workload=window_workload(name, names))
            row["status"] = status(row, profiles, _control(matrix))
            matrix["rows"].append(row)
            (root / "matrix.json").write_text(json.dumps(matrix, indent=2))
    finally:
        seeded.switch(control, None)
        if cluster.state is not None:
            with ui.step("stopping the cluster"):
                cluster.down()
    matrix["dir"] = str(root)
    (root / "matrix.json").write_text(json.dumps(matrix, indent=2))
    return matrix


def window_rejoin(name: str, names) -> tuple[float, float] | None:
    """A window's subscriber stays (`WorkloadOptions.rejoin_after_s`; None: the workload's own): the
    bug's, and for the control the shortest of the matrix's bugs', so that a commit anomaly in
    their windows cannot come from the short stays alone (as the control's topic is tiered)."""
    if name != CONTROL:
        return seeded.bug(name).rejoin_after_s
    return min((seeded.bug(n).rejoin_after_s for n in names if seeded.bug(n).rejoin_after_s), default=None)


def window_rejoin_gap(name: str, names) -> float:
    """A window's pause between a subscriber's memberships (`WorkloadOptions.rejoin_gap_s`): the bug's; for
    the control that of a bug whose stays it takes (`window_rejoin`), the shortest, so that the control
    hands partitions over as that window does and its rejoin rate is never below another's."""
    if name != CONTROL:
        return seeded.bug(name).rejoin_gap_s
    stays = window_rejoin(CONTROL, names)
    return min((seeded.bug(n).rejoin_gap_s for n in names if stays and seeded.bug(n).rejoin_after_s == stays),
               default=0.0)


def window_seconds(name: str, names, window: float) -> float:
    """A window's length: at least its bug's `min_window`; the control's at least that of every bug whose
    workload it runs (a share slip's: its share consumers first wait seconds for their assignment)."""
    if name != CONTROL:
        return max(window, seeded.bug(name).min_window)
    workload = window_workload(CONTROL, names)
    return max([window, *(seeded.bug(n).min_window for n in names
                          if workload != "default" and seeded.bug(n).workload == workload)])


def window_workload(name: str, names) -> str:
    """A window's workload: the bug's; for the control the share workload when a share slip is in the
    matrix (the default workload's producers and consumers with the share consumers beside them), so
    that a share anomaly in a share slip's window cannot be one a healthy Kafka shows too."""
    if name != CONTROL:
        return seeded.bug(name).workload
    return SHARE if any(seeded.bug(n).workload == SHARE for n in names) else "default"


def _window(cluster, control: Path, wdir: Path, name: str | None, window: float, profiles, version, tiered: bool,
            ui, propagation_sample: bool, rejoin: tuple[float, float] | None = None, rejoin_gap: float = 0.0,
            workload: str = "default") -> dict:
    from kipcheck.checks.api import check_under, write_verdict
    from kipcheck.harness.run import RunOptions, group_protocol
    wdir.mkdir(parents=True)
    topic = f"seed-{name or CONTROL}"
    no_clients = name is not None and not seeded.bug(name).clients
    w = WorkloadOptions(topic=topic, producer_modes=PRODUCER_MODES,
                        **({"producers": 0, "consumers": 0} if no_clients else {}),
                        **({"rejoin_after_s": rejoin, "rejoin_gap_s": rejoin_gap} if rejoin else {}),
                        workload=workload, **(SHARE_OPTIONS if workload == SHARE else {}),
                        group_protocol=group_protocol(None, version))  # the release's, as a run's: KIP-848 from 4.0
    ctx = RunContext(cluster, topic)
    # the share rules bound each acquisition by its record's LogAppendTime (the brokers share this machine's
    # clock); without a stamp only by the consumer's start, which leaves the lock rule blind after one lock
    parts = create_topic(ctx, topic, w.partitions, 3, tiered, log_append_time=workload == SHARE)
    for extra in w.topics[1:]:  # a transaction slip's window runs the txn workload (its topics)
        create_topic(ctx, extra, w.partitions, 3, tiered)
    rack = follower_rack(cluster, parts)
    run_config.write(wdir, run_config.RunConfig(kafka_version=version, seeded_bug=name, window=window,
                                                workload={"topic": topic}, consumer_rack=rack, racks=cluster.racks(),
                                                consumer_groups=cluster.consumer_group_settings()))
    node_dirs = [n.dir for n in cluster.brokers]
    before = seeded.read_reports(node_dirs)["fired"].get(name, 0) if name else 0
    history = History(wdir / JSONL_NAME)
    provocation = _Provocation(cluster, topic, seeded.bug(name).provoke) if name and seeded.bug(name).provoke else None
    try:
        seeded.switch(control, name)
        time.sleep(0.6)  # every broker polls the control file each 200 ms
        t_on, t_on_wall = history.now(), time.time()  # the bug is on, on the history's clock and the wall's
        opts = RunOptions(duration=window, workload=w)
        started = time.monotonic()
        if provocation:
            provocation.start()
        drive(cluster, ctx, opts, FaultPlan.of(()), history, rack, ui, propagation_sample=propagation_sample)
        provoked = provocation.result() if provocation else None
        driven = time.monotonic() - started  # the window's length, KIP-1166's wait for its sample included
        seeded.switch(control, None)
        time.sleep(0.6)
        final_read(cluster.bootstrap_servers(), w, history, timeout=30)
        # the controller's decisions about this window's topics (KIP-966's election rule)
        metadata_log.record(history, cluster.nodes, topics={topic, *w.topics, *(provoked or {}).get("topics", ())})
    finally:
        seeded.switch(control, None)
        history.close()
    time.sleep(0.6)  # one more agent report after the window
    report = seeded.read_reports(node_dirs)
    row = {"bug": name or CONTROL, "window_dir": str(wdir), "window": window, "driven": round(driven, 1), "fires": 0,
           "flagged": {}, "valid": {}, "seconds_to_detection": {}, **({"provoked": provoked} if provoked else {}),
           **({"rejoin_after_s": list(rejoin)} if rejoin else {}), **({"rejoin_gap_s": rejoin_gap} if rejoin_gap else {})}
    if name:
        b = seeded.bug(name)
        row.update(kafka_method=b.kafka_method, rule=b.rule, slip=b.slip, anomaly=b.anomaly,
                   fires=report["fired"].get(name, 0) - before, installed=name in report["installed"],
                   missing=report["missing"].get(name))
    from kipcheck.rundir.history import iter_history
    from kipcheck.checks.rules.kip1166_rules import propagation_summary
    # the KIP-1166 figures whatever the verdict: a miss then says why (too few changes, short lags)
    row["kip1166"] = propagation_summary([r for r in iter_history(wdir / JSONL_NAME)
                                          if r.get("f") in ("metadata_propagation", "fault")])
    for p, verdict in zip(profiles, check_under(wdir, profiles)):  # the window read once for all its profiles
        write_verdict(verdict, wdir / f"verdict-{p}.json")
        row["valid"][p] = verdict["valid"]
        row["flagged"][p] = sorted(k for k, v in verdict["anomalies"].items() if v)
        row.setdefault("counts", {})[p] = {k: n for k, n in verdict["counts"]["anomalies"].items() if n}
        row.setdefault("known", {})[p] = sorted(k for k, v in verdict["known"].items() if v)
        if name:
            row["seconds_to_detection"][p] = _detection_seconds(wdir, verdict["anomalies"].get(row["anomaly"]) or [],
                                                                t_on, t_on_wall)
    return row


def _detection_seconds(wdir: Path, examples: list[dict], bug_on_ns: int, bug_on_wall: float) -> float | None:
    """Seconds from the bug switching on to the record completing the earliest proof of it; for a
    proof from the controller's metadata log (read after the window), to the controller's own
    time of the change (`log_time_ms`, the same machine's wall clock)."""
    if not examples:
        return None
    logged = [e["log_time_ms"] / 1e3 for e in examples if e.get("log_time_ms")]
    if logged:
        return round(max(0.0, min(logged) - bug_on_wall), 2)
    wanted = {max(e["indices"]) for e in examples if e.get("indices")}
    times = {}
    with open(wdir / JSONL_NAME) as f:
        for line in f:
            rec = json.loads(line)
            if rec["index"] in wanted:
                times[rec["index"]] = rec["time"]
    return round(max(0, min(times.values()) - bug_on_ns) / 1e9, 2) if times else None


class _Provocation(threading.Thread):
    """A bug window's provocation (harness.provocations), beside the workload; its result or its error."""

    def __init__(self, cluster, topic: str, kind: str):
        super().__init__(name=f"provoke-{kind}", daemon=True)
        self.cluster, self.topic, self.kind = cluster, topic, kind
        self.stop = threading.Event()
        self.outcome: dict = {}

    def run(self):
        from kipcheck.harness.provocations import PROVOCATIONS
        try:
            done = PROVOCATIONS[self.kind](self.cluster, self.topic, self.stop)
            self.outcome = {"kind": self.kind, **done, "topics": [done["topic"]]}
        except Exception as e:  # the window goes on: the row says why nothing was provoked
            self.outcome = {"kind": self.kind, "error": str(e) or type(e).__name__}

    def result(self, timeout: float = 120.0) -> dict:
        """Wait for the provocation to end (it heals what it did); past `timeout`, ask it to stop."""
        self.join(timeout)
        if self.is_alive():
            self.stop.set()
            self.join(30)
        return self.outcome


def _control(matrix: dict) -> dict | None:
    return next((r for r in matrix["rows"] if r["bug"] == CONTROL), None)


def kip_evidence(row: dict, profiles, control: dict | None) -> bool | None:
    """Whether the `kip` column counts as evidence of the bug's own anomaly (issue 21 §4).

    Under `kip` a healthy Kafka already shows some names (its release's deviations: the
    control row). For such a name the bug's window is evidence only when it flagged more of
    it than the control did (scaled to the seconds each drove the workload: only the control and the
    KIP-1166 windows wait past their length for KIP-1166's sample); None when the control does not
    show the name under `kip` (then flagged or not is the evidence, as for every other name)."""
    kip = profiles[0]
    name = row.get("anomaly")
    if control is None or name not in control.get("flagged", {}).get(kip, []):
        return None
    baseline = control.get("counts", {}).get(kip, {}).get(name)
    mine = row.get("counts", {}).get(kip, {}).get(name, 0)
    if baseline is None:  # a matrix measured before the counts were kept
        return False
    length = "driven" if "driven" in row and control.get("driven") else "window"  # older matrices: nominal
    scale = row.get(length, 1) / (control.get(length) or row.get(length, 1))
    return mine > baseline * scale


def status(row: dict, profiles, control: dict | None = None) -> str:
    """caught / missed / not exercised / not installable for a bug row; valid / invalid for the control.

    A bug is caught when its own anomaly is flagged under the version's profile and under
    `kip`; for a name the control (`control`, the no-bug window) already shows under `kip`,
    the `kip` column is evidence only when its count exceeds the control's
    (`kip_evidence`), and otherwise the version's profile alone decides."""
    if row["bug"] == CONTROL:
        # valid under the version's profile; under `kip` only that profile's known deviations
        # (a healthy Kafka is not the KIP text: docs/checker.md, reference_model/profiles.py)
        version_profile = profiles[-1]
        explained = set(row.get("known", {}).get(version_profile, []))
        kip_ok = all(row["valid"][p] is True or set(row["flagged"].get(p, [])) <= explained for p in profiles)
        return "valid" if row["valid"][version_profile] is True and kip_ok else "INVALID"
    if not row.get("installed"):
        return "not installable" if row.get("missing") else "not installed (class never loaded)"
    if row["fires"] <= 0:
        return "not exercised"
    caught = [p for p in profiles if row["anomaly"] in row["flagged"][p]]
    if kip_evidence(row, profiles, control) is not None and profiles[-1] in caught:
        return "caught"  # under kip the control shows the name too: the version's profile decides
    if len(caught) == len(profiles):
        return "caught"
    return f"caught under {caught[0]} only" if caught else "MISSED"


COLUMNS = ("bug", "Kafka method", "rule broken", "anomaly expected", "flagged (kip)", "flagged ({p})",
           "fires", "s to detection", "status")


def _kip_cell(r: dict, profiles, control: dict | None) -> str:
    """The `kip` column: the names flagged, the bug's own one with its count against the
    control's when the control shows it too (`kip_evidence`)."""
    kip = profiles[0]
    names = list(r["flagged"].get(kip, []))
    evidence = None if r["bug"] == CONTROL else kip_evidence(r, profiles, control)
    if evidence is not None and r["anomaly"] in names:
        mine = r.get("counts", {}).get(kip, {}).get(r["anomaly"], 0)
        base = (control or {}).get("counts", {}).get(kip, {}).get(r["anomaly"], "?")
        names[names.index(r["anomaly"])] = (f"{r['anomaly']} ({mine} {'>' if evidence else '<='} control's {base}"
                                            + ("" if evidence else ": not evidence") + ")")
    return ", ".join(names) or "-"


def table_rows(matrix: dict) -> list[list[str]]:
    profiles = matrix["profiles"]
    kip, prof = profiles[0], profiles[-1]
    control = _control(matrix)
    out = []
    for r in matrix["rows"]:
        det = r.get("seconds_to_detection", {})
        out.append([r["bug"], r.get("kafka_method", "-"), r.get("rule", "-"), r.get("anomaly", "(none: control)"),
                    _kip_cell(r, profiles, control), ", ".join(r["flagged"].get(prof, [])) or "-",
                    str(r["fires"]), "/".join("-" if det.get(p) is None else f"{det[p]:g}" for p in (kip, prof))
                    if r["bug"] != CONTROL else "-", r["status"]])
    return out


def format_text(matrix: dict) -> str:
    header = [c.format(p=matrix["profiles"][-1]) for c in COLUMNS]
    rows = table_rows(matrix)
    widths = [max(len(x) for x in col) for col in zip(header, *rows)]
    widths[1] = min(widths[1], 60)
    widths[2] = min(widths[2], 50)
    fmt = lambda cells: "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths)).rstrip()
    return "\n".join([f"Kafka {matrix['kafka_version']}, windows of {matrix['window']:g} s, profiles "
                      f"{' and '.join(matrix['profiles'])}", fmt(header), *(fmt(r) for r in rows)])


def format_markdown(matrix: dict) -> str:
    header = [c.format(p=matrix["profiles"][-1]) for c in COLUMNS]
    lines = ["# Detection matrix (measured)", "",
             "Generated by `kipcheck selftest --markdown docs/detection.md` from a measured run: do not edit by hand.",
             "Each seeded broker bug (harness/backends/seeded.py, agent in harness/backends/seeded_bugs/) was switched on alone in one "
             "cluster for one window; the window's history was checked under both profiles. \"s to detection\" is "
             "the time from the bug switching on to the record completing its earliest proof (kip / version "
             "profile). Timing figures come from a shared 2-core machine and are noisy. Only the control and the "
             "KIP-1166 windows go on past their length until KIP-1166's statistic has its 20 metadata changes; "
             "every other bug is judged on its window alone.", "",
             f"Kafka {matrix['kafka_version']}; windows of {matrix['window']:g} s"
             + "".join(f" ({r['bug']}: {r['window']:g} s, its minimum)" for r in matrix["rows"]
                       if r.get("window", matrix["window"]) != matrix["window"])
             + f"; run started {matrix.get('started')}.",
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in table_rows(matrix):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    lines += ["", "Under `kip` a healthy Kafka already shows its release's known deviations (the control row); "
              "the control is valid when it is valid under the version's profile and its `kip` anomalies are all "
              "known deviations of that profile. A bug is \"caught\" when it fired and its own anomaly name is "
              "flagged under both profiles; \"not exercised\" when it never fired. For a name the control already "
              "shows under `kip` (a healthy Kafka's deviation, e.g. `uncommitted-read`, `wrong-fetch-error`), the "
              "`kip` column is evidence only when the bug's window flagged it more often than the control (scaled "
              "to the seconds each window drove the workload: shown as \"n > control's m\"); otherwise it says \"not evidence\" and "
              "the version's profile alone decides \"caught\". A bug whose name is `<anomaly>-<variant>` is a "
              "second slip of that family (e.g. the original slip a widened one grew from): it expects the "
              "family's anomaly.", "",
              "Slips (what each bug changes):", ""]
    for r in matrix["rows"]:
        if r.get("slip"):
            lines.append(f"- `{r['bug']}`: `{r['kafka_method']}`: {r['slip']}.")
    return "\n".join(lines) + "\n"


def restatus(matrix: dict) -> dict:
    """A measured matrix (`--from`) with each row's status decided by today's `status`."""
    control = _control(matrix)
    for r in matrix["rows"]:
        r["status"] = status(r, matrix["profiles"], control)
    return matrix


def matrix_passes(matrix: dict) -> bool:
    return all(r["status"] in ("valid", "caught") for r in matrix["rows"])
