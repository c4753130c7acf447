package kipcheck.seeded;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The switchboard the inlined advice reads: which bug is on (at most one) and how often each
 * fired. Public static members only: the advice code is copied into Kafka's own classes.
 */
public final class Bugs {
    /** The bug switched on, or "" for none. Written by the agent's control-file poller. */
    public static volatile String active = "";

    private static final Map<String, AtomicLong> FIRED = new ConcurrentHashMap<>();
    private static final Map<String, AtomicLong> CALLS = new ConcurrentHashMap<>();

    private Bugs() {
    }

    public static boolean on(String name) {
        return name.equals(active);
    }

    /** True on every {@code period}-th call while the bug is on: a slip that bites some of the time. */
    public static boolean every(String name, int period) {
        return CALLS.computeIfAbsent(name, k -> new AtomicLong()).incrementAndGet() % period == 0;
    }

    /** Count one firing: the slip changed what the broker did. */
    public static void fired(String name) {
        FIRED.computeIfAbsent(name, k -> new AtomicLong()).incrementAndGet();
    }

    public static Map<String, Long> firedCounts() {
        Map<String, Long> out = new java.util.TreeMap<>();
        FIRED.forEach((k, v) -> out.put(k, v.get()));
        return out;
    }
}
