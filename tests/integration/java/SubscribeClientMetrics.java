/*
 * Sets a client-metrics subscription through Java's Admin client (what kafka-client-metrics.sh
 * does): SubscribeClientMetrics <bootstrap> <name> <metric prefixes, comma-separated> <interval ms>
 * <client id regex: the clients it applies to>.
 */
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;

public class SubscribeClientMetrics {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        try (Admin admin = Admin.create(props)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, args[1]);
            List<AlterConfigOp> ops = List.of(
                new AlterConfigOp(new ConfigEntry("metrics", args[2]), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("interval.ms", args[3]), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("match", "client_id=" + args[4]), AlterConfigOp.OpType.SET));
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
        System.out.println("subscribed " + args[1]);
    }
}
