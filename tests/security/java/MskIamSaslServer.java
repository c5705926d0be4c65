import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.security.Provider;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.CallbackHandler;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import javax.security.sasl.SaslException;
import javax.security.sasl.SaslServer;
import javax.security.sasl.SaslServerFactory;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.auth.SecurityProviderCreator;

/**
 * The broker's side of SASL AWS_MSK_IAM, as Amazon MSK answers it: the client's one JSON message
 * (version 2020_10_22, the host it dialled, the lower-cased SigV4 query parameters) is verified by
 * SigV4Check against the listener's JAAS options region, hosts (the broker's names, one of which
 * the client dialled: Java's client signs the socket's host name, 127.0.0.1 reversed to localhost)
 * and keys; the answer is JSON with
 * version and request-id.  Registered through security.providers (Creator) and configured by
 * listener.name.NAME.aws_msk_iam.sasl.server.callback.handler.class=MskIamSaslServer$Handler.
 */
public final class MskIamSaslServer implements SaslServer {
    public static final String MECHANISM = "AWS_MSK_IAM";
    private final CallbackHandler handler;
    private String authorizationId;
    private boolean complete;

    MskIamSaslServer(CallbackHandler handler) {
        this.handler = handler;
    }

    @Override
    public String getMechanismName() { return MECHANISM; }

    @Override
    @SuppressWarnings("unchecked")
    public byte[] evaluateResponse(byte[] response) throws SaslException {
        try {
            Map<String, String> payload = new ObjectMapper().readValue(response, Map.class);
            Verify verify = new Verify(payload);
            handler.handle(new Callback[] {verify});
            authorizationId = verify.accessKeyId;
            complete = true;
            Map<String, String> answer = new HashMap<>();
            answer.put("version", "2020_10_22");
            answer.put("request-id", UUID.randomUUID().toString());
            return new ObjectMapper().writeValueAsBytes(answer);
        } catch (SaslAuthenticationException e) {
            throw e;
        } catch (Exception e) {
            throw new SaslAuthenticationException("Access denied: " + e.getMessage());
        }
    }

    @Override public boolean isComplete() { return complete; }
    @Override public String getAuthorizationID() { return authorizationId; }
    @Override public byte[] unwrap(byte[] incoming, int offset, int len) { throw new IllegalStateException(); }
    @Override public byte[] wrap(byte[] outgoing, int offset, int len) { throw new IllegalStateException(); }
    @Override public Object getNegotiatedProperty(String name) { return null; }
    @Override public void dispose() {}

    /** What the SASL server asks its callback handler to check. */
    public static final class Verify implements Callback {
        final Map<String, String> payload;
        String accessKeyId;

        Verify(Map<String, String> payload) { this.payload = payload; }
    }

    /** The listener's callback handler: knows the region, the broker's host names and the keys. */
    public static final class Handler implements AuthenticateCallbackHandler {
        private String region;
        private List<String> hosts;
        private Map<String, String> secrets;
        private Object refusals;

        @Override
        public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
            Map<String, ?> options = entries.get(0).getOptions();
            region = (String) options.get("region");
            hosts = java.util.Arrays.asList(((String) options.get("hosts")).split(","));
            secrets = MskOAuthValidator.keys((String) options.get("keys"));
            refusals = options.get("refusals");
        }

        @Override
        public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
            for (Callback callback : callbacks) {
                if (!(callback instanceof Verify)) throw new UnsupportedCallbackException(callback);
                Verify verify = (Verify) callback;
                Map<String, String> p = verify.payload;
                try {
                    if (!"2020_10_22".equals(p.get("version"))) throw new IllegalArgumentException("unknown version");
                    String host = p.get("host");
                    if (!hosts.contains(host)) throw new IllegalArgumentException("signed for host " + host);
                    Map<String, String> params = new HashMap<>();
                    String[][] names = {{"action", "Action"}, {"x-amz-algorithm", "X-Amz-Algorithm"},
                        {"x-amz-credential", "X-Amz-Credential"}, {"x-amz-date", "X-Amz-Date"},
                        {"x-amz-expires", "X-Amz-Expires"}, {"x-amz-signedheaders", "X-Amz-SignedHeaders"},
                        {"x-amz-signature", "X-Amz-Signature"}, {"x-amz-security-token", "X-Amz-Security-Token"}};
                    for (String[] n : names) {
                        if (p.containsKey(n[0])) params.put(n[1], p.get(n[0]));
                    }
                    verify.accessKeyId = SigV4Check.check(params, host, region, secrets, System.currentTimeMillis());
                } catch (Exception e) {
                    SigV4Check.refused(refusals, "AWS_MSK_IAM sign-in refused: " + e);
                    throw new SaslAuthenticationException("Access denied: " + e.getMessage());
                }
            }
        }

        @Override public void close() {}
    }

    /** Makes the server for AWS_MSK_IAM. */
    public static final class Factory implements SaslServerFactory {
        @Override
        public SaslServer createSaslServer(String mechanism, String protocol, String serverName, Map<String, ?> props,
                                           CallbackHandler cbh) {
            return MECHANISM.equals(mechanism) ? new MskIamSaslServer(cbh) : null;
        }

        @Override
        public String[] getMechanismNames(Map<String, ?> props) { return new String[] {MECHANISM}; }
    }

    /** The JCA provider of the factory (security.providers names the creator). */
    public static final class Creator implements SecurityProviderCreator {
        @Override
        public Provider getProvider() {
            return new Provider("MskIamTest", "1.0", "AWS_MSK_IAM as Amazon MSK verifies it, for tests") {
                {
                    put("SaslServerFactory." + MECHANISM, Factory.class.getName());
                }
            };
        }
    }
}
