import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * ProduceFromSpec BOOTSTRAP SPEC_FILE OUT_FILE CODEC=TOPIC...: sends the records of SPEC_FILE
 * to each TOPIC with a KafkaProducer using CODEC, then writes where each record landed
 * ("topic partition offset", in spec order).
 *
 * A spec line: partition ("-" for the producer's choice), timestamp, key, value, then header
 * key/value token pairs, in Canon's token form (header keys are UTF-8 bytes).
 */
public final class ProduceFromSpec {
    public static void main(String[] args) throws Exception {
        List<String[]> spec = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of(args[1]))) {
            if (!line.isEmpty()) spec.add(line.split("\t", -1));
        }
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Path.of(args[2])))) {
            for (int i = 3; i < args.length; i++) {
                String[] codecTopic = args[i].split("=", 2);
                produce(args[0], codecTopic[0], codecTopic[1], spec, out);
            }
        }
    }

    private static void produce(String bootstrap, String codec, String topic, List<String[]> spec,
                                PrintWriter out) throws Exception {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        // batches are closed by flush() or by batch.size, not by time
        props.put(ProducerConfig.LINGER_MS_CONFIG, "10000");
        props.put(ProducerConfig.BATCH_SIZE_CONFIG, "16384");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
            for (String[] f : spec) {
                Integer partition = f[0].equals("-") ? null : Integer.valueOf(f[0]);
                RecordHeaders headers = new RecordHeaders();
                for (int h = 4; h < f.length; h += 2) {
                    headers.add(new RecordHeader(new String(Canon.bytes(f[h]), StandardCharsets.UTF_8),
                                                 Canon.bytes(f[h + 1])));
                }
                sent.add(producer.send(new ProducerRecord<>(topic, partition, Long.valueOf(f[1]),
                        Canon.bytes(f[2]), Canon.bytes(f[3]), headers)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) {
                RecordMetadata md = f.get();
                out.println(md.topic() + "\t" + md.partition() + "\t" + md.offset());
            }
        }
    }
}
