package kipcheck.rsm;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

/**
 * A RemoteStorageManager (KIP-405) that keeps remote segments as files in one directory every
 * broker shares ({@code rsm.config.dir}).
 *
 * <p>Layout: {@code <dir>/<topic>-<partition>-<topicId>/<startOffset, 20 digits>-<segment uuid>.<ext>},
 * one file per segment part: {@code .log}, {@code .index}, {@code .timeindex}, {@code .txnindex}
 * (only when the segment has one), {@code .snapshot}, {@code .leader-epoch-checkpoint}.
 *
 * <p>Every file is written under a temporary name and renamed into place (an atomic move), the
 * {@code .log} last: a broker killed mid-copy leaves at most a temporary file, never a torn part
 * another broker could read. (Kafka marks the copy finished in its remote log metadata only after
 * this method returns, so an unfinished segment is never fetched anyway; a new attempt uses a new
 * segment id.)
 *
 * <p>Uses only what RemoteStorageManager, LogSegmentData and RemoteLogSegmentMetadata have in
 * every release from 3.6 to 4.4 (checked with javap on each release's kafka-storage-api jar).
 */
public class FileRemoteStorageManager implements RemoteStorageManager {
    /** the config key under remote.log.storage.manager.impl.prefix (rsm.config.dir) */
    public static final String DIR_CONFIG = "dir";

    private static final String SEGMENT = ".log";

    private volatile Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get(DIR_CONFIG);
        if (dir == null || dir.toString().isEmpty()) {
            throw new IllegalArgumentException(getClass().getName() + " needs " + DIR_CONFIG
                    + " (rsm.config." + DIR_CONFIG + "): the directory every broker shares");
        }
        try {
            root = Files.createDirectories(Paths.get(dir.toString()));
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot create the remote storage directory " + dir, e);
        }
    }

    private static String suffix(IndexType type) {
        switch (type) {
            case OFFSET: return ".index";
            case TIMESTAMP: return ".timeindex";
            case TRANSACTION: return ".txnindex";
            case PRODUCER_SNAPSHOT: return ".snapshot";
            case LEADER_EPOCH: return ".leader-epoch-checkpoint";
            default: throw new IllegalArgumentException("unknown index type " + type);
        }
    }

    private Path partitionDir(RemoteLogSegmentMetadata md) {
        if (root == null) {
            throw new IllegalStateException("not configured");
        }
        TopicIdPartition tp = md.remoteLogSegmentId().topicIdPartition();
        return root.resolve(tp.topic() + "-" + tp.partition() + "-" + tp.topicId());
    }

    private static String baseName(RemoteLogSegmentMetadata md) {
        return String.format("%020d-%s", md.startOffset(), md.remoteLogSegmentId().id());
    }

    private Path file(RemoteLogSegmentMetadata md, String suffix) {
        return partitionDir(md).resolve(baseName(md) + suffix);
    }

    // -- copy ------------------------------------------------------------------------------
    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata md,
                                                                               LogSegmentData data)
            throws RemoteStorageException {
        try {
            Files.createDirectories(partitionDir(md));
            put(data.offsetIndex(), file(md, suffix(IndexType.OFFSET)));
            put(data.timeIndex(), file(md, suffix(IndexType.TIMESTAMP)));
            if (data.transactionIndex().isPresent()) {
                put(data.transactionIndex().get(), file(md, suffix(IndexType.TRANSACTION)));
            }
            put(data.producerSnapshotIndex(), file(md, suffix(IndexType.PRODUCER_SNAPSHOT)));
            putBytes(data.leaderEpochIndex(), file(md, suffix(IndexType.LEADER_EPOCH)));
            put(data.logSegment(), file(md, SEGMENT)); // last: a .log in place means every index is too
        } catch (IOException | RuntimeException e) {
            deleteQuietly(md);
            throw new RemoteStorageException("copying " + md.remoteLogSegmentId() + " to " + partitionDir(md)
                    + " failed", e);
        }
        return Optional.empty();
    }

    private static Path temporary(Path target) {
        return target.resolveSibling(target.getFileName() + ".tmp-" + UUID.randomUUID());
    }

    private static void put(Path source, Path target) throws IOException {
        Path tmp = temporary(target);
        try {
            Files.copy(source, tmp);
            commit(tmp, target);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static void putBytes(ByteBuffer bytes, Path target) throws IOException {
        Path tmp = temporary(target);
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                ByteBuffer b = bytes.duplicate(); // the caller's position stays where it was
                while (b.hasRemaining()) {
                    ch.write(b);
                }
            }
            commit(tmp, target);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** No fsync: a killed broker's page cache survives it; a lost machine is not a fault kipcheck injects. */
    private static void commit(Path tmp, Path target) throws IOException {
        Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    // -- fetch -----------------------------------------------------------------------------
    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition) throws RemoteStorageException {
        return fetchLogSegment(md, startPosition, Integer.MAX_VALUE);
    }

    /** The segment's bytes from startPosition to endPosition, both inclusive (capped at the segment's end). */
    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition, int endPosition)
            throws RemoteStorageException {
        if (startPosition < 0 || endPosition < startPosition) {
            throw new IllegalArgumentException("bad positions: start " + startPosition + ", end " + endPosition);
        }
        Path p = file(md, SEGMENT);
        FileChannel ch = open(p);
        try {
            long limit = Math.max(0, Math.min((long) endPosition + 1, ch.size()) - startPosition);
            ch.position(startPosition);
            return new Bounded(Channels.newInputStream(ch), limit);
        } catch (IOException e) {
            closeQuietly(ch);
            throw new RemoteStorageException("reading " + p + " failed", e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata md, IndexType indexType) throws RemoteStorageException {
        // A segment without a transaction index has no .txnindex: RemoteResourceNotFoundException,
        // which Kafka's RemoteIndexCache reads as an empty index.
        return Channels.newInputStream(open(file(md, suffix(indexType))));
    }

    private static FileChannel open(Path p) throws RemoteStorageException {
        try {
            return FileChannel.open(p, StandardOpenOption.READ);
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no remote file " + p);
        } catch (IOException e) {
            throw new RemoteStorageException("opening " + p + " failed", e);
        }
    }

    // -- delete ----------------------------------------------------------------------------
    /** Idempotent: deleting a segment that is already gone (a retry) succeeds. */
    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata md) throws RemoteStorageException {
        Path dir = partitionDir(md);
        if (!Files.isDirectory(dir)) {
            return;
        }
        try {
            Files.deleteIfExists(file(md, SEGMENT)); // first: no reader finds a segment whose indexes are gone
            try (DirectoryStream<Path> parts = Files.newDirectoryStream(dir, baseName(md) + ".*")) {
                for (Path part : parts) {
                    Files.deleteIfExists(part);
                }
            }
        } catch (IOException e) {
            throw new RemoteStorageException("deleting " + md.remoteLogSegmentId() + " from " + dir + " failed", e);
        }
    }

    private void deleteQuietly(RemoteLogSegmentMetadata md) {
        try {
            deleteLogSegmentData(md);
        } catch (RemoteStorageException | RuntimeException ignored) {
            // the copy's own failure is the one reported
        }
    }

    private static void closeQuietly(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // nothing was read
        }
    }

    @Override
    public void close() {
    }

    /** A stream that ends after `remaining` bytes. */
    private static final class Bounded extends FilterInputStream {
        private long remaining;

        Bounded(InputStream in, long remaining) {
            super(in);
            this.remaining = remaining;
        }

        @Override
        public int read() throws IOException {
            if (remaining <= 0) {
                return -1;
            }
            int b = super.read();
            if (b >= 0) {
                remaining--;
            }
            return b;
        }

        @Override
        public int read(byte[] buf, int off, int len) throws IOException {
            if (len == 0) {
                return 0;
            }
            if (remaining <= 0) {
                return -1;
            }
            int n = super.read(buf, off, (int) Math.min(len, remaining));
            if (n > 0) {
                remaining -= n;
            }
            return n;
        }

        @Override
        public long skip(long n) throws IOException {
            long skipped = super.skip(Math.min(n, remaining));
            remaining -= skipped;
            return skipped;
        }

        @Override
        public int available() throws IOException {
            return (int) Math.min(super.available(), remaining);
        }

        @Override
        public boolean markSupported() {
            return false;
        }
    }
}
