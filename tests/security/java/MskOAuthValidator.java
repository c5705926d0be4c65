import java.net.URI;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerExtensionsValidatorCallback;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallback;

/**
 * The broker's OAUTHBEARER validator for Amazon MSK's IAM token, as MSK checks it: the token is
 * base64url of a presigned https://kafka.REGION.amazonaws.com/ URL (its User-Agent parameter not
 * signed), verified by SigV4Check with the keys of the listener's JAAS options region, keys
 * (accessKeyId:secretAccessKey, comma-separated); each refusal and its reason is appended to the
 * file of the option refusals.
 */
public final class MskOAuthValidator implements AuthenticateCallbackHandler {
    private String region;
    private Object refusals;
    private final Map<String, String> secrets = new HashMap<>();

    static Map<String, String> keys(String option) {
        Map<String, String> out = new HashMap<>();
        for (String pair : option.split(",")) {
            int colon = pair.indexOf(':');
            out.put(pair.substring(0, colon), pair.substring(colon + 1));
        }
        return out;
    }

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        Map<String, ?> options = entries.get(0).getOptions();
        region = (String) options.get("region");
        refusals = options.get("refusals");
        secrets.putAll(keys((String) options.get("keys")));
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        for (Callback callback : callbacks) {
            if (callback instanceof OAuthBearerValidatorCallback) {
                validate((OAuthBearerValidatorCallback) callback);
            } else if (callback instanceof OAuthBearerExtensionsValidatorCallback) {
                // no extensions expected; none checked
            } else {
                throw new UnsupportedCallbackException(callback);
            }
        }
    }

    private void validate(OAuthBearerValidatorCallback callback) {
        try {
            String url = new String(Base64.getUrlDecoder().decode(callback.tokenValue()), StandardCharsets.UTF_8);
            URI uri = new URI(url);
            String host = "kafka." + region + ".amazonaws.com";
            String path = uri.getPath() == null ? "" : uri.getPath();  // AWS's Java signer writes none
            if (!"https".equals(uri.getScheme()) || !host.equals(uri.getHost()) || !(path.isEmpty() || "/".equals(path))) {
                throw new IllegalArgumentException("not a presigned https://" + host + "/ URL: "
                        + uri.getScheme() + "://" + uri.getHost() + " path '" + path + "'");
            }
            Map<String, String> params = new HashMap<>();
            for (String pair : uri.getRawQuery().split("&")) {
                int eq = pair.indexOf('=');
                params.put(URLDecoder.decode(pair.substring(0, eq), StandardCharsets.UTF_8),
                        URLDecoder.decode(pair.substring(eq + 1), StandardCharsets.UTF_8));
            }
            params.remove("User-Agent");
            long now = System.currentTimeMillis();
            String key = SigV4Check.check(params, host, region, secrets, now);
            long signed = java.time.Instant.from(java.time.format.DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'")
                    .withZone(java.time.ZoneOffset.UTC).parse(params.get("X-Amz-Date"))).toEpochMilli();
            long lifetime = signed + Long.parseLong(params.get("X-Amz-Expires")) * 1000;
            callback.token(new VerifiedToken(callback.tokenValue(), key, Collections.emptySet(), signed, lifetime));
        } catch (Exception e) {
            callback.error("invalid_token", null, null);
            SigV4Check.refused(refusals, "OAUTHBEARER token refused: " + e);
        }
    }

    @Override
    public void close() {}
}
