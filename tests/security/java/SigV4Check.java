import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.Map;
import java.util.TreeMap;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * What Amazon MSK checks of an IAM sign-in, recomputed from the public SigV4 specification with the
 * test's own keys: the action, the algorithm, the signed header, the credential scope (known key,
 * region, service kafka-cluster), the expiry, a temporary session token's expiry (the tests'
 * stand-ins write it in the token), and the signature over GET / with the one header host.
 * Returns the access key id signed with; throws IllegalArgumentException saying what is wrong.
 */
public final class SigV4Check {
    private static final DateTimeFormatter STAMP =
            DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(ZoneOffset.UTC);

    private SigV4Check() {}

    public static String check(Map<String, String> params, String host, String region,
                               Map<String, String> secrets, long nowMs) throws Exception {
        require("kafka-cluster:Connect".equals(params.get("Action")), "Action is not kafka-cluster:Connect");
        require("AWS4-HMAC-SHA256".equals(params.get("X-Amz-Algorithm")), "X-Amz-Algorithm is not AWS4-HMAC-SHA256");
        require("host".equals(params.get("X-Amz-SignedHeaders")), "X-Amz-SignedHeaders is not host");
        String stamp = params.get("X-Amz-Date");
        require(stamp != null && stamp.length() == 16, "no X-Amz-Date");
        String[] credential = String.valueOf(params.get("X-Amz-Credential")).split("/");
        require(credential.length == 5, "X-Amz-Credential is not key/date/region/service/aws4_request");
        require(credential[1].equals(stamp.substring(0, 8)), "the credential's date is not X-Amz-Date's");
        require(credential[2].equals(region), "signed for region " + credential[2] + ", not " + region);
        require(credential[3].equals("kafka-cluster") && credential[4].equals("aws4_request"),
                "signed for service " + credential[3] + ", not kafka-cluster");
        String secret = secrets.get(credential[0]);
        require(secret != null, "unknown access key " + credential[0]);
        long expires = Long.parseLong(String.valueOf(params.get("X-Amz-Expires")));
        require(expires > 0 && expires <= 900, "X-Amz-Expires is not in (0, 900]");
        long signedMs = Instant.from(STAMP.parse(stamp)).toEpochMilli();
        require(signedMs <= nowMs + 300_000, "signed in the future");
        require(nowMs <= signedMs + expires * 1000, "expired");
        String signature = params.get("X-Amz-Signature");
        require(signature != null, "no X-Amz-Signature");
        // temporary credentials: the tests' stand-ins issue session tokens "expires-<epoch s>-<n>";
        // a signature made with one past its expiry is refused, as STS's expired tokens are
        String token = params.get("X-Amz-Security-Token");
        if (token != null && token.startsWith("expires-")) {
            long tokenExpiresMs = Long.parseLong(token.split("-")[1]) * 1000;
            require(signedMs < tokenExpiresMs && nowMs < tokenExpiresMs, "the session token expired");
        }

        TreeMap<String, String> signed = new TreeMap<>(params);
        signed.remove("X-Amz-Signature");
        StringBuilder query = new StringBuilder();
        for (Map.Entry<String, String> e : signed.entrySet()) {
            if (query.length() > 0) query.append('&');
            query.append(encode(e.getKey())).append('=').append(encode(e.getValue()));
        }
        String canonical = "GET\n/\n" + query + "\nhost:" + host + "\n\nhost\n" + hex(sha256(new byte[0]));
        String scope = stamp.substring(0, 8) + "/" + region + "/kafka-cluster/aws4_request";
        String toSign = "AWS4-HMAC-SHA256\n" + stamp + "\n" + scope + "\n"
                + hex(sha256(canonical.getBytes(StandardCharsets.UTF_8)));
        byte[] key = hmac(("AWS4" + secret).getBytes(StandardCharsets.UTF_8), stamp.substring(0, 8));
        key = hmac(key, region);
        key = hmac(key, "kafka-cluster");
        key = hmac(key, "aws4_request");
        String expected = hex(hmac(key, toSign));
        require(MessageDigest.isEqual(expected.getBytes(StandardCharsets.US_ASCII),
                signature.getBytes(StandardCharsets.US_ASCII)), "the signature does not match");
        return credential[0];
    }

    /** Append what was refused and why to the file the listener's JAAS option refusals names. */
    public static synchronized void refused(Object path, String what) {
        if (path == null) return;
        try {
            java.nio.file.Files.writeString(java.nio.file.Path.of(path.toString()), what + "\n",
                    StandardCharsets.UTF_8, java.nio.file.StandardOpenOption.CREATE,
                    java.nio.file.StandardOpenOption.APPEND);
        } catch (java.io.IOException e) {
            System.err.println(what);
        }
    }

    private static void require(boolean ok, String why) {
        if (!ok) throw new IllegalArgumentException(why);
    }

    private static String encode(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20").replace("*", "%2A").replace("%7E", "~");
    }

    private static byte[] sha256(byte[] data) throws Exception {
        return MessageDigest.getInstance("SHA-256").digest(data);
    }

    private static byte[] hmac(byte[] key, String text) throws Exception {
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        return mac.doFinal(text.getBytes(StandardCharsets.UTF_8));
    }

    private static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b));
        return out.toString();
    }
}
