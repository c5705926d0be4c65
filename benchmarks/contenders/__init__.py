"""The contenders: name -> where it runs and what it is.

Standalone and limit contenders run one per child process (``benchmarks.worker``) so that
each one's peak RSS is its own; the Spark contenders run one after another inside one Spark
process (``benchmarks.contenders.spark``).  A standalone contender module provides::

    available() -> str | None            # None, or why it cannot run (the run is "skipped")
    prepare(spec, keys, values) -> data   # untimed: turn the Arrow pool into the client's input
    setup(spec) -> client                 # untimed: create the client, fetch metadata
    run(spec, client, data, progress) -> dict   # timed: send spec.records records, wait for acks
    teardown(client)                      # untimed: close

A contender with ``security`` writes over that listener of the harness's own Apache Kafka, which
then starts with it (``BrokerSecurity``); such contenders are not in the ``all``/``spark``
groups (they change the broker a run starts): name them.  ``opt_in`` contenders are left out of
the groups too (``spark-pyprod-eos``: a variant of ``spark-pyprod`` measured as its cost, not a
different way of writing).

``COST_PAIRS``: a contender that is another (its baseline: ``spark-pyprod``, or the same bytes
pre-encoded for Avro and Protobuf) with one thing changed, and the label of that thing.  When both of a pair
run, the Spark process measures them together (warm-up writes, alternating rounds) and the
summary reports the cost: the variant's rows/s over the baseline's, per round and as the median
of those ratios.

The Avro and Protobuf contenders (``rows`` other than ``binary``) write a struct column through
a Schema Registry (``benchmarks/avro.py``, ``benchmarks/protobuf.py``), which the harness starts
for them; they are opt-in too: ``--avro-matrix`` runs the four Avro ones, ``--protobuf-matrix``
the three Protobuf ones and ``spark-pyprod-avro`` beside them (Avro's cost there is taken over
Protobuf's pre-encoded bytes: values of the same size, the same work for the sink).
"""

from __future__ import annotations

from dataclasses import dataclass


class Skip(Exception):
    """The contender cannot run here (missing API or library): reported, not an error."""


@dataclass(frozen=True)
class Contender:
    name: str
    group: str  # "standalone" | "limit" | "spark"
    module: str
    description: str
    ours: bool = False
    #: the secured listener it writes over (None: PLAINTEXT); the harness then starts its
    #: Apache Kafka with that listener and passes the contender its bootstrap and options
    security: str | None = None
    #: writes in Kafka transactions: its count on the broker is read with read_committed (the
    #: log also holds commit markers, which take offsets)
    transactional: bool = False
    #: in no group (``all``, ``spark``...): selected by name only
    opt_in: bool = False
    #: the rows it writes: ``binary`` (the pool's key/value bytes), ``avro`` / ``protobuf`` (the
    #: value a struct, serialized in that format on the way) or ``avro-bytes`` /
    #: ``protobuf-bytes`` (that struct's framed value, encoded before)
    rows: str = "binary"
    #: Spark modules whose jars the session needs (``kafka``: spark-sql-kafka, ``avro``: spark-avro)
    jars: tuple[str, ...] = ()
    #: the contender its "ratio to ours" is taken against (None: its group's, ``REFERENCE``)
    reference: str | None = None

    @property
    def grouped(self) -> bool:
        return not (self.security or self.opt_in)

    @property
    def registry(self) -> bool:
        """It writes through a Schema Registry (the harness starts one)."""
        return self.rows != "binary"

    @property
    def format(self) -> str | None:
        """The registry format of its rows (``avro``, ``protobuf``), None for binary rows."""
        return None if self.rows == "binary" else self.rows.removesuffix("-bytes")


@dataclass(frozen=True)
class CostPair:
    """``contender`` is ``baseline`` with one thing changed (``label``): its cost is the ratio
    of their rows/s, measured in the same run."""

    contender: str
    baseline: str
    label: str


CONTENDERS: dict[str, Contender] = {c.name: c for c in [
    Contender("ours-send", "standalone", "benchmarks.contenders.ours_send",
              "our Producer.send() once per record, then flush()", ours=True),
    Contender("ours-batch", "standalone", "benchmarks.contenders.ours_batch",
              "our Producer.send_batch() with Arrow key/value arrays (arrow-batch rows per call)", ours=True),
    Contender("confluent", "standalone", "benchmarks.contenders.confluent_loop",
              "confluent-kafka Producer.produce() loop (poll(0) per chunk), then flush()"),
    Contender("kafka-python", "standalone", "benchmarks.contenders.kafka_python_loop",
              "kafka-python KafkaProducer.send() loop, then flush()"),
    Contender("replay-limit", "limit", "benchmarks.contenders.replay",
              "pre-encoded Produce requests written on one socket, pipelined: the broker's ceiling"),
    Contender("spark-pyprod", "spark", "benchmarks.contenders.spark",
              'df.write.format("pyprod-kafka").save()', ours=True),
    Contender("spark-pyprod-sasl-ssl", "spark", "benchmarks.contenders.spark",
              'spark-pyprod over the SASL_SSL listener: TLS + SASL SCRAM-SHA-512 (the cost of security)',
              ours=True, security="SASL_SSL"),
    Contender("spark-pyprod-eos", "spark", "benchmarks.contenders.spark",
              'spark-pyprod with deliveryGuarantee=exactly-once: a Kafka transaction per task, committed by '
              'the driver (the cost of exactly-once)', ours=True, transactional=True, opt_in=True),
    Contender("spark-jvm-kafka", "spark", "benchmarks.contenders.spark",
              'df.write.format("kafka").save(): Spark\'s own Kafka sink (spark-sql-kafka, Java kafka-clients)',
              jars=("kafka",)),
    Contender("spark-mapinarrow-confluent", "spark", "benchmarks.contenders.spark",
              "df.mapInArrow(fn) where fn produces each row with confluent-kafka"),
    Contender("spark-foreach-confluent", "spark", "benchmarks.contenders.spark",
              "df.foreachPartition(fn) where fn produces each Row with confluent-kafka"),
    Contender("spark-foreach-kafka-python", "spark", "benchmarks.contenders.spark",
              "df.foreachPartition(fn) where fn sends each Row with kafka-python"),
    Contender("spark-noop", "spark", "benchmarks.contenders.spark",
              "df.mapInArrow(fn) where fn only counts rows: what Spark alone costs (the floor)"),
    Contender("spark-pyprod-avro", "spark", "benchmarks.contenders.spark",
              'df.write.format("pyprod-kafka") with valueFormat=avro: the struct value serialized by the sink, '
              'its schema registered by the driver', ours=True, opt_in=True, rows="avro",
              reference="spark-pyprod-avro"),
    Contender("spark-jvm-avro", "spark", "benchmarks.contenders.spark",
              'concat(header, to_avro(value)) written by df.write.format("kafka"): Spark\'s JVM path to the same '
              'bytes (spark-avro, spark-sql-kafka)', opt_in=True, rows="avro", jars=("kafka", "avro"),
              reference="spark-pyprod-avro"),
    Contender("spark-confluent-avro", "spark", "benchmarks.contenders.spark",
              "df.mapInArrow(fn) where fn serializes each row with confluent-kafka's AvroSerializer and produces "
              "it with confluent-kafka", opt_in=True, rows="avro", reference="spark-pyprod-avro"),
    Contender("spark-pyprod-avro-bytes", "spark", "benchmarks.contenders.spark",
              'df.write.format("pyprod-kafka") of the same Avro values encoded beforehand (binary): the cost of '
              'Avro is spark-pyprod-avro over this', ours=True, opt_in=True, rows="avro-bytes",
              reference="spark-pyprod-avro"),
    Contender("spark-pyprod-protobuf", "spark", "benchmarks.contenders.spark",
              'df.write.format("pyprod-kafka") with valueFormat=protobuf: the struct value serialized by the sink '
              '(derived proto3 schema), registered by the driver', ours=True, opt_in=True, rows="protobuf",
              reference="spark-pyprod-protobuf"),
    Contender("spark-confluent-protobuf", "spark", "benchmarks.contenders.spark",
              "df.mapInArrow(fn) where fn builds each row's message (class from the schema's descriptor set), "
              "serializes it with confluent-kafka's ProtobufSerializer and produces it with confluent-kafka",
              opt_in=True, rows="protobuf", reference="spark-pyprod-protobuf"),
    Contender("spark-pyprod-protobuf-bytes", "spark", "benchmarks.contenders.spark",
              'df.write.format("pyprod-kafka") of the same Protobuf values encoded beforehand (binary): the cost '
              'of Protobuf is spark-pyprod-protobuf over this', ours=True, opt_in=True, rows="protobuf-bytes",
              reference="spark-pyprod-protobuf"),
]}

#: the Avro comparison (``--avro-matrix``, group ``avro``): ours, Spark's JVM path, confluent-kafka's,
#: and ours writing the same bytes pre-encoded
AVRO = ["spark-pyprod-avro", "spark-jvm-avro", "spark-confluent-avro", "spark-pyprod-avro-bytes"]

#: contenders needing a secured broker, and opt-in ones, are left out of the groups: selected by
#: name only
GROUPS = {g: [n for n, c in CONTENDERS.items() if c.group == g and c.grouped]
          for g in ("standalone", "limit", "spark")}
GROUPS["all"] = [n for n, c in CONTENDERS.items() if c.grouped]
GROUPS["avro"] = AVRO
#: the Protobuf comparison (``--protobuf-matrix``, group ``protobuf``): ours, confluent-kafka's, ours
#: writing the same bytes pre-encoded
PROTOBUF = ["spark-pyprod-protobuf", "spark-confluent-protobuf", "spark-pyprod-protobuf-bytes"]
GROUPS["protobuf"] = PROTOBUF

#: the costs measured as pairs (key: the ``pair`` field of each entry of results.json's ``costs``)
COST_PAIRS: dict[str, CostPair] = {
    "tls": CostPair("spark-pyprod-sasl-ssl", "spark-pyprod", "TLS+SASL"),
    "exactly-once": CostPair("spark-pyprod-eos", "spark-pyprod", "exactly-once"),
    "avro": CostPair("spark-pyprod-avro", "spark-pyprod-avro-bytes", "Avro serialization"),
    "protobuf": CostPair("spark-pyprod-protobuf", "spark-pyprod-protobuf-bytes", "Protobuf serialization"),
    # beside Protobuf's: pre-encoded values of the same size are the same work for the sink
    "avro-beside-protobuf": CostPair("spark-pyprod-avro", "spark-pyprod-protobuf-bytes", "Avro serialization"),
}

#: other names accepted by --contenders
ALIASES = {"pyprod-kafka": "spark-pyprod", "spark-kafka": "spark-jvm-kafka", "pyprod-kafka-eos": "spark-pyprod-eos"}

#: the contender each group's "ratio to ours" is taken against
REFERENCE = {"standalone": "ours-send", "limit": "ours-batch", "spark": "spark-pyprod"}


def resolve(spec: str) -> list[str]:
    """``all`` | group names | contender names, comma-separated -> contender names in order."""
    wanted: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        item = ALIASES.get(item, item)
        names = GROUPS.get(item) or ([item] if item in CONTENDERS else None)
        if names is None:
            raise ValueError(f"unknown contender {item!r}; choose from: "
                             + ", ".join(list(GROUPS) + list(CONTENDERS)))
        wanted.extend(n for n in names if n not in wanted)
    order = list(CONTENDERS)
    return sorted(wanted, key=order.index)
