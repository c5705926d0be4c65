import java.util.Set;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerToken;

/** A token a test validator accepted: its value, principal, scope and times. */
final class VerifiedToken implements OAuthBearerToken {
    private final String value;
    private final String principal;
    private final Set<String> scope;
    private final long start;
    private final long lifetime;

    VerifiedToken(String value, String principal, Set<String> scope, long start, long lifetime) {
        this.value = value;
        this.principal = principal;
        this.scope = scope;
        this.start = start;
        this.lifetime = lifetime;
    }

    @Override public String value() { return value; }
    @Override public Set<String> scope() { return scope; }
    @Override public long lifetimeMs() { return lifetime; }
    @Override public String principalName() { return principal; }
    @Override public Long startTimeMs() { return start; }
}
