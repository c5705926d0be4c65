import java.io.BufferedWriter;
import java.lang.reflect.Constructor;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

/**
 * MessageCodec IN_FILE OUT_FILE: Kafka's own generated message classes encode and decode.
 *
 * Each IN_FILE line is NAME TAB VERSION TAB JSON TAB HEX, NAME a message such as
 * FindCoordinatorRequest.  Kafka builds NAME's Data object from the JSON (its JsonConverter,
 * camelCase fields) and encodes it at VERSION; it also decodes HEX (bytes we encoded) and writes
 * that back as JSON.  Each OUT_FILE line: JAVA_HEX TAB JSON_OF_OUR_BYTES.
 */
public final class MessageCodec {
    public static void main(String[] args) throws Exception {
        ObjectMapper mapper = new ObjectMapper();
        List<String> lines = Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8);
        HexFormat hex = HexFormat.of();
        try (BufferedWriter out = Files.newBufferedWriter(Path.of(args[1]), StandardCharsets.UTF_8)) {
            for (String line : lines) {
                String[] f = line.split("\t", -1);
                String name = f[0];
                short version = Short.parseShort(f[1]);
                JsonNode value = mapper.readTree(f[2]);
                Class<?> data = Class.forName("org.apache.kafka.common.message." + name + "Data");
                Class<?> converter = Class.forName("org.apache.kafka.common.message." + name + "DataJsonConverter");
                Method read = converter.getMethod("read", JsonNode.class, short.class);
                Message message = (Message) read.invoke(null, value, version);
                ByteBuffer encoded = MessageUtil.toByteBufferAccessor(message, version).buffer();
                byte[] ours = hex.parseHex(f[3]);
                Constructor<?> decode = data.getConstructor(org.apache.kafka.common.protocol.Readable.class, short.class);
                Object decoded = decode.newInstance(new ByteBufferAccessor(ByteBuffer.wrap(ours)), version);
                Method write = converter.getMethod("write", data, short.class);
                JsonNode back = (JsonNode) write.invoke(null, decoded, version);
                out.write(hex.formatHex(MessageUtil.byteBufferToArray(encoded)));
                out.write('\t');
                out.write(mapper.writeValueAsString(back));
                out.write('\n');
            }
        }
    }
}
