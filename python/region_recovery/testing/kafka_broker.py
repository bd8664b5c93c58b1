"""A one-node Kafka broker on 127.0.0.1 for the streaming tests and benchmark (KRaft: no ZooKeeper, no registry).

It runs ``kafka.Kafka`` from the jars ``scripts/fetch-kafka-jars.sh`` fetches (kafka_2.13 4.1.1) in a JVM of its
own: its kafka-clients, Scala and Jackson differ from Spark's, so it never shares Spark's class path. Its log
directory is fresh for each broker. Records are written with Spark's own Kafka sink (``produce``), so the tests
need no Python Kafka client.

    with KafkaBroker(broker_jars, workdir) as broker:
        spark.readStream.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap) ...
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import uuid
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

START_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _jars(directory: str, what: str) -> list[str]:
    names = os.listdir(directory) if os.path.isdir(directory) else []
    jars = sorted(os.path.join(directory, n) for n in names if n.endswith(".jar"))
    if not jars:
        raise FileNotFoundError(f"no {what} jars in {directory}: run scripts/fetch-kafka-jars.sh")
    return jars


def connector_jars(directory: str) -> str:
    """``spark.jars`` for Spark's Kafka source and sink: the jars of target/kafka-connector-jars, comma-separated."""
    return ",".join(_jars(directory, "Kafka connector"))


def load_connector(spark: SparkSession, directory: str) -> None:
    """Makes the connector's classes visible to the driver of a running application.

    ``spark.jars`` reaches the executors, and the driver only when its JVM starts with it: a Python process that
    started an earlier application (a pytest worker) has its driver JVM already. The jars are then added to the
    driver's class loader (spark-submit's ``MutableURLClassLoader``, the context class loader of every thread
    py4j and the streaming queries run on); adding a jar it has already is harmless."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None  # a running classic application
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    for jar in _jars(directory, "Kafka connector"):
        loader.addURL(jvm.java.io.File(jar).toURI().toURL())


class KafkaBroker:
    """One broker and controller in one JVM, listening on 127.0.0.1 only; ``stop()`` (or the ``with``) ends it."""

    def __init__(self, jars_dir: str, workdir: str, partitions: int = 4):
        self.classpath = os.pathsep.join(_jars(jars_dir, "Kafka broker"))
        self.workdir = workdir
        self.port, self.controller_port = _free_port(), _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.partitions = partitions
        self.process: subprocess.Popen | None = None
        self.log_path = os.path.join(workdir, "broker.log")

    def _properties(self) -> str:
        logs = os.path.join(self.workdir, "kraft-logs")
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": logs,
            "num.partitions": str(self.partitions),  # topics are created by their first write
            "auto.create.topics.enable": "true",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        path = os.path.join(self.workdir, "server.properties")
        with open(path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        return path

    def _java(self, *args: str) -> list[str]:
        return ["java", "-Xmx512m", "-XX:+UseSerialGC", "-cp", self.classpath, *args]

    def start(self) -> KafkaBroker:
        os.makedirs(self.workdir, exist_ok=True)
        props = self._properties()
        with open(self.log_path, "a") as log:
            formatted = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", str(uuid.uuid4()), "-c", props),
                stdout=log,
                stderr=subprocess.STDOUT,
                timeout=120,
            )
        if formatted.returncode != 0:
            raise RuntimeError(f"formatting the Kafka broker's storage failed; see {self.log_path}")
        log = open(self.log_path, "a")
        self.process = subprocess.Popen(self._java("kafka.Kafka", props), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError as e:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the Kafka broker did not start within {START_TIMEOUT_S:.0f} s; see {self.log_path}"
                    ) from e
                time.sleep(0.2)

    def stop(self) -> None:
        """Ends the broker's JVM (this object's process only)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def produce(self, spark: SparkSession, topic: str, first: int, count: int, keys: int = 100) -> None:
        """Appends records ``first .. first+count-1`` to ``topic`` with Spark's Kafka sink: key ``str(n % keys)``,
        value ``str(n)``, spread over the topic's partitions by key, in the order of n within each (one writer)."""
        from pyspark.sql.functions import col

        (
            spark.range(first, first + count, numPartitions=1)
            .select((col("id") % keys).cast("string").alias("key"), col("id").cast("string").alias("value"))
            .write.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", topic)
            .save()
        )
