package kipcheck.seeded;

import java.io.IOException;
import java.lang.instrument.Instrumentation;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;

import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.pool.TypePool;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.matcher.ElementMatchers;

/**
 * {@code -javaagent:seeded-bugs.jar=control=FILE,report=FILE}: installs every seeded slip (all
 * off), switches on the bug named in the control file (polled every 200 ms; empty = none), and
 * writes the report file every 500 ms: which bugs matched their Kafka method, which targets were
 * missing from the loaded class, and how often each bug fired.
 */
public final class Agent {
    /** One seeded bug: where it lives and the advice that plants it. */
    record Target(String bug, String className, String method, String advice) {
    }

    /** Advice classes go by name: loading them early could load the Kafka classes they mention. */
    private static final String SLIPS = "kipcheck.seeded.Slips$";

    static final List<Target> TARGETS = List.of(
            new Target("uncommitted-read", "org.apache.kafka.storage.internals.log.UnifiedLog", "read", SLIPS + "ConsumerRead"),
            new Target("wrong-fetch-error-case1", "org.apache.kafka.storage.internals.log.UnifiedLog", "read",
                    SLIPS + "ConsumerRead"),
            new Target("wrong-fetch-error", "org.apache.kafka.storage.internals.log.UnifiedLog", "read", SLIPS + "ConsumerRead"),
            new Target("poll-skip", "org.apache.kafka.storage.internals.log.UnifiedLog", "read", SLIPS + "ConsumerRead"),
            new Target("hwm-regression", "kafka.cluster.Partition", "readRecords", SLIPS + "ReportedHighWatermark"),
            new Target("aborted-read", "org.apache.kafka.storage.internals.log.UnifiedLog", "read", SLIPS + "ConsumerRead"),
            new Target("lso-violation", "kafka.cluster.Partition", "readRecords", SLIPS + "ReportedHighWatermark"),
            new Target("fetch-session-violation", "org.apache.kafka.server.FetchSession", "setEpoch", SLIPS + "SessionEpoch"),
            new Target("duplicate", "kafka.cluster.Partition", "checkEnoughReplicasReachOffset", SLIPS + "ReplicaAck"),
            new Target("inconsistent-offset", "org.apache.kafka.server.LogAppendResult$LogAppendSummary", "firstOffset",
                    SLIPS + "ProduceResponseOffset"),
            new Target("lost-write", "org.apache.kafka.storage.internals.log.LocalLog", "append", SLIPS + "LeaderSegmentWrite"),
            new Target("preferred-replica-violation", "org.apache.kafka.common.replica.RackAwareReplicaSelector", "select",
                    SLIPS + "RackSelector"),
            new Target("tiered-offset-violation", "org.apache.kafka.storage.internals.log.UnifiedLog",
                    "fetchEarliestPendingUploadOffset", SLIPS + "PendingUploadOffset"),
            new Target("hwm-propagation-delay-hwm-check", "org.apache.kafka.raft.KafkaRaftClient", "isHighWatermarkUpdated",
                    SLIPS + "RaftHighWatermarkUpdated"),
            new Target("hwm-propagation-delay", "org.apache.kafka.raft.KafkaRaftClient", "isHighWatermarkUpdated",
                    SLIPS + "RaftHighWatermarkUpdated"),
            new Target("hwm-propagation-delay", "org.apache.kafka.raft.internals.ThresholdPurgatory", "completeAll",
                    SLIPS + "RaftParkedFetchRelease"),
            new Target("ineligible-leader", "org.apache.kafka.controller.PartitionChangeBuilder", "isValidNewLeader",
                    SLIPS + "ElectionCandidate"),
            new Target("committed-offset-regression", "org.apache.kafka.coordinator.group.OffsetMetadataManager",
                    "fetchOffsets", SLIPS + "OffsetFetchAnswer"),
            new Target("resume-skip", "org.apache.kafka.coordinator.group.OffsetMetadataManager", "fetchOffsets",
                    SLIPS + "OffsetFetchAnswer"),
            new Target("group-ownership-violation", "org.apache.kafka.coordinator.group.modern.consumer.CurrentAssignmentBuilder",
                    "withCurrentPartitionEpoch", SLIPS + "PartitionEpochLookup"),
            new Target("group-ownership-violation", "org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup",
                    "addPartitionEpochs", SLIPS + "PartitionEpochConflict"),
            new Target("slow-rebalance", "org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup",
                    "maybeUpdatePartitionEpoch", SLIPS + "RemovedMemberEpochs"),
            new Target("share-double-acquire", "kafka.server.share.SharePartition", "scheduleAcquisitionLockTimeout",
                    SLIPS + "ShareLockDuration"),
            new Target("share-accepted-redelivered", "kafka.server.share.SharePartition", "acknowledge",
                    SLIPS + "ShareAcknowledge"),
            new Target("share-delivery-limit-exceeded", "org.apache.kafka.server.share.fetch.InFlightState",
                    "tryUpdateState", SLIPS + "ShareDeliveryLimit"),
            new Target("share-record-lost", "kafka.server.share.SharePartition", "acquireNewBatchRecords",
                    SLIPS + "ShareNewBatchStart"),
            new Target("share-session-violation", "kafka.server.share.SharePartitionManager", "newContext",
                    SLIPS + "ShareSessionEpochCheck"));

    /** Matchers narrowing a method name to the one overload each slip is written for. */
    static ElementMatcher<MethodDescription> methodMatcher(Target t) {
        ElementMatcher.Junction<MethodDescription> m = ElementMatchers.named(t.method());
        switch (t.method()) {
            case "read": return m.and(ElementMatchers.takesArguments(4)).and(ElementMatchers.takesArgument(0, long.class))
                    .and(ElementMatchers.takesArgument(2,
                            ElementMatchers.named("org.apache.kafka.server.storage.log.FetchIsolation")));
            case "readRecords": return m.and(ElementMatchers.takesArguments(7));
            case "append": return m.and(ElementMatchers.takesArguments(2)).and(ElementMatchers.takesArgument(0, long.class));
            case "setEpoch": return m.and(ElementMatchers.takesArguments(int.class));
            case "checkEnoughReplicasReachOffset": return m.and(ElementMatchers.takesArguments(long.class));
            case "firstOffset": return m.and(ElementMatchers.takesArguments(0));
            case "select": return m.and(ElementMatchers.takesArguments(3));
            case "fetchEarliestPendingUploadOffset": return m.and(ElementMatchers.takesArguments(1));
            case "isHighWatermarkUpdated": return m.and(ElementMatchers.takesArguments(2));
            case "completeAll": return m.and(ElementMatchers.takesArguments(long.class));
            case "isValidNewLeader": return m.and(ElementMatchers.takesArguments(int.class));
            case "withCurrentPartitionEpoch": return m.and(ElementMatchers.takesArguments(1));
            case "maybeUpdatePartitionEpoch": return m.and(ElementMatchers.takesArguments(2));
            case "addPartitionEpochs": return m.and(ElementMatchers.takesArguments(2)).and(ElementMatchers.takesArgument(1, int.class));
            case "scheduleAcquisitionLockTimeout": return m.and(ElementMatchers.takesArguments(String.class, long.class,
                    long.class, long.class));
            case "acknowledge": return m.and(ElementMatchers.takesArguments(String.class, List.class));
            case "tryUpdateState": return m.and(ElementMatchers.takesArguments(4));
            case "newContext": return m.and(ElementMatchers.takesArguments(7))
                    .and(ElementMatchers.takesArgument(4, int.class));
            case "acquireNewBatchRecords": return m.and(ElementMatchers.takesArguments(7))
                    .and(ElementMatchers.takesArgument(3, long.class)).and(ElementMatchers.takesArgument(4, long.class));
            case "fetchOffsets": return m.and(ElementMatchers.takesArguments(2)).and(ElementMatchers.takesArgument(1, long.class));
            default: return m;
        }
    }

    static final ClassFileLocator ADVICE_LOCATOR = ClassFileLocator.ForClassLoader.of(Agent.class.getClassLoader());
    static final TypePool ADVICE_POOL = TypePool.Default.of(ADVICE_LOCATOR);
    static final Map<String, String> INSTALLED = new ConcurrentHashMap<>();
    static final Map<String, String> MISSING = new ConcurrentHashMap<>();

    private Agent() {
    }

    public static void premain(String args, Instrumentation inst) {
        Map<String, String> opts = new LinkedHashMap<>();
        for (String kv : (args == null ? "" : args).split(",")) {
            int eq = kv.indexOf('=');
            if (eq > 0) {
                opts.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
        }
        Path control = Path.of(opts.getOrDefault("control", "seeded-bugs.control"));
        Path report = Path.of(opts.getOrDefault("report", "seeded-bugs.json"));

        Map<String, List<Target>> byClass = new TreeMap<>();
        for (Target t : TARGETS) {
            byClass.computeIfAbsent(t.className(), k -> new ArrayList<>()).add(t);
        }
        AgentBuilder builder = new AgentBuilder.Default()
                .disableClassFormatChanges()
                .ignore(ElementMatchers.nameStartsWith("kipcheck.seeded."));
        for (Map.Entry<String, List<Target>> e : byClass.entrySet()) {
            List<Target> targets = e.getValue();
            builder = builder.type(ElementMatchers.named(e.getKey())).transform((b, type, loader, module, domain) -> {
                Map<String, ElementMatcher<MethodDescription>> advised = new LinkedHashMap<>();
                for (Target t : targets) {
                    ElementMatcher<MethodDescription> m = methodMatcher(t);
                    if (type.getDeclaredMethods().filter(m).isEmpty()) {
                        MISSING.put(t.bug(), t.className() + "." + t.method());
                    } else {
                        INSTALLED.put(t.bug(), t.className() + "." + t.method());
                        advised.putIfAbsent(t.advice(), m);
                    }
                }
                for (Map.Entry<String, ElementMatcher<MethodDescription>> a : advised.entrySet()) {
                    // described from its class file, not by reflection: reflecting on the advice would
                    // load the Kafka class being defined right now (a duplicate class definition)
                    b = b.visit(Advice.to(ADVICE_POOL.describe(a.getKey()).resolve(), ADVICE_LOCATOR)
                            .on(a.getValue()));
                }
                return b;
            });
        }
        builder.with(new AgentBuilder.Listener.Adapter() {
            @Override
            public void onError(String typeName, ClassLoader loader, net.bytebuddy.utility.JavaModule module,
                                boolean loaded, Throwable error) {
                for (Target t : TARGETS) {
                    if (t.className().equals(typeName)) {
                        MISSING.put(t.bug(), t.className() + "." + t.method() + ": " + error);
                        INSTALLED.remove(t.bug());
                    }
                }
            }
        }).installOn(inst);

        Thread poller = new Thread(() -> poll(control, report), "kipcheck-seeded-bugs");
        poller.setDaemon(true);
        poller.start();
    }

    private static void poll(Path control, Path report) {
        long lastReport = 0;
        while (true) {
            try {
                String wanted = Files.exists(control)
                        ? new String(Files.readAllBytes(control), StandardCharsets.UTF_8).trim() : "";
                Bugs.active = wanted;
                long now = System.currentTimeMillis();
                if (now - lastReport >= 500) {
                    writeReport(report);
                    lastReport = now;
                }
                Thread.sleep(200);
            } catch (InterruptedException e) {
                return;
            } catch (IOException | RuntimeException e) {
                // a half-written control file is read again on the next round
            }
        }
    }

    private static void writeReport(Path report) throws IOException {
        StringBuilder sb = new StringBuilder("{\"active\": ").append(quote(Bugs.active));
        sb.append(", \"installed\": ").append(json(new TreeMap<>(INSTALLED)));
        sb.append(", \"missing\": ").append(json(new TreeMap<>(MISSING)));
        sb.append(", \"fired\": {");
        String sep = "";
        for (Map.Entry<String, Long> e : Bugs.firedCounts().entrySet()) {
            sb.append(sep).append(quote(e.getKey())).append(": ").append(e.getValue());
            sep = ", ";
        }
        sb.append("}}\n");
        Path tmp = report.resolveSibling(report.getFileName() + ".tmp");
        Files.write(tmp, sb.toString().getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, report, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    }

    private static String json(Map<String, String> m) {
        StringBuilder sb = new StringBuilder("{");
        String sep = "";
        for (Map.Entry<String, String> e : m.entrySet()) {
            sb.append(sep).append(quote(e.getKey())).append(": ").append(quote(e.getValue()));
            sep = ", ";
        }
        return sb.append("}").toString();
    }

    private static String quote(String s) {
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
