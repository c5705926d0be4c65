import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.StringJoiner;

import org.apache.kafka.common.header.Header;

/**
 * The canonical text form of a record shared with the Python tests (tests/oracle/support.py):
 * tab-separated tokens, bytes as "x" + lowercase hex ("x" alone is empty), null as "-".
 */
final class Canon {
    private static final HexFormat HEX = HexFormat.of();

    private Canon() {}

    static String tok(byte[] b) {
        return b == null ? "-" : "x" + HEX.formatHex(b);
    }

    static String tok(ByteBuffer b) {
        if (b == null) return "-";
        byte[] copy = new byte[b.remaining()];
        b.duplicate().get(copy);
        return tok(copy);
    }

    static byte[] bytes(String token) {
        if (token.equals("-")) return null;
        if (!token.startsWith("x")) throw new IllegalArgumentException("bad token " + token);
        return HEX.parseHex(token.substring(1));
    }

    /** key, value, then each header as key token + value token: the record's content. */
    static String content(ByteBuffer key, ByteBuffer value, Header[] headers) {
        StringJoiner line = new StringJoiner("\t");
        line.add(tok(key)).add(tok(value));
        for (Header h : headers) {
            line.add(tok(h.key().getBytes(StandardCharsets.UTF_8))).add(tok(h.value()));
        }
        return line.toString();
    }

    static String content(byte[] key, byte[] value, Iterable<Header> headers) {
        StringJoiner line = new StringJoiner("\t");
        line.add(tok(key)).add(tok(value));
        for (Header h : headers) {
            line.add(tok(h.key().getBytes(StandardCharsets.UTF_8))).add(tok(h.value()));
        }
        return line.toString();
    }
}
