"""Spark jobs for tests/spark/test_spark_exactly_once.py, in a process of their own, on a Spark
standalone cluster of two executors on two hosts (the suite's shared session, ``local[2]``, has
one executor and no task retries).

``python exactly_once_job.py BOOTSTRAP ROWS WORKDIR TOPIC:FAULT ...`` starts a master and two
workers of one core each (``spark-class``, from pyspark's own ``bin/`` and ``jars/``), whose
workers call themselves ``127.0.0.1`` and ``localhost``: both the loopback address, but two hosts
to Spark.  One application then writes rows 0..ROWS-1 to each TOPIC (one write each, in the
order given) with deliveryGuarantee=exactly-once and transactionalIdPrefix ``TOPIC-txn``.  A task
attempt of partition 1 records what it did in ``WORKDIR/markers`` (``<event>.<executor id>``).

Why not ``local-cluster[2,1,1024]``: it works with pip's pyspark, but its executors share one
host, and Spark never launches a speculative copy of a task on a host where an attempt of that
task ran (``TaskSetManager.dequeueTaskFromList``: ``!(speculative && hasAttemptOnHost(...))``):
no speculation there, nor in ``local[...]``.

A failed attempt is retried once, on the other host (``spark.excludeOnFailure``).  FAULT says what
happens to partition 1:

``speculation``: attempt 0 sends three Arrow batches (its transaction is open on the
coordinator) and waits until a speculative copy, on the other host, has sent all its rows in a
transaction of its own; then it sends the rest.  Both attempts write the partition; the first to
ask Spark's commit coordinator wins, the other is killed (or denied its commit).  Give it first:
while attempt 0 waits it holds one host's only core and the other three tasks run on the other
host, so no copy of any other task can start.
``kill``: the sink's Python worker running attempt 0 flushes three Arrow batches (acknowledged
by Kafka) and kills itself with SIGKILL mid-write: no abort, no commit message.
``raise``: a row for a partition that does not exist fails attempt 0 after three Arrow batches
were sent; the task aborts its transaction.
``fail-job``: every attempt of partition 1 raises like that: the job fails.
``none``: nothing.
"""

import functools
import os
import re
import signal
import subprocess
import sys
import time

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark import TaskContext

from sparkkafka_sink import Producer
from sparkkafka_sink.spark.datasource import PyprodKafkaDataSource
from sparkkafka_sink.spark.task import task_producer
from sparkkafka_sink.spark.task.task_info import TaskInfo
from sparkkafka_sink.spark.task.write_task import run_write_task
from sparkkafka_sink.spark.writer import PyprodKafkaWriter
from sparkkafka_sink.testing import waiting

HOSTS = ("127.0.0.1", "localhost")
#: bound of every wait for an event (the cluster up, a marker, a transaction open)
WAIT_S = 120.0
#: every JVM here lives a minute or two: the serial collector and the quick compiler alone (the
#: latter for every JVM of the run: JAVA_TOOL_OPTIONS, tests/run_environment.py) halve their CPU
#: time (two cores run five JVMs and the Python workers)
JVM_OPTS = "-XX:+UseSerialGC"

#: the application's settings
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.extraJavaOptions": JVM_OPTS,
    "spark.executor.extraJavaOptions": JVM_OPTS,
    "spark.cores.max": "2",
    "spark.executor.cores": "1",
    "spark.executor.memory": "512m",
    # the SparkContext is ready once both executors registered
    "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    "spark.scheduler.maxRegisteredResourcesWaitingTime": f"{WAIT_S:.0f}s",
    # one retry, on the other host
    "spark.task.maxFailures": "2",
    "spark.excludeOnFailure.enabled": "true",
    "spark.excludeOnFailure.task.maxTaskAttemptsPerExecutor": "1",
    "spark.excludeOnFailure.task.maxTaskAttemptsPerNode": "1",
    "spark.excludeOnFailure.application.maxFailedTasksPerExecutor": "1000",
    # a copy of a task still running once 3 of the 4 finished, after 8 s: no warm task takes
    # that long (a few seconds at most, on two busy cores), only the speculation scenario's
    # waiting attempt
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.75",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.minTaskRuntime": "8s",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "500",
    # the stream to a Python worker goes out every 4 KiB (not 64): the sink's worker gets the rows
    # a UDF before it let through while that UDF waits
    "spark.buffer.size": "4096",
}


def main(bootstrap: str, rows: int, workdir: str, jobs: list) -> int:
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    markers = os.path.join(workdir, "markers")
    os.makedirs(markers, exist_ok=True)
    conf = SparkConf().setAppName("exactly-once-test").setAll(list(SPARK_CONF.items()))
    cluster = Cluster(os.path.join(workdir, "cluster"))
    try:
        cluster.start_master()
        gateway = launch_gateway(conf)  # the driver's JVM starts while the master does
        cluster.start_workers()
        spark = SparkSession(SparkContext(master=cluster.url, conf=conf, gateway=gateway))
        spark.sparkContext.setLogLevel("ERROR")
        wait_until("both executors to register", lambda: executors_up(spark) == 2)
        spark.dataSource.register(killing_source(markers))
        try:
            for topic, fault in jobs:
                write(spark, bootstrap, rows, markers, topic, fault)
        finally:
            spark.stop()
    finally:
        cluster.stop()
    return 0


def executors_up(spark) -> int:
    return len(spark.sparkContext._jsc.sc().statusTracker().getExecutorInfos()) - 1  # less the driver


def write(spark, bootstrap: str, rows: int, markers: str, topic: str, fault: str) -> None:
    prefix = f"{topic}-txn"
    df = spark.range(0, rows, numPartitions=4).selectExpr("cast(id as string) as value")
    source = "pyprod-kafka"
    if fault == "kill":
        source = KilledMidWriteSource.name()
    elif fault == "speculation":
        df = df.mapInArrow(slow_until_copied(markers, bootstrap, prefix), "value string")
    elif fault != "none":
        df = df.mapInArrow(failing(fault), "value string, partition int")
    started = time.monotonic()
    try:
        (df.write.format(source).mode("append")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("deliveryGuarantee", "exactly-once").option("transactionalIdPrefix", prefix)
         .option("coalesceBytes", "0")
         .save())
    except Exception as e:  # noqa: BLE001 - reported on stdout
        print(f"JOB FAILED {topic}: {str(e)[-400:]}", flush=True)
        return
    print(f"JOB OK {topic} ({time.monotonic() - started:.1f} s)", flush=True)


def failing(fault: str):
    def udf(batches):
        """Partition 1's first attempt (or every attempt, for fail-job) sends a row to partition
        999 in its fourth Arrow batch: the sink fails that task after it sent three batches."""
        import pyarrow as pa

        ctx = TaskContext.get()
        bad = ctx.partitionId() == 1 and (fault == "fail-job" or (fault == "raise" and ctx.attemptNumber() == 0))
        for i, batch in enumerate(batches):
            n = batch.num_rows
            partition = pa.array([999 if bad and i == 3 else None] * n, pa.int32())
            yield pa.RecordBatch.from_arrays([batch.column(0), partition], ["value", "partition"])

    return udf


# -- markers ----------------------------------------------------------------------------------------
def executor_id() -> str:
    """A standalone executor (and its Python workers) runs in ``<work dir>/<app id>/<executor id>``."""
    return os.path.basename(os.getcwd())


def mark(markers: str, event: str) -> None:
    open(os.path.join(markers, f"{event}.{executor_id()}"), "w").close()


def marked(markers: str, event: str) -> bool:
    return any(name.startswith(event + ".") for name in os.listdir(markers))


#: ``wait_until(what, predicate)``, bounded by WAIT_S (the package's: the executors import it too)
wait_until = functools.partial(waiting.wait_until, timeout=WAIT_S, interval=0.02)


# -- speculation: attempt 0 of partition 1 is slow until a speculative copy has written ------------
def slow_until_copied(markers: str, bootstrap: str, prefix: str):
    """A UDF before the sink: partition 1's attempts let their rows through in step."""

    def udf(batches):
        ctx = TaskContext.get()
        if ctx.partitionId() != 1:
            yield from batches
            return
        attempt = ctx.attemptNumber()
        own = f"-p1-t{ctx.taskAttemptId()}"  # how the sink's transactional id of this attempt ends
        mark(markers, f"spec-p1-a{attempt}-start")
        for i, batch in enumerate(batches):
            if attempt == 0 and i == 3:  # three batches went to the sink
                wait_for_transaction(bootstrap, prefix, own)
                mark(markers, "spec-p1-a0-paused")
                wait_until("a speculative copy to send its rows", lambda: marked(markers, "spec-p1-copy-sent"))
                mark(markers, "spec-p1-a0-resumed")
            yield batch
        if attempt > 0:  # the speculative copy: all its rows went to the sink
            wait_for_transaction(bootstrap, prefix, own)
            mark(markers, "spec-p1-copy-sent")

    return udf


def wait_for_transaction(bootstrap: str, prefix: str, id_suffix: str) -> None:
    """Until the transaction whose id (under ``prefix``: the write's run id comes between) ends
    with ``id_suffix`` is open on its coordinator: the sink sent rows in it."""
    from sparkkafka_sink.producer.handover import TransactionAdmin

    with TransactionAdmin({"bootstrap.servers": bootstrap}) as admin:
        def is_open() -> bool:
            return any(t.endswith(id_suffix) for t, _, _ in admin.open_transactions(prefix, time.monotonic() + 30))

        wait_until(f"transaction {prefix}…{id_suffix} to open", is_open)


# -- the kill: a pyprod-kafka writer whose Python worker dies mid-write ---------------------------
class KilledMidWriteWriter(PyprodKafkaWriter):
    """The sink's writer, except that attempt 0 of partition 1 flushes its first three Arrow
    batches (Kafka acknowledged them, in the attempt's open transaction) and then kills its own
    Python worker."""

    def __init__(self, plan, metrics_total, markers: str):
        super().__init__(plan, metrics_total)
        self.markers = markers

    def write(self, iterator):
        ctx = TaskContext.get()
        if ctx.partitionId() != 1:
            return super().write(iterator)
        mark(self.markers, f"kill-p1-a{ctx.attemptNumber()}-start")
        if ctx.attemptNumber() != 0:
            return super().write(iterator)
        producers = []

        def make(config):
            producers.append(Producer(config))
            return producers[-1]

        task_producer.Producer = make  # this worker is killed below: it makes no other task's producer

        def batches():
            for i, batch in enumerate(iterator):
                if i == 3:
                    producers[0].flush(WAIT_S)
                    mark(self.markers, "kill-p1-a0-flushed")
                    os.kill(os.getpid(), signal.SIGKILL)
                yield batch

        return run_write_task(batches(), self.plan, self.metrics_total, TaskInfo.current())


class KilledMidWriteSource(PyprodKafkaDataSource):
    markers = ""  # set on the subclass ``killing_source`` makes

    @classmethod
    def name(cls):
        return "pyprod-kafka-killed-mid-write"

    def writer(self, schema, overwrite):
        plain = super().writer(schema, overwrite)
        return KilledMidWriteWriter(plain.plan, plain.metrics_total, self.markers)


def killing_source(markers: str):
    return type("KilledMidWriteSourceWithMarkers", (KilledMidWriteSource,), {"markers": markers})


# -- the cluster ------------------------------------------------------------------------------------
class Cluster:
    """A master and two workers, started by hand as the standalone-mode docs show (their output:
    ``<work>/<name>.log``, the executors' in ``<work>/worker-<host>/``)."""

    def __init__(self, work: str):
        import pyspark

        os.makedirs(work, exist_ok=True)
        self.work = work
        home = os.path.dirname(os.path.abspath(pyspark.__file__))
        self.spark_class = os.path.join(home, "bin", "spark-class")
        self.env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_DAEMON_MEMORY="256m",
                        SPARK_DAEMON_JAVA_OPTS=JVM_OPTS,
                        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")  # no fixed port 6066
        self.procs = []
        self.url = None

    def _start(self, name: str, *args: str) -> None:
        with open(os.path.join(self.work, f"{name}.log"), "w") as out:
            self.procs.append(subprocess.Popen([self.spark_class, *args], env=self.env, stdout=out,
                                               stderr=subprocess.STDOUT))

    def start_master(self) -> None:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", "0",
                    "--webui-port", "0")

    def _master_up(self) -> bool:  # observed: the master's line naming its address
        with open(os.path.join(self.work, "master.log")) as f:
            text = f.read()
        if self.procs[0].poll() is not None:
            raise RuntimeError("the Spark master exited:\n" + text[-3000:])
        found = re.search(r"Starting Spark master at (spark://\S+)", text)
        self.url = found.group(1) if found else None
        return found is not None

    def start_workers(self) -> None:
        wait_until("the Spark master to start", self._master_up)
        for host in HOSTS:
            self._start(f"worker-{host}", "org.apache.spark.deploy.worker.Worker", "--host", host, "--port", "0",
                        "--webui-port", "0", "--cores", "1", "--memory", "1g",
                        "--work-dir", os.path.join(self.work, f"worker-{host}"), self.url)

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first: a worker stops its executors
            if p.poll() is None:
                p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(30)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], [tuple(a.split(":", 1)) for a in sys.argv[4:]]))
