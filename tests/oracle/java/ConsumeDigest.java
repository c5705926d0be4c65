import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * ConsumeDigest BOOTSTRAP OUT_FILE TOPIC...: reads every partition of the topics from its
 * beginning to its end offset (assign + seekToBeginning, no group) and writes one line per
 * record: topic, partition, offset, timestamp type, timestamp, then Canon.content.
 */
public final class ConsumeDigest {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_uncommitted");
        props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "50");

        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props);
             PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[1])))) {
            List<TopicPartition> parts = new ArrayList<>();
            for (int i = 2; i < args.length; i++) {
                for (PartitionInfo p : consumer.partitionsFor(args[i], Duration.ofSeconds(30))) {
                    parts.add(new TopicPartition(args[i], p.partition()));
                }
            }
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            Map<TopicPartition, Long> end = consumer.endOffsets(parts, Duration.ofSeconds(30));
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (!parts.stream().allMatch(tp -> consumer.position(tp) >= end.get(tp))) {
                if (System.nanoTime() > deadline) throw new IllegalStateException("timed out at " + parts);
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.println(String.join("\t", r.topic(), Integer.toString(r.partition()),
                            Long.toString(r.offset()), r.timestampType().name, Long.toString(r.timestamp()),
                            Canon.content(r.key(), r.value(), r.headers())));
                }
            }
        }
    }
}
