import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

/**
 * The broker's OAUTHBEARER validator for Google Managed Kafka's token, as the service checks it:
 * three base64url parts, the header {"typ":"JWT","alg":"GOOG_OAUTH2_TOKEN"}, the claims (sub the
 * service account, exp ahead, scope kafka) and an access token the test's stand-in for Google's
 * token endpoint issued (its HMAC under the listener's JAAS option secret, for the same account,
 * not expired).  Refusals go to the file of the option refusals.
 */
public final class GoogleTokenValidator implements AuthenticateCallbackHandler {
    private byte[] secret;
    private Object refusals;

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        Map<String, ?> options = entries.get(0).getOptions();
        secret = ((String) options.get("secret")).getBytes(StandardCharsets.UTF_8);
        refusals = options.get("refusals");
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (callback instanceof OAuthBearerValidatorCallback) {
                validate((OAuthBearerValidatorCallback) callback);
            } else if (!(callback instanceof OAuthBearerExtensionsValidatorCallback)) {
                throw new UnsupportedCallbackException(callback);
            }
        }
    }

    private static String decode(String part) {
        return new String(Base64.getUrlDecoder().decode(part), StandardCharsets.UTF_8);
    }

    private void validate(OAuthBearerValidatorCallback callback) {
        try {
            String[] parts = callback.tokenValue().split("\\.");
            if (parts.length != 3) throw new IllegalArgumentException("not three parts");
            ObjectMapper json = new ObjectMapper();
            JsonNode header = json.readTree(decode(parts[0]));
            if (!"JWT".equals(header.path("typ").asText()) || !"GOOG_OAUTH2_TOKEN".equals(header.path("alg").asText())) {
                throw new IllegalArgumentException("header " + header);
            }
            JsonNode claims = json.readTree(decode(parts[1]));
            String sub = claims.path("sub").asText();
            long exp = claims.path("exp").asLong();
            long now = System.currentTimeMillis() / 1000;
            if (exp <= now) throw new IllegalArgumentException("expired claims");
            if (!"kafka".equals(claims.path("scope").asText())) throw new IllegalArgumentException("scope is not kafka");
            String access = decode(parts[2]);
            String[] pieces = access.split("\\.");
            if (pieces.length != 3 || !"ya29".equals(pieces[0])) throw new IllegalArgumentException("not an access token");
            String body = decode(pieces[1]);
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(secret, "HmacSHA256"));
            StringBuilder hex = new StringBuilder();
            for (byte b : mac.doFinal(body.getBytes(StandardCharsets.UTF_8))) hex.append(String.format("%02x", b));
            if (!java.security.MessageDigest.isEqual(hex.toString().getBytes(StandardCharsets.US_ASCII),
                    pieces[2].getBytes(StandardCharsets.US_ASCII))) {
                throw new IllegalArgumentException("the access token was not issued by the token endpoint");
            }
            String[] fields = body.split("\\|");
            if (!fields[0].equals(sub)) throw new IllegalArgumentException("the access token is " + fields[0] + "'s, not " + sub + "'s");
            if (Long.parseLong(fields[1]) <= now) throw new IllegalArgumentException("the access token expired");
            callback.token(new VerifiedToken(callback.tokenValue(), sub, Collections.singleton("kafka"), now * 1000, exp * 1000));
        } catch (Exception e) {
            callback.error("invalid_token", null, null);
            SigV4Check.refused(refusals, "Google token refused: " + e);
        }
    }

    @Override
    public void close() {}
}
