import java.util.List;
import java.util.Map;
import javax.security.auth.callback.Callback;
import javax.security.auth.callback.NameCallback;
import javax.security.auth.callback.UnsupportedCallbackException;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.auth.AuthenticateCallbackHandler;
import org.apache.kafka.common.security.plain.PlainAuthenticateCallback;

/**
 * The broker's PLAIN check as Azure Event Hubs' Kafka endpoint makes it: the user is the literal
 * $ConnectionString and the password the namespace's connection string (the listener's JAAS
 * option connectionString).  Refusals go to the file of the option refusals.
 */
public final class EventHubsPlainHandler implements AuthenticateCallbackHandler {
    private String connectionString;
    private Object refusals;

    @Override
    public void configure(Map<String, ?> configs, String mechanism, List<AppConfigurationEntry> entries) {
        Map<String, ?> options = entries.get(0).getOptions();
        connectionString = (String) options.get("connectionString");
        refusals = options.get("refusals");
    }

    @Override
    public void handle(Callback[] callbacks) throws UnsupportedCallbackException {
        String user = null;
        for (Callback callback : callbacks) {
            if (callback instanceof NameCallback) {
                user = ((NameCallback) callback).getDefaultName();
            } else if (callback instanceof PlainAuthenticateCallback) {
                PlainAuthenticateCallback plain = (PlainAuthenticateCallback) callback;
                boolean ok = "$ConnectionString".equals(user)
                        && connectionString.equals(new String(plain.password()));
                if (!ok) {
                    SigV4Check.refused(refusals, "Event Hubs sign-in refused: user " + user
                            + ("$ConnectionString".equals(user) ? ", wrong connection string" : ""));
                }
                plain.authenticated(ok);
            } else {
                throw new UnsupportedCallbackException(callback);
            }
        }
    }

    @Override
    public void close() {}
}
