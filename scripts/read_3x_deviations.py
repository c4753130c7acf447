"""For Kafka 3.x: is each profile deviation's code in this release's kafka_2.13 source jar?

    mvn -q dependency:get -Dartifact=org.apache.kafka:kafka_2.13:3.6.2:jar:sources -Dtransitive=false
    python3 scripts/read_3x_deviations.py 3.6.2 ...

Prints, per version, each deviation of reference_model.profiles' 3.x block and whether the
class and method that cause it (see RELEASE_NOTES["kafka-3.x"]) hold that code. Used to build
the kafka-3.3 ... kafka-3.9 profiles; a False means: read that method by hand before the
deviation may be in that line's profile. (Scala sources only: 4.x moved these to Java.)
"""
import pathlib
import re
import sys
import zipfile


def src(v, rel):
    jar = pathlib.Path.home() / f".m2/repository/org/apache/kafka/kafka_2.13/{v}/kafka_2.13-{v}-sources.jar"
    if not jar.exists():
        sys.exit(f"no {jar}: fetch it with mvn dependency:get (see the docstring)")
    with zipfile.ZipFile(jar) as z:
        return z.read(rel).decode() if rel in z.namelist() else ""


def fn(text, name, n=4000):
    """`n` characters of `text` from where `name` (a method signature) starts."""
    i = text.find(name)
    return text[i:i+n] if i >= 0 else ""
def main(versions):
    for v in versions:
        rm = src(v, "kafka/server/ReplicaManager.scala"); part = src(v, "kafka/cluster/Partition.scala")
        ul = src(v, "kafka/log/UnifiedLog.scala"); ll = src(v, "kafka/log/LocalLog.scala")
        res = {}
        # out-of-range-without-offsets
        inline = re.search(r"_: OffsetOutOfRangeException[^=]*=>\s*LogReadResult\([^)]*\)[^)]*highWatermark = UnifiedLog.UnknownOffset", rm, re.S)
        handler = fn(rm, "def handleOffsetOutOfRangeError", 6000)
        cl = fn(rm, "def createLogReadResult(e: Throwable)", 600)
        res["out-of-range-without-offsets"] = bool(inline) or ("createLogReadResult(exception)" in handler and "highWatermark = UnifiedLog.UnknownOffset" in cl)
        rr = fn(part, "private def readRecords(", 5000)
        res["response-hwm-sampled-before-read"] = ("val initialHighWatermark = localLog.highWatermark" in rr and rr.find("initialHighWatermark = localLog.highWatermark") < rr.find("localLog.read(")
            and bool(re.search(r"case (FetchHighWatermark|FetchIsolation.HIGH_WATERMARK) => fetchHighWatermarkMetadata", ul)))
        lr = fn(ll, "def read(startOffset", 3000)
        res["fetch-above-hwm-empty"] = ("if (startOffset > endOffset" in lr and "startOffset == maxOffsetMetadata.messageOffset" in lr
            and "emptyFetchDataInfo(maxOffsetMetadata" in lr)
        uh = fn(ul, "def updateHighWatermark(highWatermarkMetadata: LogOffsetMetadata)", 1200)
        res["hwm-capped-at-leo"] = ("< logStartOffset" in uh and ">= endOffsetMetadata.messageOffset" in uh)
        lo = fn(rm, "def lastOffsetForLeaderEpoch(", 2500)
        eo = fn(ul, "def endOffsetForEpoch(leaderEpoch: Int)", 600)
        res["offsets-for-leader-epoch-uncapped"] = ("fetchOnlyFromLeader = true" in lo and "endOffsetFor(leaderEpoch, logEndOffset)" in eo)
        rf = fn(src(v, "kafka/server/ReplicaFetcherThread.scala"), "override def processPartitionData(", 4000)
        mu = fn(ul, "private def updateHighWatermarkMetadata(", 600)
        res["follower-hwm-follows-leader"] = ("log.maybeUpdateHighWatermark(partitionData.highWatermark)" in rf
            and "Non-monotonic update of high watermark" in mu and "highWatermarkMetadata = newHighWatermark" in mu)
        print(v, res)


if __name__ == "__main__":
    main(sys.argv[1:])
