import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;

/** Every configuration key of the Java producer: name, default and validator, one per line
 *  (tab-separated) into the file named by the first argument; the keys of the consumer and admin
 *  client that the producer lacks, one per line, into the second. */
public class ProducerKeys {
  public static void main(String[] args) throws Exception {
    try (PrintWriter out = new PrintWriter(args[0], StandardCharsets.UTF_8)) {
      for (ConfigDef.ConfigKey k : ProducerConfig.configDef().configKeys().values()) {
        Object d = k.defaultValue == ConfigDef.NO_DEFAULT_VALUE ? "<none>" : k.defaultValue;
        out.println(k.name + "\t" + d + "\t" + k.validator);
      }
    }
    Set<String> others = new TreeSet<>(ConsumerConfig.configNames());
    others.addAll(AdminClientConfig.configNames());
    others.removeAll(ProducerConfig.configNames());
    try (PrintWriter out = new PrintWriter(args[1], StandardCharsets.UTF_8)) {
      for (String name : others) out.println(name);
    }
  }
}
