import java.io.FileInputStream;
import java.util.Properties;
import java.util.concurrent.Future;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client as a user runs it: java JavaProduce PROPERTIES TOPIC COUNT sends the values
 * java-0..java-(COUNT-1) with the producer settings of the properties file (an MSK job's, with
 * AWS's aws-msk-iam-auth on the classpath), waits for every one, prints OK or the error.
 */
public final class JavaProduce {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        int count = Integer.parseInt(args[2]);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                sent.add(producer.send(new ProducerRecord<>(args[1], "java-" + i)));
            }
            for (Future<RecordMetadata> f : sent) {
                f.get();
            }
        }
        System.out.println("OK");
    }
}
