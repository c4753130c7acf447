"""`kipcheck profile read VERSION`: is each known deviation's code in this Kafka release?

For every deviation of reference_model.profiles.EVIDENCE that has a probe in `PROBES`, the
reader opens the release's source jars from Maven Central (fetched with `mvn dependency:get`,
read from ~/.m2), finds the class and method the evidence cites (Scala in 3.x, Java where 4.x
moved it) and reports whether the code that causes the deviation is there, with the matched
lines (file:line: text) as evidence, or what it looked for and did not find.

Some releases publish no source jars (4.2.2, 4.4.0 on Maven Central). Then the reader reads
the binary jars: a probe's methods are compared, instruction for instruction (`javap -c`, the
constant-pool numbers left out), with the same methods in the nearest release that has
sources; identical bytecode carries that release's source finding over ("same bytecode as
4.3.1"), different bytecode is reported as changed and must be read by hand.

It also reports which KIP features the release offers: Fetch / ListOffsets
HIGHEST_SUPPORTED_VERSION (kafka-clients' generated message classes, `javap -constants`),
follower.fetch.last.tiered.offset.enable, KafkaRaftClient.isHighWatermarkUpdated, and how they
agree with harness.backends.releases.FEATURES. docs/releases.md, "Reading a new release".
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kipcheck.harness.backends import releases
from kipcheck.harness.errors import HarnessError
from kipcheck.reference_model import profiles as P

GROUP = "org.apache.kafka"
ARTIFACTS = ("kafka_2.13", "kafka-server", "kafka-storage", "kafka-raft", "kafka-clients", "kafka-server-common",
             "kafka-metadata")
#: a failed Maven look-up is remembered this long (a release may publish its source jars later)
MISSING_TTL_S = 86400


@dataclass(frozen=True)
class Probe:
    """Code that must be (or, with `absent`, must not be) in one method of one class.

    `paths`: candidate source paths, first one holding `method` wins (classes moved between
    releases). `method`: a regex where the method starts; its body runs to the matching
    brace. `patterns`: regexes that must all match in the body (in this order if `ordered`).
    `name`: the method's name in bytecode (for releases without source jars), whose
    instructions must equal the reference release's, or, for a method too big to stay
    the same (BrokerServer.startup), match the regexes `bytecode` in order."""
    paths: tuple[str, ...]
    method: str
    patterns: tuple[str, ...] = ()
    name: str = ""
    ordered: bool = False
    absent: bool = False
    bytecode: tuple[str, ...] = ()


def _p(paths, method, *patterns, name="", ordered=False, absent=False, bytecode=()) -> Probe:
    return Probe(tuple(paths.split()), method, patterns, name, ordered, absent, tuple(bytecode))


_UL = "org/apache/kafka/storage/internals/log/UnifiedLog.java kafka/log/UnifiedLog.scala"
_LL = "org/apache/kafka/storage/internals/log/LocalLog.java kafka/log/LocalLog.scala"
_RM = "kafka/server/ReplicaManager.scala"
_PART = "kafka/cluster/Partition.scala"
_FS = "org/apache/kafka/server/FetchSession.java kafka/server/FetchSession.scala"
_SHARD = "org/apache/kafka/server/FetchSessionCacheShard.java kafka/server/FetchSession.scala"
_AFT = "kafka/server/AbstractFetcherThread.scala"
_KRC = "org/apache/kafka/raft/KafkaRaftClient.java"
_HW_READ = r"(case (FetchHighWatermark|FetchIsolation\.HIGH_WATERMARK) =>|case HIGH_WATERMARK ->)\s*fetchHighWatermarkMetadata"

#: deviation -> variants; a variant is a tuple of probes that must all hold; the deviation's
#: code is present when some variant holds. The probes follow EVIDENCE / RELEASE_NOTES.
PROBES: dict[str, tuple[tuple[Probe, ...], ...]] = {
    P.FETCH_ABOVE_HWM_EMPTY: ((
        _p(_UL, r"(public FetchDataInfo|def) read\(\s*(long |)startOffset", _HW_READ, name="read"),
        _p(_LL, r"(public FetchDataInfo|def) read\(\s*(long |)startOffset", r"if \(startOffset > endOffset",
           r"startOffset == maxOffsetMetadata\.messageOffset", r"emptyFetchDataInfo\(maxOffsetMetadata", name="read"),
    ),),
    P.OUT_OF_RANGE_WITHOUT_OFFSETS: (
        # 3.3 .. 3.5: an inline catch in readFromLocalLog's read()
        (_p(_RM, r"def readFromLocalLog\(", r"_: OffsetOutOfRangeException[^=]*=>\s*LogReadResult\(",
            r"highWatermark = UnifiedLog\.UnknownOffset", ordered=True, name="readFromLocalLog"),),
        # 3.6 .. 4.1: handleOffsetOutOfRangeError -> createLogReadResult(e)
        (_p(_RM, r"private def handleOffsetOutOfRangeError\(", r"log\.logStartOffset <= offset && offset < log\.localLogStartOffset",
            r"createLogReadResult\(exception\)", name="handleOffsetOutOfRangeError"),
         _p(_RM, r"def createLogReadResult\(e: Throwable\)", r"UnifiedLog\.(UnknownOffset|UNKNOWN_OFFSET)",
            name="createLogReadResult")),
        # 4.2 ..: new LogReadResult(Errors.forException(exception)), whose constructor answers -1
        (_p(_RM, r"private def handleOffsetOutOfRangeError\(", r"log\.logStartOffset <= offset && offset < log\.localLogStartOffset",
            r"new LogReadResult\(Errors\.forException\(exception\)\)", name="handleOffsetOutOfRangeError"),
         _p("org/apache/kafka/storage/internals/log/LogReadResult.java org/apache/kafka/server/LogReadResult.java",
            r"public LogReadResult\(Errors error\)", r"UnifiedLog\.UNKNOWN_OFFSET,\s*UnifiedLog\.UNKNOWN_OFFSET",
            name="<init>")),
    ),
    P.HWM_CAPPED_AT_LEO: ((
        _p(_UL, r"(public long|def) updateHighWatermark\((LogOffsetMetadata )?highWatermarkMetadata",
           r"messageOffset < logStartOffset", r"messageOffset >= endOffsetMetadata\.messageOffset", name="updateHighWatermark"),
    ),),
    P.OFFSETS_FOR_LEADER_EPOCH_UNCAPPED: ((
        _p(_RM, r"def lastOffsetForLeaderEpoch\(", r"fetchOnlyFromLeader = true", name="lastOffsetForLeaderEpoch"),
        _p(_UL, r"(public Optional<OffsetAndEpoch>|def) endOffsetForEpoch\(", r"endOffsetFor\(leaderEpoch, logEndOffset(\(\))?\)",
           name="endOffsetForEpoch"),
    ),),
    P.RESPONSE_HWM_SAMPLED_BEFORE_READ: ((
        _p(_PART, r"private def readRecords\(", r"val initialHighWatermark = localLog\.highWatermark", r"localLog\.read\(",
           ordered=True, name="readRecords"),
        _p(_UL, r"(public FetchDataInfo|def) read\(\s*(long |)startOffset", _HW_READ, name="read"),
    ),),
    P.RESPONSE_LSO_SAMPLED_BEFORE_READ: ((
        _p(_PART, r"private def readRecords\(", r"val initialHighWatermark = localLog\.highWatermark",
           r"val initialLastStableOffset = localLog\.lastStableOffset", r"localLog\.read\(",
           ordered=True, name="readRecords"),
    ),),
    P.FOLLOWER_HWM_FOLLOWS_LEADER: ((
        _p("kafka/server/ReplicaFetcherThread.scala", r"override def processPartitionData\(",
           r"log\.maybeUpdateHighWatermark\(partitionData\.highWatermark\)", name="processPartitionData"),
        _p(_UL, r"private (void|def) updateHighWatermarkMetadata\(", r"Non-monotonic update of high watermark",
           r"highWatermarkMetadata = newHighWatermark", ordered=True, name="updateHighWatermarkMetadata"),
    ),),
    P.EMPTY_SESSION_CLOSED: ((
        _p("org/apache/kafka/server/FetchManager.java kafka/server/FetchSession.scala",
           r"(public FetchContext|def) newContext\(", r"if \(session\.isEmpty(\(\))?\)", r"\.remove\(session",
           r"new SessionlessFetchContext\(", ordered=True, name="newContext"),
    ),),
    P.INCREMENTAL_EXTRA_PARTITIONS: ((
        _p(_FS, r"(boolean|def) maybeUpdateResponseData\(", r"FetchResponse\.isPreferredReplica\(respData\)",
           r"errorCode(\(\))? != Errors\.NONE\.code", r"FetchResponse\.isDivergingEpoch\(respData\)",
           ordered=True, name="maybeUpdateResponseData"),
    ),),
    P.EVICT_SMALLEST: ((
        _p(_SHARD, r"(boolean|def) tryEvict\(", r"lastUsed\.firstEntry", r"> evictionMs",
           r"if \(privileged\) evictableByPrivileged else evictableByAll|privileged \? evictableByPrivileged : evictableByAll",
           ordered=True, name="tryEvict"),
        _p(_SHARD, r"(void|def) touch\(session: FetchSession|void touch\(FetchSession", r"creationMs(\(\))? > evictionMs\)",
           r"evictableByPrivileged\.put", name="touch"),
    ),),
    P.SHARDED_SESSION_CACHE: ((
        _p("kafka/server/BrokerServer.scala", r"override def startup\(\)", r"Int\.MaxValue / NumFetchSessionCacheShards",
           r"new FetchSessionCacheShard\(", r"maxIncrementalFetchSessionCacheSlots / NumFetchSessionCacheShards",
           name="startup", bytecode=(r"ldc(_w)? # // int 2147483647\n.*\n.*NumFetchSessionCacheShards:\(\)I\n.*idiv",
                                     r"maxIncrementalFetchSessionCacheSlots:.*\n(.*\n){0,3}.*NumFetchSessionCacheShards:\(\)I\n.*idiv",
                                     r"FetchSessionCacheShard\.\"<init>\"")),
        _p("kafka/server/KafkaBroker.scala", r"val NumFetchSessionCacheShards\b", r"NumFetchSessionCacheShards: Int = 8",
           name="$init$", bytecode=(r"bipush 8\n.*NumFetchSessionCacheShards_\$eq",)),
    ),),
    P.PENDING_UPLOAD_RESOLVED_BY_LEADER: ((
        _p(_UL, r"(private OffsetResultHolder|def) fetchEarliestPendingUploadOffset\(", r"highestOffsetInRemoteStorage\(\)",
           r"localLogStartOffset\(\) == logStartOffset\(\)", r"EARLIEST_TIMESTAMP",
           r"Math\.max\(curHighestRemoteOffset \+ 1, logStartOffset\(\)\)", ordered=True,
           name="fetchEarliestPendingUploadOffset"),
    ),),
    # the rebuild empties the epoch cache before it assigns the tier's epochs, and a remote read
    # without an epoch for its offset answers OffsetOutOfRange
    P.TIERED_READ_OUT_OF_RANGE: ((
        _p("kafka/server/TierStateMachine.java", r"private Long buildRemoteLogAuxState\(",
           r"\.truncateFullyAndStartAt\(", r"leaderEpochCache\(\)\.assign\(", ordered=True, name="buildRemoteLogAuxState"),
        _p(_UL, r"(public void|def) truncateFullyAndStartAt\((long )?newOffset", r"leaderEpochCache\.clearAndFlush\(\)",
           name="truncateFullyAndStartAt"),
        _p("org/apache/kafka/server/log/remote/storage/RemoteLogManager.java kafka/log/remote/RemoteLogManager.java",
           r"public FetchDataInfo read\(RemoteStorageFetchInfo", r"epochForOffset\(offset\)",
           r"throw new OffsetOutOfRangeException\(", ordered=True, name="read"),
    ),),
    # KAFKA-16310: the segment's recorded offset answered as it is, no batch looked up (3.8: offsetOfMaxTimestamp)
    P.MAX_TIMESTAMP_SHALLOW_OFFSET: ((
        _p(_UL, r"(private OffsetResultHolder|public OffsetResultHolder|def) fetchOffsetByTimestamp\(",
           r"MAX_TIMESTAMP\) \{\s*(//[^\n]*\s*)*val segmentsCopy = logSegments", r"latestTimestampAndOffset\.offset,",
           ordered=True, name="fetchOffsetByTimestamp"),
    ),),
    # KAFKA-15665: the completion asks for the adding replicas in the ISR (3.8: all the target replicas)
    P.REASSIGNMENT_COMPLETES_ON_ADDING: ((
        # 3.3: the same check inline in PartitionChangeBuilder.completeReassignmentIfNeeded
        _p("org/apache/kafka/controller/PartitionReassignmentReplicas.java "
           "org/apache/kafka/controller/PartitionChangeBuilder.java",
           r"(Optional<CompletedReassignment> maybeCompleteReassignment|private void completeReassignmentIfNeeded)\(",
           r"for \(int replica : (targetAdding|adding)\)", r"if \(!newTargetIsr\.contains\(replica\)\) return",
           ordered=True, name="maybeCompleteReassignment"),
    ),),
    # the deviation is code that is missing: the fetcher has no last-tiered-offset path
    P.FOLLOWER_BOOTSTRAP_ABSENT: ((
        _p(_AFT, r"def shouldFetchFromLastTieredOffset\(", absent=True, name="shouldFetchFromLastTieredOffset"),
        _p(_AFT, r"def fetchEarliestPendingUploadOffset\(", absent=True, name="fetchEarliestPendingUploadOffset"),
    ),),
    P.KRAFT_FETCH_PARKS_WITHOUT_HWM: ((
        _p(_KRC, r"private Complet\w+<FetchResponseData> handleFetchRequest\(", r"fetchPurgatory\.await\(",
           name="handleFetchRequest", bytecode=(r"FuturePurgatory\.await",)),
        _p(_KRC, r"private static boolean isHighWatermarkUpdated\(", absent=True, name="isHighWatermarkUpdated"),
    ),),
}


# --- jars ----------------------------------------------------------------------------------
def _m2(artifact: str, version: str, classifier: str = "") -> Path:
    tail = f"-{classifier}" if classifier else ""
    return Path.home() / ".m2/repository/org/apache/kafka" / artifact / version / f"{artifact}-{version}{tail}.jar"


def _marker(artifact: str, version: str, classifier: str) -> Path:
    from kipcheck.harness.backends.kafka_dist import cache_root
    return cache_root() / "sources" / version / f"{artifact}-{classifier or 'jar'}.missing"


def jar(artifact: str, version: str, classifier: str = "") -> Path | None:
    """The jar from ~/.m2, fetched with mvn if needed; None if Maven Central has none."""
    path = _m2(artifact, version, classifier)
    if path.is_file():
        return path
    marker = _marker(artifact, version, classifier)
    if marker.is_file() and time.time() - marker.stat().st_mtime < MISSING_TTL_S:
        return None
    if not shutil.which("mvn"):
        raise HarnessError("mvn is not on PATH: the reader fetches Kafka's jars with Maven")
    coords = f"{GROUP}:{artifact}:{version}:jar" + (f":{classifier}" if classifier else "")
    proc = subprocess.run(["mvn", "-q", "-U", "dependency:get", f"-Dartifact={coords}", "-Dtransitive=false"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode == 0 and path.is_file():
        return path
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text((proc.stdout + proc.stderr)[-2000:])
    return None


class Release:
    """One release's jars: source texts by path, binary classes by name."""

    def __init__(self, version: str):
        self.version = version
        self.sources = {a: j for a in ARTIFACTS if (j := jar(a, version, "sources"))}
        self.binaries = {a: j for a in ARTIFACTS if (j := jar(a, version))}
        if not self.binaries:
            raise HarnessError(f"Maven Central has no Kafka {version} (org.apache.kafka:kafka-clients:{version} "
                               "does not resolve)")
        self._names = {a: set(zipfile.ZipFile(j).namelist()) for a, j in self.sources.items()}

    def source(self, path: str) -> str | None:
        for a, names in self._names.items():
            if path in names:
                with zipfile.ZipFile(self.sources[a]) as z:
                    return z.read(path).decode("utf-8", "replace")
        return None

    def class_jar(self, cls: str) -> Path | None:
        entry = cls.replace(".", "/") + ".class"
        for j in self.binaries.values():
            with zipfile.ZipFile(j) as z:
                if entry in z.namelist():
                    return j
        return None

    def class_bytes(self, cls: str) -> bytes | None:
        j = self.class_jar(cls)
        if j is None:
            return None
        with zipfile.ZipFile(j) as z:
            return z.read(cls.replace(".", "/") + ".class")


@lru_cache(maxsize=None)
def _release(version: str) -> Release:
    return Release(version)


# --- matching ------------------------------------------------------------------------------
def _body(text: str, start: int) -> tuple[int, int]:
    """[start, end) of the method starting at `start`: to the brace matching its first `{`."""
    i = text.find("{", start)
    if i < 0:
        return start, min(len(text), start + 4000)
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return start, j + 1
    return start, len(text)


def _line(text: str, pos: int) -> tuple[int, str]:
    n = text.count("\n", 0, pos) + 1
    a = text.rfind("\n", 0, pos) + 1
    b = text.find("\n", pos)
    return n, text[a:b if b >= 0 else len(text)].strip()


def match_source(rel: Release, probe: Probe) -> dict:
    """One probe against the release's sources: {holds, path, evidence: [file:line: text], missing}."""
    for path in probe.paths:
        text = rel.source(path)
        if text is None:
            continue
        m = re.search(probe.method, text)
        if m is None:
            continue
        if probe.absent:
            n, line = _line(text, m.start())
            return {"holds": False, "path": path, "evidence": [f"{path}:{n}: {line}"],
                    "missing": [f"no {probe.method!r}, but {path}:{n} has it"]}
        lo, hi = _body(text, m.start())
        n, line = _line(text, m.start())
        evidence, missing, pos = [f"{path}:{n}: {line}"], [], lo
        for pat in probe.patterns:
            hit = re.compile(pat, re.S).search(text, pos if probe.ordered else lo, hi)
            if hit is None:
                missing.append(pat)
                continue
            n, line = _line(text, hit.start())
            evidence.append(f"{path}:{n}: {line}")
            if probe.ordered:
                pos = hit.end()
        return {"holds": not missing, "path": path, "evidence": evidence, "missing": missing}
    where = " or ".join(probe.paths)
    if probe.absent:
        return {"holds": True, "path": None, "evidence": [f"no {probe.method!r} in {where}"], "missing": []}
    return {"holds": False, "path": None, "evidence": [], "missing": [f"{probe.method} in {where}"]}


_DECL = re.compile(r"^([ \t]*)(?:[\w\[\]().@]+[ \t]+)*(class|object|trait|record|interface|enum) (\w+)", re.M)


def _class_of(path: str, text: str | None = None, pos: int = 0) -> str:
    """The JVM class holding the code at `pos` of the source `text` (nested: Outer$Inner,
    a Scala object: Name$); the file's own class without a text."""
    package = re.sub(r"/?[^/]*\.(java|scala)$", "", path).replace("/", ".")
    if text is None:
        return f"{package}.{Path(path).stem}"
    at = text.rfind("\n", 0, pos) + 1
    indent = len(text[at:pos]) - len(text[at:pos].lstrip())
    stack: list[tuple[int, str]] = []
    for m in _DECL.finditer(text, 0, at):
        i = len(m.group(1).expandtabs())
        stack = [s for s in stack if s[0] < i] + [(i, m.group(3) + ("$" if m.group(2) == "object" else ""))]
    chain = [name for i, name in stack if i < indent]
    if not chain:
        return f"{package}.{Path(path).stem}"
    return package + "." + "$".join(n.rstrip("$") for n in chain[:-1]) + ("$" if len(chain) > 1 else "") + chain[-1]


def _bytecode(rel: Release, cls: str, name: str) -> str | None:
    """The normalized `javap -c -p` of every method called `name` in `cls` (with Scala's
    mangled and lambda forms), or None without the class."""
    j = rel.class_jar(cls)
    if j is None:
        return None
    out = _javap(str(j), cls)
    blocks, cur, keep = [], [], False
    mname = re.compile(rf"(^|\$){re.escape(name)}(\$\d+)?$|\$anonfun\${re.escape(name)}\$\d+$|^lambda\${re.escape(name)}\$\d+$")
    for line in out.splitlines():
        head = re.match(r"  \S.*?([\w$<>]+)\(.*\)[^;]*;$", line)
        if head and not line.startswith("    "):
            if keep:
                blocks.append("\n".join(cur))
            cur, keep = [], bool(mname.search(head.group(1))) or (name == "<init>" and head.group(1) == cls.rsplit(".", 1)[-1])
        if keep:
            line = re.sub(r"#\d+(:\d+)?(, *#?\d+)?|\$\d+", "#", line)
            # a class that moved package (kafka.server.ReplicaQuota -> org.apache.kafka.server.quota) is the same class
            line = re.sub(r"(?:[a-z]\w*/)+(?=[A-Z$_])", "", line)
            cur.append(" ".join(line.split()))
    if keep:
        blocks.append("\n".join(cur))
    return "\n".join(blocks)


@lru_cache(maxsize=None)
def _javap(jar_path: str, cls: str) -> str:
    proc = subprocess.run(["javap", "-c", "-p", "-cp", jar_path, cls], capture_output=True, text=True, timeout=300)
    return proc.stdout


def _reference(version: str) -> Release | None:
    """The nearest release with source jars: an older patch of the line, else the line before."""
    major, minor, patch = releases.parse(version)
    candidates = [f"{major}.{minor}.{p}" for p in range(patch - 1, -1, -1)]
    keys = sorted((releases.parse(v) for v in releases.NEWEST_PATCH.values()), reverse=True)
    candidates += [".".join(map(str, k)) for k in keys if k[:2] < (major, minor)][:2]
    for v in candidates:
        try:
            rel = _release(v)
        except HarnessError:
            continue
        if rel.sources:
            return rel
    return None


def match_bytecode(rel: Release, ref: Release, probe: Probe) -> dict:
    """A probe for a release without sources: its method's bytecode against `ref`'s."""
    found = match_source(ref, probe)
    path = found["path"] or probe.paths[-1]
    text = ref.source(path) if found["path"] else None
    m = re.search(probe.method, text) if text else None
    cls = _class_of(path, text, m.start() if m else 0)
    if probe.absent:
        data = rel.class_bytes(cls)
        there = data is not None and probe.name.encode() in data
        return {"holds": not there, "path": path, "missing": [] if not there else [f"{probe.name} is in {cls}"],
                "evidence": [f"{cls}.class: {probe.name} {'is named' if there else 'not named'} in the class file"]}
    mine, theirs = _bytecode(rel, cls, probe.name), _bytecode(ref, cls, probe.name)
    if not mine:
        return {"holds": False, "path": path, "evidence": [], "missing": [f"{cls}.{probe.name} (bytecode)"]}
    if probe.bytecode:
        evidence, missing, pos = [], [], 0
        for pat in probe.bytecode:
            hit = re.compile(pat).search(mine, pos)
            if hit is None:
                missing.append(f"{cls}.{probe.name} bytecode: {pat}")
                continue
            evidence.append(f"{cls}.{probe.name}: " + " | ".join(hit.group(0).splitlines()))
            pos = hit.end()
        return {"holds": not missing, "path": path, "evidence": evidence, "missing": missing}
    if mine != theirs:
        return {"holds": False, "path": path, "changed": True, "evidence": [],
                "missing": [f"{cls}.{probe.name}: bytecode differs from {ref.version}'s: read it by hand"]}
    ev = [f"{cls}.{probe.name}: same bytecode as {ref.version}, whose source shows:"] + found["evidence"]
    return {"holds": found["holds"], "path": path, "evidence": ev, "missing": found["missing"]}


def read_deviation(version: str, deviation: str) -> dict:
    """{present, how, evidence, missing} for one deviation's probes in `version`."""
    rel = _release(version)
    ref = None if rel.sources else _reference(version)
    if not rel.sources and ref is None:
        raise HarnessError(f"Kafka {version} publishes no source jars and no nearby release has them")
    tried = []
    for variant in PROBES[deviation]:
        results = [match_source(rel, p) if ref is None else match_bytecode(rel, ref, p) for p in variant]
        tried.append(results)
        if all(r["holds"] for r in results):
            return {"present": True, "how": "sources" if ref is None else f"bytecode vs {ref.version} sources",
                    "evidence": [e for r in results for e in r["evidence"]], "missing": []}
    return {"present": False, "how": "sources" if ref is None else f"bytecode vs {ref.version} sources",
            "changed": any(r.get("changed") for rs in tried for r in rs),
            "evidence": [e for rs in tried for r in rs for e in r["evidence"]],
            "missing": [m for rs in tried for r in rs for m in r["missing"]]}


# --- features ------------------------------------------------------------------------------
_LIST_OFFSETS = {"list-offsets-max-timestamp": 7, "list-offsets-earliest-local": 8, "list-offsets-latest-tiered": 9,
                 "list-offsets-pending-upload": 11}


def read_features(version: str) -> dict:
    rel = _release(version)
    clients = rel.binaries.get("kafka-clients")
    highest = {}
    if clients is not None and shutil.which("javap"):
        out = subprocess.run(["javap", "-constants", "-cp", str(clients),
                              "org.apache.kafka.common.message.FetchRequestData",
                              "org.apache.kafka.common.message.ListOffsetsRequestData"],
                             capture_output=True, text=True, timeout=120).stdout
        for cls, num in re.findall(r"class org\.apache\.kafka\.common\.message\.(\w+)|HIGHEST_SUPPORTED_VERSION = (\d+)", out):
            if cls:
                current = cls
            elif num:
                highest[current.replace("RequestData", "")] = int(num)
    config = "follower.fetch.last.tiered.offset.enable"
    has_config = any(config.encode() in zipfile.ZipFile(j).read(n)
                     for j in rel.binaries.values() for n in zipfile.ZipFile(j).namelist()
                     if n.endswith(".class") and "config" in n.lower())
    krc = rel.class_bytes("org.apache.kafka.raft.KafkaRaftClient") or b""
    aft = rel.class_bytes("kafka.server.AbstractFetcherThread") or b""
    seen = {name: highest.get("ListOffsets", -1) >= v for name, v in _LIST_OFFSETS.items()}
    seen["kip-1166"] = highest.get("Fetch", -1) >= 18 and b"isHighWatermarkUpdated" in krc
    seen["kip-1023"] = has_config and b"shouldFetchFromLastTieredOffset" in aft
    seen["eligible-leader-replicas"] = rel.class_bytes("org.apache.kafka.server.common.EligibleLeaderReplicasVersion") \
        is not None
    return {
        "fetch_highest_version": highest.get("Fetch"),
        "list_offsets_highest_version": highest.get("ListOffsets"),
        config: has_config,
        "KafkaRaftClient.isHighWatermarkUpdated": b"isHighWatermarkUpdated" in krc,
        "AbstractFetcherThread.shouldFetchFromLastTieredOffset": b"shouldFetchFromLastTieredOffset" in aft,
        "features": {name: {"read": present, "releases.FEATURES": releases.has(version, name)}
                     for name, present in seen.items()},
    }


def read(version: str) -> dict:
    """Everything the reader reads of `version` (`kipcheck profile read --json`)."""
    if not re.fullmatch(r"\d+\.\d+\.\d+", version or ""):
        raise HarnessError(f"not a Kafka version: {version!r} (expected X.Y.Z, e.g. {releases.NEWEST_PATCH['4.3']})")
    if not releases.is_kraft(version):  # refused before Maven is asked: a miss there takes minutes
        raise HarnessError(f"{version} is not a KRaft release (KRaft runs from 3.3): nothing to read against a profile")
    rel = _release(version)
    line = "kafka-{}.{}".format(*releases.parse(version)[:2])
    deviations = {d: read_deviation(version, d) for d in PROBES}
    prof = P.PROFILES.get(line)
    out = {"version": version, "sources": sorted(rel.sources), "binaries": sorted(rel.binaries),
           "deviations": deviations, "features": read_features(version), "profile": line if prof else None}
    if prof is not None:
        found = {d for d, r in deviations.items() if r["present"]}
        out["profile_check"] = {"missing_from_profile": sorted(found - prof.deviations),
                                "not_found_in_code": sorted(prof.deviations & set(PROBES) - found)}
    return out


def format_text(result: dict) -> str:
    lines = [f"Kafka {result['version']}: source jars {', '.join(result['sources']) or 'none (bytecode read)'}"]
    for dev, r in result["deviations"].items():
        lines.append(f"{dev}: {'PRESENT' if r['present'] else 'not found'} ({r['how']})")
        lines += [f"    {e}" for e in r["evidence"]]
        if not r["present"]:
            lines += [f"    looked for: {m}" for m in r["missing"]]
    f = result["features"]
    lines.append(f"Fetch highest version {f['fetch_highest_version']}, ListOffsets highest version "
                 f"{f['list_offsets_highest_version']}")
    for k in ("follower.fetch.last.tiered.offset.enable", "KafkaRaftClient.isHighWatermarkUpdated",
              "AbstractFetcherThread.shouldFetchFromLastTieredOffset"):
        lines.append(f"{k}: {'present' if f[k] else 'absent'}")
    for name, v in f["features"].items():
        agree = "" if v["read"] == v["releases.FEATURES"] else "  (releases.FEATURES says otherwise)"
        lines.append(f"feature {name}: {'yes' if v['read'] else 'no'}{agree}")
    if result.get("profile_check") is not None:
        pc = result["profile_check"]
        lines.append(f"profile {result['profile']}: "
                     + ("matches" if not (pc["missing_from_profile"] or pc["not_found_in_code"]) else
                        f"found but not in the profile: {pc['missing_from_profile']}; in the profile but not "
                        f"found: {pc['not_found_in_code']}"))
    elif result.get("profile") is None:
        lines.append("no profile for this line yet")
    return "\n".join(lines)


def cmd_profile_read(args) -> int:
    result = read(args.version)
    print(json.dumps(result, indent=2) if args.json else format_text(result))
    return 0
