import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigDef;

/** Every configuration key of the Java producer: name, default and validator, one per line
 *  (tab-separated) into the file named by the first argument. */
public class ProducerKeys {
  public static void main(String[] args) throws Exception {
    try (PrintWriter out = new PrintWriter(args[0], StandardCharsets.UTF_8)) {
      for (ConfigDef.ConfigKey k : ProducerConfig.configDef().configKeys().values()) {
        Object d = k.defaultValue == ConfigDef.NO_DEFAULT_VALUE ? "<none>" : k.defaultValue;
        out.println(k.name + "\t" + d + "\t" + k.validator);
      }
    }
  }
}
