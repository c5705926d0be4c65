import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.kafka.common.record.internal.MemoryRecords;
import org.apache.kafka.common.record.internal.MutableRecordBatch;
import org.apache.kafka.common.record.internal.Record;

/**
 * ValidateBatches OUT_FILE BATCH_FILE...: reads the record batches in each file with Kafka's own
 * MemoryRecords, runs ensureValid() (sizes, CRC-32C) on each, iterates its records (which
 * decompresses and parses them) and writes a "batch" line per batch then a "record" line per
 * record; a batch that fails gives one "invalid" line with the error instead.
 */
public final class ValidateBatches {
    public static void main(String[] args) throws Exception {
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[0])))) {
            for (int i = 1; i < args.length; i++) {
                out.println("file\t" + Path.of(args[i]).getFileName());
                MemoryRecords records = MemoryRecords.readableRecords(ByteBuffer.wrap(Files.readAllBytes(Path.of(args[i]))));
                for (MutableRecordBatch batch : records.batches()) {
                    try {
                        describe(batch, out);
                    } catch (RuntimeException e) {
                        out.println("invalid\t" + e.getClass().getSimpleName());
                    }
                }
            }
        }
    }

    private static void describe(MutableRecordBatch batch, PrintWriter out) {
        batch.ensureValid();
        StringBuilder lines = new StringBuilder();  // printed only if every record parses
        int count = 0;
        for (Record r : batch) {
            r.ensureValid();
            lines.append(String.join("\t", "record", Long.toString(r.offset()), Long.toString(r.timestamp()),
                    Integer.toString(r.sequence()), Canon.content(r.key(), r.value(), r.headers()))).append('\n');
            count++;
        }
        out.println(String.join("\t", "batch", Integer.toString(batch.sizeInBytes()), Byte.toString(batch.magic()),
                batch.compressionType().name, batch.timestampType().name,
                Boolean.toString(batch.isTransactional()), Boolean.toString(batch.isControlBatch()),
                Long.toString(batch.producerId()), Short.toString(batch.producerEpoch()),
                Integer.toString(batch.baseSequence()), Integer.toString(batch.lastSequence()),
                Long.toString(batch.baseOffset()), Long.toString(batch.lastOffset()),
                String.valueOf(batch.countOrNull()), Integer.toString(count), Long.toString(batch.maxTimestamp())));
        out.print(lines);
    }
}
