"""kipcheck's remote storage manager (harness/backends/remote_storage) called directly, outside a
broker, through the RemoteStorageManager interface of a real Kafka release: a copy, reads of
byte ranges and indexes, the missing transaction index, deletes (twice) and no temporary file left."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from kipcheck.harness.backends import tiered
from kipcheck.harness.backends import releases
from kipcheck.harness.backends.kafka_dist import cache_root

CHECK = r"""
import java.io.*;
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import org.apache.kafka.common.*;
import org.apache.kafka.server.log.remote.storage.*;

public class Check {
    static void check(boolean ok, String what) { if (!ok) throw new AssertionError(what); }
    static byte[] all(InputStream in) throws IOException { try (in) { return in.readAllBytes(); } }

    public static void main(String[] a) throws Exception {
        Path dir = Paths.get(a[0]), src = Files.createDirectories(dir.resolve("src"));
        RemoteStorageManager rsm = (RemoteStorageManager) Class.forName(a[1]).getDeclaredConstructor().newInstance();
        rsm.configure(Map.of("dir", dir.resolve("remote").toString()));
        TopicIdPartition tp = new TopicIdPartition(Uuid.randomUuid(), new TopicPartition("t", 0));
        RemoteLogSegmentMetadata md = new RemoteLogSegmentMetadata(RemoteLogSegmentId.generateNew(tp),
                100L, 199L, 0L, 1, 0L, 10, Map.of(0, 100L));
        byte[] log = "0123456789".getBytes();
        Files.write(src.resolve("s.log"), log);
        for (String s : new String[]{"index", "timeindex", "snapshot"}) Files.write(src.resolve("s." + s), s.getBytes());
        ByteBuffer epochs = ByteBuffer.wrap("epochs".getBytes());
        check(rsm.copyLogSegmentData(md, new LogSegmentData(src.resolve("s.log"), src.resolve("s.index"),
                src.resolve("s.timeindex"), Optional.empty(), src.resolve("s.snapshot"), epochs)).isEmpty(), "custom metadata");
        check(epochs.position() == 0, "the caller's buffer consumed");
        check(Arrays.equals(all(rsm.fetchLogSegment(md, 0)), log), "whole segment");
        check(new String(all(rsm.fetchLogSegment(md, 3))).equals("3456789"), "from position 3");
        check(new String(all(rsm.fetchLogSegment(md, 2, 4))).equals("234"), "positions 2..4, end inclusive");
        check(new String(all(rsm.fetchLogSegment(md, 8, 100))).equals("89"), "end past the segment");
        check(new String(all(rsm.fetchIndex(md, RemoteStorageManager.IndexType.OFFSET))).equals("index"), "offset index");
        check(new String(all(rsm.fetchIndex(md, RemoteStorageManager.IndexType.LEADER_EPOCH))).equals("epochs"), "epochs");
        try { rsm.fetchIndex(md, RemoteStorageManager.IndexType.TRANSACTION); check(false, "txn index"); }
        catch (RemoteResourceNotFoundException expected) { }
        try (var files = Files.walk(dir.resolve("remote"))) {
            check(files.noneMatch(p -> p.getFileName().toString().contains(".tmp-")), "a temporary file left");
        }
        rsm.deleteLogSegmentData(md);
        rsm.deleteLogSegmentData(md);  // a retry succeeds
        try { rsm.fetchLogSegment(md, 0); check(false, "deleted segment"); }
        catch (RemoteResourceNotFoundException expected) { }
        rsm.close();
        System.out.println("ok");
    }
}
"""


def test_the_storage_manager_through_kafkas_interface(tmp_path):
    libs = sorted(api for api in cache_root().glob("kafka/*/kafka-storage-api-*[0-9].jar")
                  if releases.has(api.parent.name, "tiered-storage"))  # 3.3-3.5 have the jar, not the interface
    if not shutil.which("java") or not libs:
        pytest.skip("no java or no resolved Kafka in the cache")
    jar = tiered.storage_manager_jar()
    (tmp_path / "Check.java").write_text(CHECK)
    for api in libs:  # every cached release with tiered storage: the same jar against each one's interface
        lib = api.parent
        cp = os.pathsep.join([str(jar), str(api), *map(str, lib.glob("kafka-clients-*[0-9].jar"))])
        proc = subprocess.run(["java", "-cp", cp, str(tmp_path / "Check.java"), str(tmp_path / lib.name),
                               tiered.STORAGE_MANAGER], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok", f"Kafka {lib.name}: {proc.stderr[-2000:]}"
