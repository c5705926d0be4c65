"""Fail fast on the driver: the cluster answers, and the write's topic may be written.

Without it a typo in ``kafka.bootstrap.servers`` costs every task ``max.block.ms`` (60 s) and
Spark retries each task four times before the job fails.  Before any task starts, the driver
asks the cluster once -- with the write's own security settings -- within
``clusterCheckTimeoutMs`` (default 10 s; 0 turns the check off): does a broker answer, does the
``topic`` option's topic (and the dead-letter topic) exist or may it be auto-created, may this
principal write to it.
Each failure is one line naming the option to fix.
"""

from __future__ import annotations

import time

from sparkkafka_sink.errors import AuthenticationError, KafkaConnectionError, KafkaError, KafkaTimeoutError, SslError
from sparkkafka_sink.producer.admin import BlockingAdmin
from sparkkafka_sink.producer.control_requests import TopicCheckError
from sparkkafka_sink.spark.options import SinkOptions, files_here
from sparkkafka_sink.spark.sink_errors import SinkValidationError, in_option_names


def check_cluster(options: SinkOptions) -> None:
    """Raise ``SinkValidationError`` unless the cluster answers and the topic may be written."""
    timeout_ms = options.cluster_check_timeout_ms
    if not timeout_ms:
        return
    config = options.producer_config
    if not files_here(config):
        return  # TLS files or a keytab shipped to the executors only (--files): the tasks will say
    deadline = time.monotonic() + timeout_ms / 1000
    auto_create = config.allow_auto_create_topics
    where = f"kafka.bootstrap.servers={options.bootstrap_servers}"
    try:
        with BlockingAdmin(config, "driver-check") as admin:
            topics = [t for t in (options.topic, options.errors_deadletterqueue_topic_name) if t]
            if topics:
                admin.check_topics_writable(topics, deadline, allow_auto_create=auto_create)
            else:
                admin.brokers(deadline)
    except TopicCheckError as e:
        dead_letters = options.errors_deadletterqueue_topic_name
        option = (SinkOptions.errors_deadletterqueue_topic_name if dead_letters and repr(dead_letters) in str(e)
                  else SinkOptions.topic).key.name
        raise SinkValidationError(f"{in_option_names(e)} (option '{option}'; at {where})") from None
    except (AuthenticationError, SslError) as e:
        raise SinkValidationError(f"the cluster at {where} refused this client: {in_option_names(e)} "
                                  "(check the kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options)") from None
    except KafkaConnectionError as e:
        if not e.refused:
            raise SinkValidationError(f"the cluster check at {where} failed: {in_option_names(e)}") from None
        raise SinkValidationError(
            f"nothing listens at {where}: every address refused the connection; is the host and port "
            "right (a Kafka listener, reachable from the driver)?") from None
    except KafkaTimeoutError as e:
        writing = f" (writing to topic {options.topic!r})" if options.topic else ""
        raise SinkValidationError(
            f"no Kafka broker answered at {where} within {timeout_ms / 1000:g} s{writing} ({e}); is the "
            "address right and reachable from the driver? (option clusterCheckTimeoutMs bounds this check; "
            "0 skips it)") from None
    except KafkaError as e:
        raise SinkValidationError(f"the cluster check at {where} failed: {in_option_names(e)}") from None
