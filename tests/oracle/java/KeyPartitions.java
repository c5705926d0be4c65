import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.utils.Utils;

/**
 * KeyPartitions KEYS_FILE OUT_FILE MAX_PARTITIONS: the Java producer's partition of each key.
 *
 * KEYS_FILE: int32 key count, then per key int32 length and its bytes.  OUT_FILE: Utils.murmur2
 * of every key (int32 each), then for n = 1..MAX_PARTITIONS the partition
 * BuiltInPartitioner.partitionForKey(key, n) of every key (int16 each); all big-endian.
 */
public final class KeyPartitions {
    public static void main(String[] args) throws Exception {
        byte[][] keys;
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(Path.of(args[0]))))) {
            keys = new byte[in.readInt()][];
            for (int i = 0; i < keys.length; i++) {
                keys[i] = in.readNBytes(in.readInt());
            }
        }
        int maxPartitions = Integer.parseInt(args[2]);
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(Files.newOutputStream(Path.of(args[1])), 1 << 16))) {
            for (byte[] key : keys) {
                out.writeInt(Utils.murmur2(key));
            }
            for (int n = 1; n <= maxPartitions; n++) {
                for (byte[] key : keys) {
                    out.writeShort(BuiltInPartitioner.partitionForKey(key, n));
                }
            }
        }
    }
}
