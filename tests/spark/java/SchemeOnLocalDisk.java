// A Hadoop FileSystem under a scheme of the test's own ("dbfs" here) that keeps its files on the
// local disk, path for path: dbfs:/tmp/x is /tmp/x.  Spark resolves a checkpoint location through
// Hadoop, so a query checkpointed at dbfs:/... runs as it would on a platform whose checkpoints
// live where Python's own file functions cannot reach (dbfs:/, s3a://, abfss://, gs://).  The
// scheme is the JVM property sparkkafka.test.scheme ("dbfs" unless set).
import java.net.URI;
import org.apache.hadoop.fs.RawLocalFileSystem;

public class SchemeOnLocalDisk extends RawLocalFileSystem {
    private static final String SCHEME = System.getProperty("sparkkafka.test.scheme", "dbfs");

    @Override
    public URI getUri() {
        return URI.create(SCHEME + ":///");
    }

    @Override
    public String getScheme() {
        return SCHEME;
    }
}
