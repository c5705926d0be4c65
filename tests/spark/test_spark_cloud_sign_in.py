"""The sink signs in where managed and Kerberos clusters are, from jobs submitted as users submit
them (a process of their own, its environment the executors'): Amazon MSK with IAM -- a Java
job's MSK producer settings, moved over by writing each as a ``kafka.`` option and changing the
format's name; a wrong secret key fails the write on the driver, naming authentication and never
the secret; the broker verifies the signatures as MSK does (``cloud_kafka``) -- and Kerberos,
the executors logging in from the keytab shipped with the job (``kerberos_kafka``).  Every row is
read back by confluent-kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kafka_helpers import consume_all
from service_credentials import aws_role, standin_env, standin_file

from sparkkafka_sink.testing.brokers import create_topics

pytestmark = [pytest.mark.broker, pytest.mark.security]

JOB = Path(__file__).with_name("sign_in_job.py")
IAM_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"


def java_msk_properties(cloud, form: str, profile: str) -> dict:
    """What a Java MSK job's producer.properties holds (AWS's README), with a named profile."""
    common = {"bootstrap.servers": cloud.bootstrap("MSK"), "security.protocol": "SASL_SSL",
              "ssl.truststore.type": "PEM", "ssl.truststore.location": cloud.ca}
    if form == "AWS_MSK_IAM":
        return {**common, "sasl.mechanism": "AWS_MSK_IAM",
                "sasl.jaas.config": f'{IAM_MODULE} required awsProfileName="{profile}";',
                "sasl.client.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler"}
    return {**common, "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{OAUTH_MODULE} required awsProfileName="{profile}";',
            "sasl.login.callback.handler.class": MSK_OAUTH_HANDLER,
            "sasl.client.callback.handler.class": MSK_OAUTH_HANDLER}


def test_a_java_jobs_msk_settings_write_from_spark(cloud_kafka, tmp_path):
    cloud = cloud_kafka
    shared = tmp_path / "credentials"
    shared.write_text(f"[writer]\naws_access_key_id = {cloud.access_key_id}\n"
                      f"aws_secret_access_key = {cloud.secret_access_key}\n"
                      f"[stale]\naws_access_key_id = {cloud.access_key_id}\n"
                      f"aws_secret_access_key = not-the-secret\n")
    topics = {form: f"msk-spark-{form.lower()}-{uuid.uuid4().hex[:8]}" for form in ("AWS_MSK_IAM", "OAUTHBEARER")}
    create_topics(cloud.cluster.bootstrap(), {t: 2 for t in topics.values()}, timeout=30)
    writes = [{"topic": topics[form], **{f"kafka.{k}": v for k, v in java_msk_properties(cloud, form, "writer").items()}}
              for form in topics]
    writes.append({"topic": topics["AWS_MSK_IAM"], "kafka.max.block.ms": "15000",
                   **{f"kafka.{k}": v for k, v in java_msk_properties(cloud, "AWS_MSK_IAM", "stale").items()}})
    options = tmp_path / "writes.json"
    options.write_text(json.dumps(writes))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", AWS_REGION=cloud.region,
               AWS_SHARED_CREDENTIALS_FILE=str(shared), AWS_CONFIG_FILE=str(tmp_path / "no-config"),
               AWS_EC2_METADATA_DISABLED="true")
    done = subprocess.run([sys.executable, str(JOB), str(options), "1000"], env=env, capture_output=True, text=True,
                          timeout=300)
    results = [line for line in done.stdout.splitlines() if line.startswith(("DONE", "FAILED"))]
    assert results[:2] == ["DONE", "DONE"], done.stdout[-3000:] + done.stderr[-3000:] + cloud.refusals()
    for topic in topics.values():
        got = consume_all(cloud.cluster.bootstrap(), topic, expected_count=1000, timeout=30)
        assert sorted(int(r.value) for r in got) == list(range(1000))
    failed = results[2]
    assert failed.startswith("FAILED") and "authentication" in failed and "AWS_MSK_IAM" in failed, failed
    assert "not-the-secret" not in done.stdout + done.stderr and cloud.secret_access_key not in done.stdout + done.stderr
    assert "AWS_MSK_IAM sign-in refused: java.lang.IllegalArgumentException: the signature does not match" \
        in cloud.refusals()


def test_a_databricks_users_msk_settings_as_databricks_writes_them(cloud_kafka, tmp_path):
    """What Databricks' documentation writes for MSK, moved to the sink by changing the format's
    name: the service credential (``databricks.serviceCredential`` alone: SASL_SSL and
    AWS_MSK_IAM follow), read on the driver and in every executor's Python worker through
    Databricks' Python API (its stand-in on PYTHONPATH, as the runtime's module is there); and
    the Java settings with AWS's classes shaded.  A credential Databricks refuses fails the job
    on the driver, naming the option."""
    cloud = cloud_kafka
    path, log = standin_file(tmp_path, {"msk-writer": aws_role(cloud)})
    topics = {form: f"databricks-{form}-{uuid.uuid4().hex[:8]}" for form in ("uc", "shaded")}
    create_topics(cloud.cluster.bootstrap(), {t: 2 for t in topics.values()}, timeout=30)
    common = {"kafka.bootstrap.servers": cloud.bootstrap("MSK"), "kafka.ssl.truststore.type": "PEM",
              "kafka.ssl.truststore.location": cloud.ca}
    shaded = "shadedmskiam.software.amazon.msk.auth.iam"
    writes = [{**common, "topic": topics["uc"], "databricks.serviceCredential": "msk-writer"},
              {**common, "topic": topics["shaded"], "kafka.security.protocol": "SASL_SSL",
               "kafka.sasl.mechanism": "AWS_MSK_IAM", "kafka.sasl.jaas.config": f"{shaded}.IAMLoginModule required;",
               "kafka.sasl.client.callback.handler.class": f"{shaded}.IAMClientCallbackHandler"},
              {**common, "topic": topics["uc"], "databricks.serviceCredential": "not-granted"}]
    options = tmp_path / "writes.json"
    options.write_text(json.dumps(writes))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", AWS_REGION=cloud.region,
               AWS_ACCESS_KEY_ID=cloud.access_key_id, AWS_SECRET_ACCESS_KEY=cloud.secret_access_key,
               AWS_CONFIG_FILE=str(tmp_path / "no-config"), AWS_EC2_METADATA_DISABLED="true", **standin_env(path))
    done = subprocess.run([sys.executable, str(JOB), str(options), "1000"], env=env, capture_output=True, text=True,
                          timeout=300)
    results = [line for line in done.stdout.splitlines() if line.startswith(("DONE", "FAILED"))]
    assert results[:2] == ["DONE", "DONE"], done.stdout[-3000:] + done.stderr[-3000:] + cloud.refusals()
    for topic in topics.values():
        got = consume_all(cloud.cluster.bootstrap(), topic, expected_count=1000, timeout=30)
        assert sorted(int(r.value) for r in got) == list(range(1000))
    processes = {line.split()[0] for line in log.read_text().splitlines() if line.endswith("provider msk-writer")}
    assert len(processes) >= 2, log.read_text()  # the driver's checks and the executors' tasks each asked Databricks
    failed = results[2]
    assert failed.startswith("FAILED") and "'databricks.serviceCredential': Databricks refused the service " \
        "credential 'not-granted'" in failed, failed


# -- Kerberos -------------------------------------------------------------------------------------------
def test_executors_log_in_from_the_keytab_shipped_with_the_job(kerberos_kafka, tmp_path):
    """A Java job's Kerberos settings, the keytab named by its base name and shipped with the job
    (``addFile``, as ``--files`` does): the executors log in from their copy.  The driver, which
    lacks the file, leaves the cluster check to the tasks."""
    setup = kerberos_kafka
    topic = f"krb-spark-{uuid.uuid4().hex[:8]}"
    create_topics(setup.cluster.bootstrap(), {topic: 2}, timeout=30)
    options = tmp_path / "writes.json"
    options.write_text(json.dumps([{"topic": topic, "kafka.bootstrap.servers": setup.bootstrap("KERBEROS_SSL"),
                                    "kafka.security.protocol": "SASL_SSL", "kafka.sasl.kerberos.service.name": "kafka",
                                    "kafka.ssl.truststore.location": str(setup.cluster.security.pki.ca_cert_path),
                                    "kafka.sasl.jaas.config": setup.keytab_jaas("alice.keytab")}]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KRB5")}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", SIGN_IN_JOB_FILES=str(setup.alice_keytab),
               KRB5CCNAME=f"FILE:{tmp_path}/no-default-cache", **setup.kdc.env)
    done = subprocess.run([sys.executable, str(JOB), str(options), "1000"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert "DONE" in done.stdout.splitlines(), done.stdout[-3000:] + done.stderr[-3000:]
    got = consume_all(setup.cluster.bootstrap(), topic, expected_count=1000, timeout=30)
    assert sorted(int(r.value) for r in got) == list(range(1000))
