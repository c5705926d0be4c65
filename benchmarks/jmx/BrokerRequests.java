// Reads Apache Kafka's own request metrics over JMX, one JSON line per line read on stdin:
// the harness snapshots them before and after a run (benchmarks/broker_requests.py).  Run as a
// single-file program (java BrokerRequests.java HOST:PORT): no build step, only the JDK.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Locale;
import java.util.Set;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerRequests {
    private static MBeanServerConnection server;

    /** Sum of a numeric attribute over every MBean matching the pattern (e.g. all versions of a request). */
    private static double sum(String pattern, String attribute) throws Exception {
        double total = 0;
        Set<ObjectName> names = server.queryNames(new ObjectName(pattern), null);
        for (ObjectName name : names) {
            total += ((Number) server.getAttribute(name, attribute)).doubleValue();
        }
        return total;
    }

    /** A histogram's count and total (Kafka's histograms expose Count and the exact Mean). */
    private static String histogram(String key, String pattern) throws Exception {
        double count = 0, total = 0;
        for (ObjectName name : server.queryNames(new ObjectName(pattern), null)) {
            double n = ((Number) server.getAttribute(name, "Count")).doubleValue();
            count += n;
            total += n * ((Number) server.getAttribute(name, "Mean")).doubleValue();
        }
        return String.format(Locale.ROOT, "\"%s_count\": %.0f, \"%s_total\": %.3f", key, count, key, total);
    }

    private static String counter(String key, String pattern) throws Exception {
        return String.format(Locale.ROOT, "\"%s\": %.0f", key, sum(pattern, "Count"));
    }

    /** Every request type's count ("requests": {"InitProducerId": n, ...}), for the exactly-once cost. */
    private static String requests() throws Exception {
        StringBuilder out = new StringBuilder("\"requests\": {");
        java.util.TreeMap<String, Double> counts = new java.util.TreeMap<>();
        for (ObjectName name : server.queryNames(new ObjectName("kafka.network:type=RequestMetrics,name=RequestsPerSec,*"), null)) {
            counts.merge(name.getKeyProperty("request"), ((Number) server.getAttribute(name, "Count")).doubleValue(), Double::sum);
        }
        String sep = "";
        for (java.util.Map.Entry<String, Double> e : counts.entrySet()) {
            out.append(String.format(Locale.ROOT, "%s\"%s\": %.0f", sep, e.getKey(), e.getValue()));
            sep = ", ";
        }
        return out.append("}").toString();
    }

    public static void main(String[] args) throws Exception {
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + args[0] + "/jmxrmi");
        try (JMXConnector connector = JMXConnectorFactory.connect(url)) {
            server = connector.getMBeanServerConnection();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String produce = "kafka.network:type=RequestMetrics,request=Produce,";
            while (in.readLine() != null) {
                String line = "{" + String.join(", ",
                        counter("produce_requests", produce + "name=RequestsPerSec,*"),
                        histogram("request_bytes", produce + "name=RequestBytes,*"),
                        histogram("total_time_ms", produce + "name=TotalTimeMs,*"),
                        histogram("local_time_ms", produce + "name=LocalTimeMs,*"),
                        histogram("queue_time_ms", produce + "name=RequestQueueTimeMs,*"),
                        counter("topic_produce_requests", "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec"),
                        counter("messages_in", "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec"),
                        counter("bytes_in", "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec"),
                        requests()) + "}";
                System.out.println(line);
                System.out.flush();
            }
        }
    }
}
