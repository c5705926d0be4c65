"""The Spark contenders, all run one after another in ONE Spark process (this module's ``main``).

``python -m benchmarks.contenders.spark --config JSON --result FILE`` (started by
``benchmarks.run``): starts ``local[N]``, builds the DataFrame (the same record pool as the
standalone contenders, ``spark_rows`` rows of binary ``key``/``value`` in ``spark_partitions``
partitions), caches it and counts it once, then for each compression, contender and round
runs the write on a fresh topic, checks the broker's count and deletes the topic.  With
``cells`` in the config (the matrix: value sizes x topic partitions) the session stays and the
DataFrame is rebuilt per value size.

``spark-jvm-kafka`` is Spark's own Kafka sink (``format("kafka")``): its jars (resolved with
Maven by ``sparkkafka_sink.testing.spark_jars`` in the parent) are on the session's classpath from the
start (``spark.jars``, config ``spark_jars``), as the session is built once for all contenders.

``spark-pyprod-sasl-ssl`` is ``spark-pyprod`` writing over the broker's SASL_SSL listener
(config ``security``: that listener's ``bootstrap`` and the ``kafka.``-prefixed security
options, from the parent, which started the broker with it); topics are created, counted and
deleted over PLAINTEXT (``spec.bootstrap``) as for everyone.

``spark-pyprod-eos`` is ``spark-pyprod`` with ``deliveryGuarantee=exactly-once``: each task writes
in a Kafka transaction of its own, the driver commits them all with the job.  Its topics are
counted with a read_committed consumer (``count_landed(committed=True)``): the commit markers take
offsets, so the watermarks would count 8 more than the rows (2 tasks x 4 partitions).

Cost pairs (``benchmarks.contenders.COST_PAIRS``): when a variant runs together with its baseline
``spark-pyprod`` (the cost of TLS+SASL, of exactly-once), they are measured together: one small
untimed write of each first (a Spark session's first ``pyprod-kafka`` write pays 5-7 s of worker
start-up, which would otherwise fall on whichever ran first; the first transactional write also
waits for the broker to create ``__transaction_state``), then their rounds interleaved (plain r1,
variant r1 [, other variant r1], plain r2, ...) so that drift on the machine hits all alike.
Every other run keeps each contender's rounds back to back.

The Avro and Protobuf contenders (``benchmarks/avro.py``, ``benchmarks/protobuf.py``; config
``spec.schema_registry``: the registry the parent started) write a cached DataFrame per format,
built per value size beside (or instead of) the binary one: ``row`` (its number), ``key``,
``value`` (the struct) and, when a ``-bytes`` contender of the format runs, ``value_encoded`` (the
struct's framed value, encoded once on the driver by the sink's encoder from the pool); each
contender reads the columns it writes (``contender_frame``).  ``spark-pyprod-avro``: the sink
with ``valueFormat=avro`` (the driver registers the schema under ``<topic>-value``);
``spark-jvm-avro``: the schema registered under that subject with confluent-kafka's client, then
``concat(header, to_avro(value))`` through Spark's Kafka sink; ``spark-confluent-avro``: the
binary mapInArrow+confluent contender with every value serialized first by confluent-kafka's
``AvroSerializer`` (defaults: it registers the schema once per task, after the driver did, as
Apicurio refuses concurrent first registrations); ``spark-pyprod-avro-bytes``:
the sink writing ``value_encoded``.  ``spark-pyprod-protobuf``: the sink with
``valueFormat=protobuf``; ``spark-confluent-protobuf``: the binary mapInArrow+confluent contender
with every row made a message (``cls(**row)``, the class built in the task from the derived
schema's descriptor set, compiled by protoc on the driver once, as a user ships generated code)
and serialized by confluent-kafka's ``ProtobufSerializer`` (its defaults; the driver's
serializer registers its schema first, for the reason above); ``spark-pyprod-protobuf-bytes``:
the sink writing ``value_encoded``.  Before the rounds of a value size, each writes the first
``IDENTITY_ROWS`` rows to a topic of its own, and every value read back must equal the
pool's bytes (``meta.<format>_identity``; Protobuf: the message after the header, since
confluent-kafka's serializer registers a schema of its own, with an id of its own); after every
run a sample read back must deserialize into the pool's rows (``<format>_sample``: Avro with
confluent-kafka's ``AvroDeserializer``, Protobuf with its ``ProtobufDeserializer``; else the run's
status is ``<format>-mismatch``).

Timing is the wall time of the Spark action (job start to last task done, i.e. every record
acknowledged: each contender flushes its producer before its task ends).  Memory is sampled
from /proc every 100 ms: ``peak_rss_mb`` is the largest Python worker process that worked
during the run (one task = one producer; a worker's RSS includes its imports and whatever an
earlier contender grew a reused worker to, so compare with ``meta.worker_floor_mb``, fresh
workers' RSS measured in the warm-up pass), ``jvm_peak_mb`` the JVM's (it holds the cached
DataFrame).

The functions shipped to the Python workers are module-level closures of this module; the
workers import it (the parent puts the repository root on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from benchmarks import avro as avro_rows
from benchmarks import protobuf as protobuf_rows
from benchmarks.avro import AvroPool, avro_value
from benchmarks.broker_requests import RequestMeter, probe_for
from benchmarks.common import (
    ApproxLanded,
    BenchSpec,
    CpuMeter,
    MiB,
    batch_census,
    confluent_config,
    count_landed,
    create_topic,
    delete_topic,
    descendants,
    fair_buffer_memory,
    fmt_int,
    fmt_rate,
    kafka_python_config,
    log,
    make_pool,
    new_topic,
    proc_rss_bytes,
    produce_when_room,
    py_spy_record,
    py_spy_stop,
    read_records,
    task_workers,
    tuned,
)
from benchmarks.contenders import CONTENDERS, COST_PAIRS, CostPair
from benchmarks.protobuf import ProtobufPool
from benchmarks.struct_rows import RegistryPool, register

#: the pyprod-kafka sink: plain, over SASL_SSL, exactly-once, Avro, Protobuf, their pre-encoded bytes
PYPROD = ("spark-pyprod", "spark-pyprod-sasl-ssl", "spark-pyprod-eos", "spark-pyprod-avro", "spark-pyprod-avro-bytes",
          "spark-pyprod-protobuf", "spark-pyprod-protobuf-bytes")
#: the sink options of the contenders writing a struct through the registry: their valueFormat
REGISTRY_FORMATS = {"spark-pyprod-avro": "avro", "spark-pyprod-protobuf": "protobuf"}
WRITES = {*PYPROD, "spark-jvm-kafka", "spark-mapinarrow-confluent", "spark-foreach-confluent",
          "spark-foreach-kafka-python", "spark-jvm-avro", "spark-confluent-avro", "spark-confluent-protobuf"}
#: the mapInArrow + confluent-kafka contenders: binary rows, or serialized per row by confluent-kafka
MAPINARROW = {"spark-mapinarrow-confluent": None, "spark-confluent-avro": "avro", "spark-confluent-protobuf": "protobuf"}
#: each format's pool of rows
POOLS: dict[str, type[RegistryPool]] = {"avro": AvroPool, "protobuf": ProtobufPool}
#: contenders that run no Python worker of their own (their peak RSS is the JVM's)
JVM_ONLY = {"spark-jvm-kafka", "spark-jvm-avro"}
#: the sink options that make spark-pyprod-eos of spark-pyprod
EOS_OPTIONS = {"deliveryGuarantee": "exactly-once"}
#: rows of each untimed warm-up write of a cost pair (both DataFrame partitions get some)
PAIR_WARMUP_ROWS = 20_000
#: rows of each untimed warm-up write when the rounds alternate (the matrix): enough for the
#: broker's JIT to compile the Produce path, which otherwise makes the first cell's first
#: rounds cost it 2-4x the CPU of later ones
ALTERNATE_WARMUP_ROWS = 300_000
#: rows each registry contender writes for the check that all write the pool's bytes
IDENTITY_ROWS = 2_000
#: records of every registry contender's run read back and deserialized
REGISTRY_SAMPLE = 200


# ------------------------------------------------------------------ functions run in the tasks


def _count_only(iterator):
    import pyarrow as pa

    n = 0
    for batch in iterator:
        n += batch.num_rows
    yield pa.RecordBatch.from_pydict({"n": [n]}, schema=pa.schema([("n", pa.int64())]))


def _confluent_producer(conf: dict):
    from confluent_kafka import Producer

    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    conf = dict(conf, on_delivery=on_delivery)
    return Producer(conf), errors


def _confluent_finish(p, errors, what: str) -> None:
    left = p.flush(120)
    if errors or left:
        raise RuntimeError(f"{what}: {len(errors)} delivery error(s) (first: {errors[:1]}), "
                           f"{left} record(s) still queued after flush")


def _registry_serializer(how: tuple, topic: str):
    """confluent-kafka's serializer of ``how`` with its defaults (it registers its schema under
    ``<topic>-value`` on its first call), as a function of one row's value (a dict):
    ``("avro", registry url, schema)``: ``AvroSerializer``; ``("protobuf", registry url,
    serialized FileDescriptorSet, message name)``: ``ProtobufSerializer`` of the message class
    built from the descriptor set, each value made a message by the class (``cls(**value)``)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.serialization import MessageField, SerializationContext

    ctx = SerializationContext(topic, MessageField.VALUE)
    client = SchemaRegistryClient({"url": how[1]})
    if how[0] == "protobuf":
        from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

        cls = protobuf_rows.message_class(how[2], how[3])
        protobuf = ProtobufSerializer(cls, client)
        return lambda value: protobuf(cls(**value), ctx)
    from confluent_kafka.schema_registry.avro import AvroSerializer

    avro = AvroSerializer(client, how[2])
    return lambda value: avro(value, ctx)


def make_mapinarrow_confluent(conf: dict, topic: str, serializer: tuple | None = None):
    """mapInArrow: per batch, the key/value columns to Python lists, produce() per row.
    ``serializer`` (``_registry_serializer``'s ``how``): the values are structs (dicts), each
    serialized by confluent-kafka's serializer of that format before it is produced."""

    def fn(iterator):
        import pyarrow as pa

        p, errors = _confluent_producer(conf)
        serialize = _registry_serializer(serializer, topic) if serializer else None
        produce, poll = p.produce, p.poll
        n = 0
        for batch in iterator:
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            if serialize is not None:
                values = [serialize(v) for v in values]
            for k, v in zip(keys, values, strict=True):
                try:
                    produce(topic, v, k)
                except BufferError:
                    produce_when_room(produce, poll, topic, v, k)
            poll(0)
            n += batch.num_rows
        _confluent_finish(p, errors, "mapInArrow+confluent" + (f" ({serializer[0]})" if serializer else ""))
        yield pa.RecordBatch.from_pydict({"n": [n]}, schema=pa.schema([("n", pa.int64())]))

    return fn


def make_foreach_confluent(conf: dict, topic: str):
    """foreachPartition: Rows; confluent-kafka wants bytes, PySpark gives bytearray."""

    def fn(rows):
        p, errors = _confluent_producer(conf)
        produce, poll = p.produce, p.poll
        for i, row in enumerate(rows):
            k, v = bytes(row.key), bytes(row.value)
            try:
                produce(topic, v, k)
            except BufferError:
                produce_when_room(produce, poll, topic, v, k)
            if i % 10_000 == 0:
                poll(0)
        _confluent_finish(p, errors, "foreachPartition+confluent")

    return fn


def make_foreach_kafka_python(conf: dict, topic: str):
    """foreachPartition: Rows sent with kafka-python (it takes the bytearrays as they are)."""

    def fn(rows):
        from kafka import KafkaProducer

        kconf = {k: v for k, v in conf.items() if k in KafkaProducer.DEFAULT_CONFIG}
        p = KafkaProducer(**kconf)
        send = p.send
        last = None
        for row in rows:
            last = send(topic, value=row.value, key=row.key)
        p.flush()
        if last is not None:
            last.get(timeout=60)  # raises if the last record failed
        p.close(timeout=30)

    return fn


# -------------------------------------------------------------------------------- sampling


class Sampler(threading.Thread):
    """Peak RSS of this process's descendants every ``interval`` s, and progress lines.

    Only Python workers that burnt CPU during the run count (``worker_peak``): reused idle
    workers of earlier contenders would otherwise set everyone's peak.
    """

    ACTIVE_TICKS = 5  # 50 ms of CPU (at 100 Hz)

    def __init__(self, interval: float = 0.1, progress=None, progress_interval: float = 2.0,
                 tracker=None, t0: float | None = None):
        super().__init__(daemon=True)
        self.interval = interval
        self.tracker = tracker
        self.t0 = time.perf_counter() if t0 is None else t0
        self.first_stage_s: float | None = None  # first moment a stage with tasks was running
        self.last_stage_s: float | None = None  # last moment one was
        self.progress = progress
        self.progress_interval = progress_interval
        self._halt = threading.Event()
        self._me = os.getpid()
        self._cpu0: dict[int, int] = {pid: cpu for pid, (comm, cpu) in descendants(self._me).items()
                                      if comm.startswith("python")}
        self._cpu: dict[int, int] = {}
        self._rss: dict[int, int] = {}
        self.jvm_peak = 0

    def sample(self) -> None:
        for pid, (comm, cpu) in descendants(self._me).items():
            if comm.startswith("python"):
                rss = proc_rss_bytes(pid)
                self._cpu[pid] = cpu
                self._cpu0.setdefault(pid, 0)  # forked during the run
                if rss > self._rss.get(pid, 0):
                    self._rss[pid] = rss
            elif comm.startswith("java"):
                self.jvm_peak = max(self.jvm_peak, proc_rss_bytes(pid))

    @property
    def worker_peak(self) -> int:
        active = [pid for pid, cpu in self._cpu.items() if cpu - self._cpu0.get(pid, 0) >= self.ACTIVE_TICKS]
        # a worker sampled only while exiting has CPU ticks but no RSS reading
        return max((self._rss.get(p, 0) for p in active), default=max(self._rss.values(), default=0))

    @property
    def active_workers(self) -> int:
        return sum(1 for pid, cpu in self._cpu.items() if cpu - self._cpu0.get(pid, 0) >= self.ACTIVE_TICKS)

    def _stages(self) -> None:
        if self.tracker is None:
            return
        for sid in self.tracker.getActiveStageIds():
            info = self.tracker.getStageInfo(sid)
            if info is not None and info.numTasks > 0:
                now = time.perf_counter() - self.t0
                if self.first_stage_s is None:
                    self.first_stage_s = now
                self.last_stage_s = now
                return

    def run(self) -> None:
        next_progress = time.monotonic() + self.progress_interval
        n = 0
        while not self._halt.wait(self.interval):
            try:
                self.sample()
                n += 1
                if n % 2 == 0:
                    self._stages()
            except Exception:  # noqa: BLE001 - sampling is best effort
                pass
            if self.progress is not None and time.monotonic() >= next_progress:
                next_progress = time.monotonic() + self.progress_interval
                try:
                    self.progress()
                except Exception:  # noqa: BLE001 - progress is best effort
                    pass

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)
        try:
            self.sample()  # the CPU the workers burnt up to the end
        except Exception:  # noqa: BLE001 - sampling is best effort
            pass


def _progress_fn(spark, label: str, total: int, t0: float, landed: ApproxLanded | None):
    tracker = spark.sparkContext.statusTracker()

    def show():
        done = tasks = 0
        for sid in tracker.getActiveStageIds():
            info = tracker.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                tasks += info.numTasks
        el = time.perf_counter() - t0
        msg = f"[{label}] {el:.1f}s  tasks {done}/{tasks}"
        n = landed() if landed is not None else None
        if n is not None:
            msg += f"  ~{fmt_int(n)}/{fmt_int(total)} landed  ~{fmt_rate(n / el if el else 0)} rec/s"
        log(msg)

    return show


# ------------------------------------------------------------------------------------ setup


def build_session(cfg: dict):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver's ports on loopback, not the host's address
    b = (SparkSession.builder.master(cfg["spark_master"]).appName("sparkkafka-bench")
         .config("spark.driver.memory", cfg["spark_driver_memory"])
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(cfg["spark_partitions"]))
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(cfg["spark_arrow_batch"]))
         .config("spark.sql.autoBroadcastJoinThreshold", str(64 * MiB)))
    if cfg.get("spark_jars"):
        # local paths resolved by Maven in the parent: on the driver's classpath from the start
        # (Ivy's spark.jars.packages would not see Maven's settings)
        b = b.config("spark.jars", ",".join(cfg["spark_jars"]))
    for kv in cfg.get("spark_conf") or []:
        k, _, v = kv.partition("=")
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def pool_rows(spec: BenchSpec, rows: int) -> int:
    """The distinct records ``rows`` rows cycle through."""
    return min(spec.pool_size, rows) or 1


def build_dataframe(spark, spec: BenchSpec, rows: int, partitions: int):
    """``rows`` rows of the record pool (row i is pool record i % pool_size), cached."""
    import pyarrow as pa

    keys, values = make_pool(pool_rows(spec, rows), spec.key_size, spec.value_size, spec.seed)
    return cache_rows(spark, pa.table({"key": keys, "value": values}), rows, partitions, ["key", "value"])


def build_struct_dataframe(spark, pool: RegistryPool, rows: int, partitions: int, encoded: bool = True):
    """A format's rows (``row``, ``key``, ``value`` the struct and, with ``encoded``,
    ``value_encoded``), cached."""
    columns = [c for c in pool.table.column_names if encoded or c != "value_encoded"]
    return cache_rows(spark, pool.table.select(columns), rows, partitions, ["row", *columns])


def cache_rows(spark, table, rows: int, partitions: int, columns: list[str]):
    """``rows`` rows of ``table`` (row i is its row i % its length; ``row``: i), ``columns`` of
    them, cached and counted: ``table`` is broadcast and joined to ``spark.range``."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    pool = table.num_rows
    pool_df = spark.createDataFrame(table.add_column(0, "pid", pa.array(range(pool), pa.int64())))
    df = (spark.range(0, rows, 1, partitions)
          .withColumn("pid", F.col("id") % F.lit(pool))
          .join(F.broadcast(pool_df), "pid")
          .withColumnRenamed("id", "row")
          .select(*columns))
    df = df.cache()
    n = df.count()
    if n != rows:
        raise RuntimeError(f"cached DataFrame has {n} rows, expected {rows}")
    return df


# -------------------------------------------------------------------------------------- runs


def _sink_options(spec: BenchSpec) -> dict:
    """Options of both sinks: pyprod-kafka and Spark's "kafka" format take the same ``kafka.*``
    producer settings (Spark passes them to its Java producer)."""
    return {
        "kafka.bootstrap.servers": spec.bootstrap,
        "topic": spec.topic,
        "kafka.acks": spec.acks,
        **tuned(spec, {"kafka.linger.ms": str(spec.linger_ms), "kafka.batch.size": str(spec.batch_size),
                       "kafka.buffer.memory": str(spec.buffer_memory)}),
        "kafka.compression.type": spec.compression,
        "kafka.max.in.flight.requests.per.connection": str(spec.max_in_flight),
        "kafka.enable.idempotence": str(spec.idempotence).lower(),
    }


def _secured_sink_options(spec: BenchSpec, security: dict) -> dict:
    """``_sink_options`` aimed at the secured listener: its bootstrap, plus the security options
    (``kafka.security.protocol``, ``kafka.ssl.truststore.location``, ``kafka.sasl.*``)."""
    options = _sink_options(spec)
    options["kafka.bootstrap.servers"] = security["bootstrap"]
    options.update(security["options"])
    return options


def _pyprod_options(name: str, spec: BenchSpec, security: dict | None = None) -> dict:
    """The ``pyprod-kafka`` options of ``name`` (one of ``PYPROD``): ``spark-pyprod``'s, over the
    secured listener, with ``EOS_OPTIONS``, or writing Avro through the run's registry; then the
    run's own ``sink_options``."""
    if name == "spark-pyprod-sasl-ssl":
        if not security:
            raise RuntimeError(f"{name} needs the secured listener's settings (config 'security')")
        options = _secured_sink_options(spec, security)
    elif name == "spark-pyprod-eos":
        options = dict(_sink_options(spec), **EOS_OPTIONS)
    elif name in REGISTRY_FORMATS:
        options = dict(_sink_options(spec), valueFormat=REGISTRY_FORMATS[name],
                       **{"schema.registry.url": spec.schema_registry})
    else:
        options = _sink_options(spec)
    return dict(options, **spec.sink_options)


def _action(name: str, df, spec: BenchSpec, security: dict | None = None):
    """Run the contender's Spark action; returns the row count Spark itself reports (or None).
    ``security``: the secured listener's bootstrap and options (``spark-pyprod-sasl-ssl``)."""
    from pyspark.sql import functions as F

    if name in PYPROD:
        options = _pyprod_options(name, spec, security)
        w = df.write.format("pyprod-kafka").mode("append")
        for k, v in options.items():
            w = w.option(k, v)
        w.save()
        return None
    if name in ("spark-jvm-kafka", "spark-jvm-avro"):
        if name == "spark-jvm-avro":
            schema_id = register(spec.schema_registry, f"{spec.topic}-value", _value_schema(df, "avro"))
            df = df.select("key", avro_value(F.col("value"), schema_id).alias("value"))
        w = df.write.format("kafka").mode("append")
        for k, v in _sink_options(spec).items():
            w = w.option(k, v)
        w.save()
        return None
    if name == "spark-noop":
        return df.mapInArrow(_count_only, "n long").agg(F.sum("n")).collect()[0][0]
    if name in MAPINARROW:
        how: tuple | None = None
        fmt = MAPINARROW[name]
        if fmt is not None:
            schema = _value_schema(df, fmt)
            # protoc's output, as a user's generated code: compiled once (cached), not per write
            how = ((fmt, spec.schema_registry, protobuf_rows.descriptor_set(schema), protobuf_rows.message_name(schema))
                   if fmt == "protobuf" else (fmt, spec.schema_registry, schema))
            # Apicurio answers 409 to concurrent first registrations of a subject (Confluent's
            # registry does not): registered here first, each task's serializer (its default
            # auto.register.schemas) gets the id back.  ProtobufSerializer registers a schema of
            # its own (its file's FileDescriptorProto): it registers it, serializing an empty message
            if fmt == "protobuf":
                _registry_serializer(how, spec.topic)({})
            else:
                register(spec.schema_registry, f"{spec.topic}-value", schema)
        fn = make_mapinarrow_confluent(confluent_config(spec), spec.topic, how)
        return df.mapInArrow(fn, "n long").agg(F.sum("n")).collect()[0][0]
    if name == "spark-foreach-confluent":
        df.foreachPartition(make_foreach_confluent(confluent_config(spec), spec.topic))
        return None
    if name == "spark-foreach-kafka-python":
        df.foreachPartition(make_foreach_kafka_python(kafka_python_config(spec), spec.topic))
        return None
    raise ValueError(f"unknown spark contender {name!r}")


def _value_schema(df, fmt: str) -> str:
    """The schema (``fmt``: avro, protobuf) of ``df``'s struct ``value`` as the sink derives it
    from Spark's type (the Arrow type Spark hands the tasks, timestamps in UTC)."""
    from pyspark.sql.pandas.types import to_arrow_type

    module = protobuf_rows if fmt == "protobuf" else avro_rows
    return module.value_schema(to_arrow_type(df.schema["value"].dataType, timezone="UTC"))


def _available(name: str, cfg: dict | None = None) -> str | None:
    contender = CONTENDERS[name]
    why = (cfg or {}).get("unavailable", {}).get(name)
    if why:
        return why
    if contender.jars and not (cfg or {}).get("spark_jars"):
        return f"no {' and '.join(contender.jars)} jars (spark_jars) in the config"
    if contender.registry and not ((cfg or {}).get("spec") or {}).get("schema_registry"):
        return "no Schema Registry (spec.schema_registry): the harness starts one for the registry contenders"
    if name in ("spark-mapinarrow-confluent", "spark-foreach-confluent"):
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as e:
            return f"confluent-kafka not installed: {e}"
    if contender.format == "avro":
        try:  # the checks read with its AvroDeserializer; spark-confluent-avro writes with it
            from confluent_kafka.schema_registry import avro  # noqa: F401
        except ImportError as e:
            return f"confluent-kafka's Avro serializers do not import (confluent-kafka[avro,schemaregistry]): {e}"
    if contender.format == "protobuf":
        try:  # the checks read with its ProtobufDeserializer, classes compiled by protoc (grpcio-tools)
            from confluent_kafka.schema_registry import protobuf  # noqa: F401
            from grpc_tools import protoc  # noqa: F401
        except ImportError as e:
            return (f"confluent-kafka's Protobuf serializers or grpcio-tools' protoc do not import "
                    f"(confluent-kafka[protobuf,schemaregistry], grpcio-tools): {e}")
    if name == "spark-foreach-kafka-python":
        try:
            import kafka  # noqa: F401
        except ImportError as e:
            return f"kafka-python not installed: {e}"
    if name == "spark-pyprod-sasl-ssl":
        if not (cfg or {}).get("security"):
            return "no secured listener (config 'security'): the harness starts one with its own Apache Kafka"
    if name == "spark-pyprod-eos":
        spec = (cfg or {}).get("spec") or {}
        if not spec.get("idempotence", True):
            return "exactly-once needs idempotence (drop --no-idempotence)"
        if spec.get("broker") == "tansu":
            return ("tansu's read_committed is not right (docs/brokers.md): the count of committed rows "
                    "could not be checked; use --broker apache")
    if name in PYPROD:
        try:
            import pyspark_pyprod_kafka  # noqa: F401
        except Exception as e:  # noqa: BLE001 - the reason, reported
            return f"pyspark_pyprod_kafka does not import: {type(e).__name__}: {e}"
    return None


def _short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    # Py4J/PySpark errors carry whole Java and Python stack traces: keep the informative lines
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep = [ln for ln in lines if any(w in ln for w in ("Error", "Exception", "error", "pyprod-kafka"))]
    out = " | ".join((keep or lines)[:6])
    return out[:1500]


class WorkerProfile:
    """py-spy on the Python workers Spark's daemons forked (reused from task to task: those of
    an earlier write of the session run this one's tasks), from before the action to its end:
    raw stacks for ``benchmarks.profile`` (``cfg["profile_dir"]``).  ``--nonblocking``: the
    workers are not paused to be read (the samplers still take CPU from the machine's cores)."""

    def __init__(self, out: Path, rate: int):
        self.out = out
        self._samplers = [py_spy_record(pid, out.with_suffix(f".{pid}.stacks"), rate, "--nonblocking")
                          for pid in task_workers(os.getpid())]
        time.sleep(2)  # attached

    def stop(self) -> list[str]:
        py_spy_stop(self._samplers)
        return [str(f) for f in sorted(self.out.parent.glob(self.out.name + ".*.stacks"))]


def run_once(spark, df, name: str, spec: BenchSpec, progress_interval: float, keep_topic: bool = False,
             security: dict | None = None, pool: RegistryPool | None = None, profile_dir: str | None = None) -> dict:
    """``pool``: the pool a registry contender's rows come from (a sample of what it wrote is
    read back and compared); ``profile_dir``: where our writes' workers' sampled stacks go
    (:class:`WorkerProfile`)."""
    writes = name in WRITES
    res = {"contender": name, "group": "spark", "compression": spec.compression, "records": spec.records,
           "value_size": spec.value_size, "partitions": spec.partitions, "config": spec.config,
           "buffer_memory": spec.buffer_memory if spec.config == "tuned" else None,
           "topic": spec.topic if writes else None, "status": "ok"}
    if name == "spark-pyprod-sasl-ssl" and security:
        res["listener"] = f"{security.get('listener')} ({security.get('mechanism')})"
    if name == "spark-pyprod-eos":
        res["delivery"] = "exactly-once"
    if writes:
        res["topic_ready_s"] = create_topic(spec.bootstrap, spec.topic, spec.partitions)
    landed = ApproxLanded(spec.bootstrap, spec.topic, spec.partitions) if writes else None
    requests = RequestMeter(probe_for(spec.broker_jmx) if writes else None)
    profile = (WorkerProfile(Path(profile_dir) / f"{name}-{spec.label}".replace(" ", "_").replace("/", "_"), 250)
               if profile_dir and name in PYPROD else None)
    cpu = CpuMeter(spec.broker_pid, split=True)
    t0 = time.perf_counter()
    sampler = Sampler(progress=_progress_fn(spark, spec.label, spec.records, t0, landed),
                      progress_interval=progress_interval, tracker=spark.sparkContext.statusTracker(), t0=t0)
    sampler.start()
    try:
        spark_count = _action(name, df, spec, security)
        elapsed = time.perf_counter() - t0
        res.update(cpu.stop())
        requests.stop()
        if profile is not None:
            res["profile_stacks"] = profile.stop()
    except Exception as e:  # noqa: BLE001 - cleaned up, then reported
        if profile is not None:
            profile.stop()
        sampler.stop()
        if landed:
            landed.close()
        if writes and not keep_topic:
            delete_topic(spec.bootstrap, spec.topic, spec.broker_log_dir)
        res.update(status="error", note=_short_error(e))
        return res
    sampler.stop()
    if landed:
        landed.close()
    res.update(elapsed_s=elapsed, peak_rss_mb=round(sampler.worker_peak / MiB, 1),
               active_workers=sampler.active_workers, jvm_peak_mb=round(sampler.jvm_peak / MiB, 1))
    if name in JVM_ONLY:  # no Python worker of its own: idle ones of others would set the column
        res["peak_rss_mb"] = None
    if sampler.first_stage_s is not None:
        # where the time went (sampled every 0.2 s): before the first task ran (planning, for
        # pyprod-kafka the Python DataSource's writer() in a worker), while tasks ran, after
        # (for pyprod-kafka the commit() in a worker)
        last = min(sampler.last_stage_s, elapsed)
        res.update(before_tasks_s=round(min(sampler.first_stage_s, last), 2),
                   tasks_s=round(max(0.0, last - sampler.first_stage_s), 2),
                   after_tasks_s=round(max(0.0, elapsed - last), 2))
    if spark_count is not None:
        res["spark_count"] = int(spark_count)
    if writes:
        # transactions: commit markers take offsets; count what read_committed reads
        n, how = count_landed(spec.bootstrap, spec.topic, spec.partitions, spec.broker,
                              committed=CONTENDERS[name].transactional)
        res.update(landed=n, verified_by=how)
        if pool is not None:
            sample = read_records(spec.bootstrap, spec.topic, spec.partitions, REGISTRY_SAMPLE)
            verdict = res[f"{pool.format}_sample"] = pool.check_sample(sample, spec.topic)
            if not verdict["ok"]:
                res.update(status=f"{pool.format}-mismatch",
                           note=f"{pool.format} sample: {verdict['matched']} of {verdict['sampled']} read back as "
                                f"written; {verdict.get('first_failure')}")
        census = batch_census(spec.broker_log_dir, spec.topic)
        if census:
            res["stored_batches"] = census
        figures = requests.figures(elapsed, (census or {}).get("batches"))
        if figures:
            res["broker_requests"] = figures
        if not keep_topic:
            delete_topic(spec.bootstrap, spec.topic, spec.broker_log_dir)
    else:
        res.update(landed=res.get("spark_count"), verified_by="rows counted by the tasks")
    phases = (f" [before tasks {res['before_tasks_s']}s, tasks {res['tasks_s']}s, after {res['after_tasks_s']}s]"
              if "tasks_s" in res else "")
    log(f"[{spec.label}] {fmt_int(spec.records)} rows in {elapsed:.2f}s = "
        f"{fmt_rate(spec.records / elapsed)} rec/s{phases}; landed {res.get('landed')} ({res.get('verified_by')}); "
        f"worker peak {res['peak_rss_mb']} MB, JVM {res['jvm_peak_mb']} MB; CPU {res.get('cpu_machine_s')}s "
        f"(broker {res.get('cpu_broker_s', '?')}s)")
    return res


def active_pairs(names: list[str], skipped=()) -> list[CostPair]:
    """The cost pairs both of whose contenders run."""
    return [p for p in COST_PAIRS.values()
            if all(n in names and n not in skipped for n in (p.baseline, p.contender))]


def paired(names: list[str], pairs: list[CostPair]) -> list[list[str]]:
    """Contenders measured together: each baseline with all its variants that run (baseline
    first, then the variants in ``names`` order)."""
    groups: dict[str, list[str]] = {}
    for p in pairs:
        groups.setdefault(p.baseline, [p.baseline])
    for name in names:
        for p in pairs:
            if p.contender == name and name not in groups[p.baseline]:
                groups[p.baseline].append(name)
    return list(groups.values())


def schedule(names: list[str], rounds: int, pairs: list[CostPair] = (), alternate: bool = False
             ) -> list[tuple[str, int]]:
    """``(contender, round)`` in running order: each contender's rounds back to back, except the
    members of cost pairs (``pairs``: those that run), whose rounds alternate (baseline r1,
    variant r1, [other variant r1,] baseline r2, ...) where the first of them stands;
    ``alternate``: every contender's rounds alternate (r1 of each, then r2 of each in the
    reverse order, ...), so a slow spell of the machine falls on all of them alike and none
    always runs first (after the previous cell) or after the same neighbour."""
    if alternate:
        return [(name, rnd) for rnd in range(1, rounds + 1)
                for name in (names if rnd % 2 else names[::-1])]
    groups = paired(names, list(pairs))
    out: list[tuple[str, int]] = []
    done: set[str] = set()
    for name in names:
        if name in done:
            continue
        group = next((g for g in groups if name in g), [name])
        out += [(n, rnd) for rnd in range(1, rounds + 1) for n in group]
        done.update(group)
    return out


def frame_kinds(names: list[str]) -> set[str]:
    """The cached DataFrames ``names`` write: ``binary`` and/or a format's (``avro``,
    ``protobuf``: the struct rows and their pre-encoded bytes)."""
    return {CONTENDERS[n].format or "binary" for n in names} or {"binary"}


def contender_frame(name: str, frames: dict, first_rows: int | None = None):
    """The DataFrame ``name`` writes (``key``, ``value``): its columns of the cached ``frames``;
    ``first_rows``: only rows numbered below it."""
    from pyspark.sql import functions as F

    contender = CONTENDERS[name]
    df = frames[contender.format or "binary"]
    if first_rows is not None:
        df = df.where(F.col("row") < first_rows)
    if contender.rows.endswith("-bytes"):
        return df.select("key", F.col("value_encoded").alias("value"))
    if contender.format:
        return df.select("key", "value")
    return df


def warmup_writes(spark, frames: dict, cell_spec: dict, rows: int, security: dict | None, names: list[str],
                  sample_rows: int) -> float:
    """One untimed write of about ``sample_rows`` rows by each of ``names`` (fresh topics,
    deleted after): starts the data source's Python workers, the secured path's imports, the
    transactional path's (and the broker's ``__transaction_state``), the JVM producer's classes
    and the broker's JIT for the request paths, before any clock runs."""
    t = time.perf_counter()
    for name in names:
        small = contender_frame(name, frames).sample(fraction=min(1.0, sample_rows / max(rows, 1)), seed=7)
        spec = BenchSpec(**dict(cell_spec, contender=name, topic=new_topic(f"warmup-{name}"), label=f"{name} warm-up"))
        create_topic(spec.bootstrap, spec.topic, spec.partitions)
        try:
            _action(name, small, spec, security)
        except Exception as e:  # noqa: BLE001 - the timed rounds will report it
            log(f"[spark] warm-up write of {name} failed: {_short_error(e)[:300]}")
        finally:
            delete_topic(spec.bootstrap, spec.topic, spec.broker_log_dir)
    return round(time.perf_counter() - t, 2)


def identity_check(frames: dict, pool: RegistryPool, cell_spec: dict, rows: int, names: list[str]) -> dict:
    """Each contender of ``names`` (of ``pool``'s format) writes the first ``IDENTITY_ROWS`` rows
    to a topic of its own (untimed); every value read back must be the pool's framed bytes of its
    key: Avro's whole (ours, Spark's ``to_avro`` and confluent-kafka's serializer the same bytes,
    the same schema id), Protobuf's after the header (``body_only``: confluent-kafka's serializer
    registers a schema of its own, so its id differs; ``schema_ids`` say which)."""
    n = min(IDENTITY_ROWS, rows)
    body_only = pool.format == "protobuf"
    out = {"format": pool.format, "value_size": cell_spec["value_size"], "rows": n, "pool_schema_id": pool.schema_id,
           "body_only": body_only, "contenders": {}}
    for name in names:
        spec = BenchSpec(**dict(cell_spec, contender=name, topic=new_topic(f"{pool.format}-identity-{name}"),
                                label=f"{name} {pool.format} identity"))
        create_topic(spec.bootstrap, spec.topic, spec.partitions)
        try:
            _action(name, contender_frame(name, frames, first_rows=n), spec)
            # one more than written: a duplicate shows
            found = read_records(spec.bootstrap, spec.topic, spec.partitions, n + 1)
            out["contenders"][name] = pool.compare(found, body_only)
        except Exception as e:  # noqa: BLE001 - the check's verdict, reported
            out["contenders"][name] = {"error": _short_error(e)}
        finally:
            delete_topic(spec.bootstrap, spec.topic, spec.broker_log_dir)
    out["identical"] = all(c.get("records") == n and c.get("identical") == n for c in out["contenders"].values())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True, help="JSON: template spec + spark settings")
    ap.add_argument("--result", required=True)
    args = ap.parse_args(argv)
    cfg = json.loads(args.config)
    template = BenchSpec(**cfg["spec"])
    # the matrix: (value size, topic partitions) cells; one cell = the template's own
    cells = cfg.get("cells") or [{"value_size": template.value_size, "partitions": template.partitions}]
    runs: list[dict] = []
    meta: dict = {}

    def dump():
        with open(args.result, "w") as f:
            json.dump({"runs": runs, "meta": meta}, f)

    spark = None
    try:
        t = time.perf_counter()
        spark = build_session(cfg)
        meta["session_s"] = round(time.perf_counter() - t, 2)
        log(f"[spark] session up in {meta['session_s']}s ({cfg['spark_master']})"
            + (f", {len(cfg['spark_jars'])} jar(s) of Spark modules on the classpath" if cfg.get("spark_jars") else ""))
        skipped = {}
        for name in cfg["contenders"]:
            why = _available(name, cfg)
            if why:
                skipped[name] = why
        running = [n for n in cfg["contenders"] if n not in skipped]
        kinds = frame_kinds(running)
        frames: dict = {}
        pools: dict[str, RegistryPool] = {}
        frames_value_size = None
        for cell in cells:
            config = cell.get("config", template.config)
            cell_spec = dict(cfg["spec"], value_size=cell["value_size"], partitions=cell["partitions"], config=config,
                             buffer_memory=fair_buffer_memory(cell["partitions"], template.batch_size,
                                                              template.buffer_memory))
            if not frames or frames_value_size != cell["value_size"]:
                for df in frames.values():
                    df.unpersist(blocking=True)
                frames = {}
                encoded = {f for f in POOLS if any(CONTENDERS[n].rows == f"{f}-bytes" for n in running)}
                what = " and ".join("binary" if k == "binary" else
                                    f"{k} (struct{' + pre-encoded' if k in encoded else ''})" for k in sorted(kinds))
                log(f"[spark] building {fmt_int(cfg['rows'])} {what} rows of {template.key_size}+{cell['value_size']} "
                    f"bytes in {cfg['spark_partitions']} partitions, caching...")
                t = time.perf_counter()
                spec = BenchSpec(**cell_spec)
                if "binary" in kinds:
                    frames["binary"] = build_dataframe(spark, spec, cfg["rows"], cfg["spark_partitions"])
                for fmt, pool_type in POOLS.items():
                    if fmt in kinds:
                        pools[fmt] = pool_type(pool_rows(spec, cfg["rows"]), spec.key_size, spec.value_size, spec.seed,
                                               spec.schema_registry)
                        # the pre-encoded bytes only where a contender writes them
                        frames[fmt] = build_struct_dataframe(spark, pools[fmt], cfg["rows"], cfg["spark_partitions"],
                                                             fmt in encoded)
                frames_value_size = cell["value_size"]
                cache_s = round(time.perf_counter() - t, 2)
                meta.setdefault("cache_s", cache_s)  # the first DataFrame's, as before
                meta.setdefault("cache_s_by_value_size", {})[str(cell["value_size"])] = cache_s
                log(f"[spark] DataFrame cached in {cache_s}s")
                if cfg.get("warmup", True) and "warmup_s" not in meta:
                    # start the Python workers and import pyarrow (untimed), once
                    t = time.perf_counter()
                    sampler = Sampler()
                    sampler.start()
                    _action("spark-noop", next(iter(frames.values())), template)
                    sampler.stop()
                    meta["warmup_s"] = round(time.perf_counter() - t, 2)
                    # fresh workers that only counted rows: the floor of a worker's RSS.  Later
                    # runs reuse workers, which keep what earlier contenders grew them to; the
                    # pyprod-kafka writes run in workers of their own (the data source daemon).
                    meta["worker_floor_mb"] = round(sampler.worker_peak / MiB, 1)
                    log(f"[spark] warm-up (untimed no-op pass) {meta['warmup_s']}s, fresh worker RSS "
                        f"{meta['worker_floor_mb']} MB")
                for fmt, pool in pools.items():
                    names = [n for n in running if CONTENDERS[n].format == fmt]
                    check = identity_check(frames, pool, cell_spec, cfg["rows"], names)
                    meta.setdefault(f"{fmt}_identity", []).append(check)
                    same = "message bytes (after the header)" if check["body_only"] else "bytes"
                    ids = {n: c.get("schema_ids") for n, c in check["contenders"].items()}
                    log(f"[spark] {fmt} identity ({cell['value_size']} B, first {fmt_int(check['rows'])} rows, pool "
                        f"schema id {pool.schema_id}, ids written {ids}): "
                        + (f"every contender wrote the pool's {same}" if check["identical"] else
                           f"**DIFFERENT** {json.dumps(check['contenders'])[:1500]}"))
            pairs = active_pairs(cfg["contenders"], skipped)
            # alternating rounds warm every writer up (pairs included); else only the pairs
            if cfg.get("alternate") and "alternate_warmup_s" not in meta:
                names = [n for n in running if n in WRITES]
                most = max(c["partitions"] for c in cells)  # the widest requests: every request path
                widest = dict(cell_spec, partitions=most,
                              buffer_memory=fair_buffer_memory(most, template.batch_size, template.buffer_memory))
                meta["alternate_warmup_s"] = warmup_writes(spark, frames, widest, cfg["rows"], cfg.get("security"),
                                                           names, ALTERNATE_WARMUP_ROWS)
                log(f"[spark] warm-up writes of {', '.join(names)} (untimed, ~{fmt_int(ALTERNATE_WARMUP_ROWS)} "
                    f"rows each) {meta['alternate_warmup_s']}s; their rounds alternate")
            elif pairs and not cfg.get("alternate") and "pair_warmup_s" not in meta:
                names = [n for group in paired(list(CONTENDERS), pairs) for n in group]
                meta["pair_warmup_s"] = warmup_writes(spark, frames, cell_spec, cfg["rows"], cfg.get("security"),
                                                      names, PAIR_WARMUP_ROWS)
                together = "; ".join(" and ".join(g) for g in paired(cfg["contenders"], pairs))
                log(f"[spark] warm-up writes of {together} (untimed, ~{fmt_int(PAIR_WARMUP_ROWS)} "
                    f"rows each) {meta['pair_warmup_s']}s; their rounds alternate")
            where = (f" {config} v{cell['value_size']} p{cell['partitions']}" if len(cells) > 1 else "")
            # A contender's rounds run back to back: Spark stops Python workers that have been
            # idle for about a minute, so rounds spread across the whole run would each start
            # with cold workers (0.5-1 s of imports per worker) or not, depending on what ran in
            # between.  Back to back, round 1 may pay that start-up and later rounds reuse them.
            for comp in cfg["compressions"]:
                for name, rnd in schedule(cfg["contenders"], cfg["rounds"], pairs, cfg.get("alternate", False)):
                    if name in skipped:
                        if rnd == 1:
                            runs.append({"contender": name, "group": "spark", "compression": comp, "config": config,
                                         "value_size": cell["value_size"], "partitions": cell["partitions"],
                                         "status": "skipped", "note": skipped[name], "round": rnd})
                        continue
                    spec = BenchSpec(**dict(cell_spec, contender=name, compression=comp,
                                            topic=new_topic(f"{name}-{comp}"), records=cfg["rows"],
                                            label=f"{name} {comp}{where} r{rnd}/{cfg['rounds']}"))
                    res = run_once(spark, contender_frame(name, frames), name, spec, cfg.get("progress_interval", 2.0),
                                   keep_topic=cfg.get("keep_topics", False), security=cfg.get("security"),
                                   pool=pools.get(CONTENDERS[name].format or ""), profile_dir=cfg.get("profile_dir"))
                    res["round"] = rnd
                    runs.append(res)
                    dump()
                    if res["status"] == "error":
                        log(f"[{spec.label}] ERROR: {res['note'][:600]}")
        meta["ok"] = True
    except BaseException as e:  # noqa: BLE001 - reported in the results
        traceback.print_exc()
        meta["error"] = _short_error(e)
    finally:
        dump()
        if spark is not None:
            try:
                spark.stop()
            except Exception:  # noqa: BLE001 - stopping is best effort
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
