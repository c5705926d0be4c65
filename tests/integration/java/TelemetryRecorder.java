/*
 * A broker-side recorder of the client metrics clients push (KIP-714), for the tests: a metrics
 * reporter that is also a ClientTelemetryExporterProvider (Apache Kafka 4.x), so the broker hands
 * it every PushTelemetry payload it accepted -- decompressed and checked by the broker -- which it
 * decodes with the broker's own OpenTelemetry classes (shaded in kafka-clients) and appends as one
 * JSON line to the file named by the broker setting `telemetry.recorder.file`.
 */
import java.io.FileWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.telemetry.ClientTelemetryContext;
import org.apache.kafka.server.telemetry.ClientTelemetryExporter;
import org.apache.kafka.server.telemetry.ClientTelemetryExporterProvider;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public class TelemetryRecorder implements MetricsReporter, ClientTelemetryExporterProvider {
    private String path;

    @Override
    public void configure(Map<String, ?> configs) {
        Object file = configs.get("telemetry.recorder.file");
        path = file == null ? null : file.toString();
    }

    @Override public void init(List<KafkaMetric> metrics) { }
    @Override public void metricChange(KafkaMetric metric) { }
    @Override public void metricRemoval(KafkaMetric metric) { }
    @Override public void close() { }

    @Override
    public ClientTelemetryExporter clientTelemetryExporter() {
        return this::record;
    }

    private synchronized void record(ClientTelemetryContext context, ClientTelemetryPayload payload) {
        if (path == null) {
            return;
        }
        StringBuilder out = new StringBuilder("{");
        field(out, "client_instance_id", payload.clientInstanceId().toString()).append(',');
        out.append("\"terminating\":").append(payload.isTerminating()).append(',');
        field(out, "content_type", payload.contentType()).append(',');
        field(out, "client_id", context.authorizableRequestContext().clientId()).append(',');
        out.append("\"push_interval_ms\":").append(context.pushIntervalMs()).append(',');
        MetricsData data;
        try {
            ByteBuffer bytes = payload.data().duplicate();
            data = MetricsData.parseFrom(bytes);
        } catch (Exception e) {
            field(out, "error", e.toString()).append('}');
            write(out);
            return;
        }
        out.append("\"resource\":{");
        boolean first = true;
        for (ResourceMetrics rm : data.getResourceMetricsList()) {
            for (KeyValue kv : rm.getResource().getAttributesList()) {
                if (!first) out.append(',');
                first = false;
                field(out, kv.getKey(), kv.getValue().getStringValue());
            }
        }
        out.append("},\"metrics\":[");
        first = true;
        for (ResourceMetrics rm : data.getResourceMetricsList()) {
            for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                for (Metric m : sm.getMetricsList()) {
                    List<NumberDataPoint> points;
                    String kind;
                    String temporality = "";
                    boolean monotonic = false;
                    switch (m.getDataCase()) {
                        case SUM:
                            kind = "sum";
                            points = m.getSum().getDataPointsList();
                            temporality = m.getSum().getAggregationTemporality().name();
                            monotonic = m.getSum().getIsMonotonic();
                            break;
                        case GAUGE:
                            kind = "gauge";
                            points = m.getGauge().getDataPointsList();
                            break;
                        default:
                            kind = m.getDataCase().name();
                            points = List.of();
                    }
                    for (NumberDataPoint p : points) {
                        if (!first) out.append(',');
                        first = false;
                        out.append('{');
                        field(out, "scope", sm.getScope().getName()).append(',');
                        field(out, "name", m.getName()).append(',');
                        field(out, "unit", m.getUnit()).append(',');
                        field(out, "kind", kind).append(',');
                        field(out, "temporality", temporality).append(',');
                        out.append("\"monotonic\":").append(monotonic).append(',');
                        out.append("\"start_ns\":").append(p.getStartTimeUnixNano()).append(',');
                        out.append("\"time_ns\":").append(p.getTimeUnixNano()).append(',');
                        out.append("\"value\":");
                        if (p.getValueCase() == NumberDataPoint.ValueCase.AS_DOUBLE) {
                            out.append(p.getAsDouble());
                        } else {
                            out.append(p.getAsInt());
                        }
                        out.append(",\"value_type\":\"").append(p.getValueCase().name()).append("\"}");
                    }
                }
            }
        }
        out.append("]}");
        write(out);
    }

    private void write(StringBuilder line) {
        try (FileWriter w = new FileWriter(path, true)) {
            w.write(line.append('\n').toString());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static StringBuilder field(StringBuilder out, String key, String value) {
        return out.append('"').append(escape(key)).append("\":\"").append(escape(value)).append('"');
    }

    private static String escape(String s) {
        StringBuilder b = new StringBuilder();
        for (char c : (s == null ? "" : s).toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.toString();
    }
}
