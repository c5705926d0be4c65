import java.io.ByteArrayOutputStream;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;

/**
 * Apache Avro's own reader as the oracle of our Avro encoder: {@code AvroRoundTrip schema.json in out}
 * decodes every datum of {@code in} (one per line, lowercase hex; "-" for none) with
 * GenericDatumReader and the schema, checks that it used every byte, and writes the datum back with
 * GenericDatumWriter: one line per input, the hex of Java's encoding, a tab, the datum as
 * GenericData prints it.  Decoding then encoding gives our bytes again only if Java read the values
 * we meant.
 */
public final class AvroRoundTrip {
    public static void main(String[] args) throws Exception {
        GenericData.get().setFastReaderEnabled(false);  // the reader below makes the maps
        Schema schema = new Schema.Parser().parse(Files.readString(Paths.get(args[0]), StandardCharsets.UTF_8));
        GenericDatumReader<Object> reader = new GenericDatumReader<>(schema) {
            @Override
            protected Object newMap(Object old, int size) {
                return new LinkedHashMap<>(size);  // a map's entries written back in the order read
            }
        };
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);
        HexFormat hex = HexFormat.of();
        List<String> lines = Files.readAllLines(Paths.get(args[1]), StandardCharsets.UTF_8);
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[2]), StandardCharsets.UTF_8))) {
            for (String line : lines) {
                if (line.equals("-")) {
                    out.println("-");
                    continue;
                }
                byte[] data = hex.parseHex(line);
                BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(data, null);
                Object datum = reader.read(null, decoder);
                if (!decoder.isEnd()) {
                    throw new IllegalStateException("bytes left over after " + GenericData.get().toString(datum));
                }
                ByteArrayOutputStream bytes = new ByteArrayOutputStream();
                BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(bytes, null);
                writer.write(datum, encoder);
                encoder.flush();
                out.println(hex.formatHex(bytes.toByteArray()) + "\t" + GenericData.get().toString(datum));
            }
        }
    }
}
