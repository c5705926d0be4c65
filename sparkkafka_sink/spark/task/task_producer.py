"""A write task's producer: configured for this attempt, taken from the pool or made, handed back.

The configuration is the write's own, made this attempt's: a ``client.id`` naming the task (or
the Python worker, for a pooled producer), TLS files found where Spark shipped them, and under
exactly-once a transactional id of its own.  An at-least-once producer comes from the worker's
pool (``producer_pool.py``) and goes back there when the task succeeded; an exactly-once one is
made for the attempt, which writes only while its write is open (``exactly_once/fence.py``).
"""

from __future__ import annotations

import os

from pyspark import SparkFiles

from sparkkafka_sink.exactly_once.fence import write_closed
from sparkkafka_sink.exactly_once.ids import WriteId
from sparkkafka_sink.network.sasl.jaas import keytab_of, parse_jaas
from sparkkafka_sink.producer.config import ProducerConfig
from sparkkafka_sink.producer.metrics import MetricsObserver
from sparkkafka_sink.producer.producer import Producer
from sparkkafka_sink.sasl_keys import JAAS_CONFIG
from sparkkafka_sink.spark.options import SinkOptions
from sparkkafka_sink.spark.sink_errors import PREFIX, SinkWriteError
from sparkkafka_sink.spark.task.producer_pool import POOL
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.tls_keys import TlsSettings

_CLOSE_AFTER_FAILURE_S = 2.0
#: options naming files, which on a cluster are shipped to the executors with --files / addFile
#: (and the keyTab of a Krb5LoginModule line)
_FILE_OPTIONS = (TlsSettings.ssl_truststore_location.key.name, TlsSettings.ssl_keystore_location.key.name)
#: cumulative producer counters: a pooled producer's task reports what changed during the task
_PRODUCER_COUNTERS = ("records_sent", "bytes_sent", "batches_sent", "records_failed", "retries", "batch_splits",
                      "requests", "request_latency_sum_ms")


class TaskProducer:
    """The task's producer, opened at the task's first rows (an empty partition opens none)."""

    def __init__(self, options: SinkOptions, task: TaskInfo, observer: MetricsObserver | None = None):
        self.options = options
        self.task = task
        #: told each event of the producer (OpenTelemetry's instruments), or None
        self.observer = observer
        # at-least-once tasks of one Python worker share producers (producer_pool.py)
        self.pooled = not options.exactly_once and options.producer_cache_timeout_ms > 0
        #: exactly-once: the write this attempt belongs to
        self.write: WriteId | None = (options.write(_micro_batch_id(options, task)) if options.exactly_once
                                      else None)
        self.config = task_config(options, task, self.pooled)
        #: the open producer (None until the first rows)
        self.current: Producer | None = None
        #: 1 when this task made its producer (0: taken from the pool, or none needed)
        self.created = 0
        self._baseline: dict = {}

    def open(self) -> Producer:
        """The producer, taken from the pool or made at the task's first rows."""
        if self.current is None:
            if self.pooled:
                producer, reused = POOL.acquire(self.config, Producer, self._idle_timeout_s)
                self._baseline = _producer_metrics(producer) if reused else {}
            else:
                producer, reused = Producer(self.config), False
            producer.observe(self.observer)
            self.current = producer
            self.created = 0 if reused else 1
        return self.current

    def begin(self) -> None:
        """Exactly-once: the attempt's transaction, begun once its write is known to be open."""
        producer = self.open()
        producer.init_transactions()
        assert self.write is not None
        if write_closed(producer, self.write):
            raise SinkWriteError(
                f"{PREFIX}write task for Spark partition {self.task.partition} (attempt {self.task.attempt}): the "
                "driver already ended this write (another attempt won, or the job failed): this attempt writes "
                "nothing")
        producer.begin_transaction()

    def metrics(self) -> dict:
        """The producer's counters over this task (a pooled producer's since the task took it)."""
        now = _producer_metrics(self.current)
        if not self._baseline:
            return now
        out = dict(now)
        for key in _PRODUCER_COUNTERS:
            if key in now:
                out[key] = now[key] - self._baseline.get(key, 0)
        return out

    def prepare(self) -> str | None:
        """Exactly-once: the task's open transaction, for the driver to commit with the job (JSON)."""
        if self.current is None or not self.options.exactly_once:
            return None
        return self.current.prepare().to_json()

    def finish(self, ok: bool) -> None:
        """Back to the pool after a successful at-least-once task, else closed; a failed
        exactly-once task aborts its transaction first."""
        producer = self.current
        if producer is None:
            return
        if not ok and self.options.exactly_once:
            _abort_quietly(producer)
        if ok and self.pooled:
            POOL.release(producer, self.config, self._idle_timeout_s)
            return
        try:
            producer.close(None if ok else _CLOSE_AFTER_FAILURE_S)
        except Exception:  # closing must not mask the task's own error
            if ok:
                raise

    @property
    def _idle_timeout_s(self) -> float:
        return self.options.producer_cache_timeout_ms / 1000


def task_config(options: SinkOptions, task: TaskInfo, pooled: bool = False) -> ProducerConfig:
    config = options.producer_config
    changes = {key: _local_file(config[key]) for key in _FILE_OPTIONS if config[key]}
    keytab_jaas = _jaas_with_local_keytab(config[JAAS_CONFIG.name])
    if keytab_jaas is not None:
        changes[JAAS_CONFIG.name] = keytab_jaas
    client_id = ProducerConfig.client_id.key.name
    if client_id not in config.explicit:
        # a pooled producer serves many tasks of this Python worker: named after the worker
        changes[client_id] = (f"pyprod-kafka-worker-{os.getpid()}" if pooled
                              else f"pyprod-kafka-s{task.stage}-p{task.partition}-a{task.attempt}")
    if options.exactly_once:
        # one id per task attempt: attempts never fence each other, the driver commits the winner's
        changes[ProducerConfig.transactional_id.key.name] = transactional_id(options, task)
    return config.updated(changes)


def transactional_id(options: SinkOptions, task: TaskInfo) -> str:
    return options.write(_micro_batch_id(options, task)).attempt(task.partition, task.attempt_id)


def _micro_batch_id(options: SinkOptions, task: TaskInfo) -> int | None:
    if options.batch_id is not None:  # foreachBatch: the batch id the user passed
        return options.batch_id
    return task.micro_batch[1] if task.micro_batch else None


def _local_file(path: str) -> str:
    """``path`` if it exists here, else the copy Spark shipped to this executor (``--files`` or
    ``SparkContext.addFile`` put it in the SparkFiles directory under its base name)."""
    if os.path.exists(path):
        return path
    try:
        shipped = SparkFiles.get(os.path.basename(path))
    except Exception:  # noqa: BLE001 - no SparkFiles here: the producer reports the missing file
        return path
    return shipped if os.path.exists(shipped) else path


def _jaas_with_local_keytab(text: str | None) -> str | None:
    """A Krb5LoginModule line whose keytab is not here but was shipped with the job, naming the
    shipped copy; None when nothing changes."""
    keytab = keytab_of(text)
    if not keytab or _local_file(keytab) == keytab:
        return None
    assert text is not None
    return parse_jaas(text).with_option("keyTab", _local_file(keytab)).render()


def _abort_quietly(producer: Producer) -> None:
    """A failed exactly-once task aborts its transaction (best effort: the driver also aborts
    every transaction of the write that it does not commit)."""
    try:
        producer.abort_transaction(_CLOSE_AFTER_FAILURE_S)
    except Exception:  # noqa: BLE001 - the task's own error is what matters
        pass


def _producer_metrics(producer: Producer | None) -> dict:
    if producer is None:
        return {}
    try:
        return producer.metrics()
    except Exception:  # noqa: BLE001 - metrics are best effort, delivery is not
        return {}
