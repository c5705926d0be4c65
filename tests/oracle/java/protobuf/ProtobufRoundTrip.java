import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

import com.google.protobuf.DescriptorProtos.FileDescriptorProto;
import com.google.protobuf.DescriptorProtos.FileDescriptorSet;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Descriptors.FileDescriptor;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Message;
import com.google.protobuf.TextFormat;

/**
 * Protobuf's Java runtime as the oracle of our Protobuf encoder: {@code ProtobufRoundTrip set.pb
 * full.Name in out} builds the message's descriptor from a descriptor set (protoc's, imports
 * included), parses every value of {@code in} (one per line, lowercase hex; "-" for none) as a
 * DynamicMessage, checks that no field of it (nested ones too) was unknown to the schema, and
 * serializes it again: one line per input, the hex of Java's encoding, a tab, the message as text.
 * Parsing then serializing gives our bytes again only if Java read the fields we meant.
 */
public final class ProtobufRoundTrip {
    public static void main(String[] args) throws Exception {
        FileDescriptorSet set = FileDescriptorSet.parseFrom(Files.readAllBytes(Paths.get(args[0])));
        Map<String, FileDescriptor> built = new HashMap<>();
        Descriptor descriptor = null;
        for (FileDescriptorProto file : set.getFileList()) {  // protoc lists dependencies first
            List<FileDescriptor> deps = new ArrayList<>();
            for (String dep : file.getDependencyList()) {
                deps.add(built.get(dep));
            }
            FileDescriptor fd = FileDescriptor.buildFrom(file, deps.toArray(new FileDescriptor[0]));
            built.put(file.getName(), fd);
            for (Descriptor d : fd.getMessageTypes()) {
                if (d.getFullName().equals(args[1])) {
                    descriptor = d;
                }
            }
        }
        if (descriptor == null) {
            throw new IllegalArgumentException("no message " + args[1] + " in " + args[0]);
        }
        HexFormat hex = HexFormat.of();
        List<String> lines = Files.readAllLines(Paths.get(args[2]), StandardCharsets.UTF_8);
        try (PrintWriter out = new PrintWriter(Files.newBufferedWriter(Paths.get(args[3]), StandardCharsets.UTF_8))) {
            for (String line : lines) {
                if (line.equals("-")) {
                    out.println("-");
                    continue;
                }
                DynamicMessage message = DynamicMessage.parseFrom(descriptor, hex.parseHex(line));
                requireKnown(message, descriptor.getFullName());
                out.println(hex.formatHex(message.toByteArray()) + "\t" + TextFormat.shortDebugString(message));
            }
        }
    }

    /** Fails on a field the schema does not have, anywhere in the message. */
    private static void requireKnown(Message message, String path) {
        if (!message.getUnknownFields().asMap().isEmpty()) {
            throw new IllegalStateException(path + ": fields unknown to the schema " + message.getUnknownFields());
        }
        for (Map.Entry<FieldDescriptor, Object> field : message.getAllFields().entrySet()) {
            if (field.getKey().getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
                continue;
            }
            String where = path + "." + field.getKey().getName();
            if (field.getKey().isRepeated()) {
                for (Object item : (List<?>) field.getValue()) {
                    requireKnown((Message) item, where);
                }
            } else {
                requireKnown((Message) field.getValue(), where);
            }
        }
    }
}
