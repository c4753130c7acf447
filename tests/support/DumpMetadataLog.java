// Kafka's own reading of a KRaft metadata log segment, for tests/test_metadata_log.py to hold
// harness/metadata_log.py to: one line per partition record, decoded by Kafka's MetadataRecordSerde.
// Run as a single-file program on Kafka's classpath: java -cp CP DumpMetadataLog.java SEGMENT
import java.io.File;
import java.nio.ByteBuffer;
import org.apache.kafka.common.metadata.FeatureLevelRecord;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.internal.FileRecords;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class DumpMetadataLog {
    public static void main(String[] args) throws Exception {
        try (FileRecords log = FileRecords.open(new File(args[0]))) {
            for (RecordBatch batch : log.batches()) {
                if (batch.isControlBatch()) continue;
                for (Record record : batch) {
                    ByteBuffer value = record.value();
                    ApiMessageAndVersion m = MetadataRecordSerde.INSTANCE.read(new ByteBufferAccessor(value), value.remaining());
                    if (m.message() instanceof PartitionRecord p) {
                        System.out.println(record.offset() + " create " + p.partitionId() + " " + p.leader() + " "
                            + p.isr() + " " + p.eligibleLeaderReplicas() + " " + p.leaderRecoveryState());
                    } else if (m.message() instanceof PartitionChangeRecord c) {
                        System.out.println(record.offset() + " change " + c.partitionId() + " " + c.leader() + " "
                            + c.isr() + " " + c.eligibleLeaderReplicas() + " " + c.leaderRecoveryState());
                    } else if (m.message() instanceof FeatureLevelRecord f) {
                        System.out.println(record.offset() + " feature " + f.name() + " " + f.featureLevel());
                    }
                }
            }
        }
    }
}
