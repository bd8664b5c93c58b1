"""Executor pods without containers (scenario `pod-loss`): what Kubernetes runs, simulated with processes.

A Kubernetes executor pod runs one executor JVM, started directly (no Worker), with the pod's IP as its host
name, its own local directory and its own processes; there is no external shuffle service. Here a pod is one
process group started by the driver's process once its SparkContext exists:

    <pyspark>/bin/spark-class org.apache.spark.executor.CoarseGrainedExecutorBackend
        --driver-url spark://CoarseGrainedScheduler@127.0.0.1:<spark.driver.port> --executor-id <id>
        --hostname 127.0.0.<100 + n> --cores 1 --app-id <appId> --resourceProfileId 0

with its own loopback address (`--hostname` and `SPARK_LOCAL_IP`; Linux routes all of 127.0.0.0/8 to `lo`;
tests/containers uses 127.0.0.2 to .25, hence .101 and up here), its own `SPARK_LOCAL_DIRS`, and
`-Djava.io.tmpdir` (`SPARK_EXECUTOR_OPTS`) in its pod's storage: with `retained.dir` unset, the plugin's
retained root is `<java.io.tmpdir>/spark-region-recovery-retained-<user>` on each executor, so the tmpdir says
which directory a pod shares (a node's hostPath) or keeps (its claim). The driver accepts executors that
register on their own: `CoarseGrainedSchedulerBackend`'s `RegisterExecutor` checks only that the executor id
is new and its host not excluded. Its master is a standalone Master with no Worker (`bench.standalone`), which
registers the application and launches nothing; with a Worker, the Worker's loss would make Spark unregister
every output of its host itself (`handleWorkerRemoved`), which never happens on Kubernetes, where a pod's loss
is only its executor's disconnect.

Like every executor the benchmark starts, a pod's JVM inherits `JAVA_TOOL_OPTIONS` (the tests' quick-start
JIT and class archive) and has a heap of 1 GiB (`SPARK_EXECUTOR_MEMORY`, which `spark-class` makes the
`-Xmx`); the plugin jar comes first on its class path (`SPARK_EXECUTOR_CLASSPATH`, what
`spark.executor.extraClassPath` gives the executors elsewhere; an image puts it in `jars/`), and its Python
workers find pyspark, region_recovery and bench (`PYTHONPATH`, `PYSPARK_PYTHON`).

Storage, under the mode's work directory:

- `nodes` (node hostPath): node-a holds pods 1 and 2, node-b pods 3 and 4. A pod's local directory is
  `nodes/<node>/pods/<pod>`, its tmpdir `nodes/<node>/tmp`, shared by the node's pods (so is the retained root
  below it), and `SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME=<node>` (what a pod template sets from `spec.nodeName`);
- `volumes` (reattached claim): pod n has `volumes/vol-n/local` and `volumes/vol-n/tmp`, no node name (each
  pod is its own node); a replacement pod mounts the volume of the pod it replaces.

Each pod also has a working directory of its own, `work/<pod>` (a container's), where its executor fetches
the application's jars.

Everything is on one filesystem, so the plugin's hard links work (containers, with real mounts, are in
tests/containers/pods.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

BACKEND = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
NODE_ENV = "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME"
EXECUTOR_MEMORY = "1g"  # as the other scenarios' executors (local-cluster[2,1,1024], the standalone worker's)
REGISTERED = "Successfully registered with driver"
NODES = {"node-a": (1, 2), "node-b": (3, 4)}  # node -> its pods, by number
LAYOUTS = ("nodes", "volumes")


@dataclass(frozen=True)
class PodSpec:
    """One executor pod: its number n (pod-n, executor id n, 127.0.0.<100 + n>) and its storage."""

    number: int
    local_dir: str  # SPARK_LOCAL_DIRS: Spark's block manager directories
    tmp_dir: str  # java.io.tmpdir: the default retained root is below it
    node: str | None = None  # SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME; None: unset (the pod is its own node)
    volume: str | None = None  # the claim it mounts (layout volumes)

    @property
    def name(self) -> str:
        return f"pod-{self.number}"

    @property
    def executor_id(self) -> str:
        return str(self.number)

    @property
    def address(self) -> str:
        return address(self.number)


def address(number: int) -> str:
    """A pod's loopback address; the driver and the master are on 127.0.0.1."""
    if not 1 <= number <= 154:
        raise ValueError(f"pod number {number} out of 1..154")
    return f"127.0.0.{100 + number}"


def layout(kind: str, root: str) -> list[PodSpec]:
    """The four pods of a mode: on two nodes' hostPaths (`nodes`) or each on its own claim (`volumes`)."""
    if kind == "nodes":
        return [
            PodSpec(
                n, os.path.join(root, "nodes", node, "pods", f"pod-{n}"), os.path.join(root, "nodes", node, "tmp"), node
            )
            for node, numbers in NODES.items()
            for n in numbers
        ]
    if kind == "volumes":
        return [
            PodSpec(
                n,
                os.path.join(root, "volumes", f"vol-{n}", "local"),
                os.path.join(root, "volumes", f"vol-{n}", "tmp"),
                volume=f"vol-{n}",
            )
            for n in range(1, 5)
        ]
    raise ValueError(f"unknown pod layout {kind!r}; one of {', '.join(LAYOUTS)}")


def replacement(old: PodSpec, number: int, root: str) -> PodSpec:
    """The pod Kubernetes starts for a lost one: a new number (executor id, address) on the same storage: the
    lost pod's claim (Spark's reuse), or a directory of its own on the same node's hostPath."""
    if old.volume is not None:
        return PodSpec(number, old.local_dir, old.tmp_dir, volume=old.volume)
    if old.node is not None:
        return PodSpec(number, os.path.join(root, "nodes", old.node, "pods", f"pod-{number}"), old.tmp_dir, old.node)
    raise ValueError(f"{old.name} has neither a node nor a volume")


def driver_url(host: str, port: str | int) -> str:
    return f"spark://CoarseGrainedScheduler@{host}:{port}"


def command(spark_home: str, pod: PodSpec, driver: str, app_id: str) -> list[str]:
    """What a Kubernetes executor pod runs, with the pod's executor id and address."""
    return [
        os.path.join(spark_home, "bin", "spark-class"),
        BACKEND,
        "--driver-url",
        driver,
        "--executor-id",
        pod.executor_id,
        "--hostname",
        pod.address,
        "--cores",
        "1",
        "--app-id",
        app_id,
        "--resourceProfileId",
        "0",
    ]


def environment(pod: PodSpec, base: dict[str, str], spark_home: str, jar: str, pythonpath: str) -> dict[str, str]:
    """The pod process's environment: `base` (JAVA_TOOL_OPTIONS and the rest, as every benchmark JVM) with the
    pod's address, directories, heap, class path and Python; the node name only where the pod has one."""
    env = dict(base)
    env.pop(NODE_ENV, None)
    env.update(
        SPARK_HOME=spark_home,
        SPARK_LOCAL_IP=pod.address,
        SPARK_LOCAL_DIRS=pod.local_dir,
        SPARK_EXECUTOR_OPTS=f"-Djava.io.tmpdir={pod.tmp_dir}",
        SPARK_EXECUTOR_MEMORY=EXECUTOR_MEMORY,
        SPARK_EXECUTOR_CLASSPATH=jar,
        PYTHONPATH=pythonpath,
        PYSPARK_PYTHON=sys.executable,
    )
    if pod.node is not None:
        env[NODE_ENV] = pod.node
    return env


class Pods:
    """The pods of one application, started by the driver's process: `start`, `kill`, `stop`."""

    def __init__(self, sc, root: str, kind: str, jar: str, pythonpath: str):
        import pyspark

        conf = sc.getConf()
        self.driver = driver_url(conf.get("spark.driver.host"), conf.get("spark.driver.port"))
        self.app_id = sc.applicationId
        self.home = os.path.dirname(pyspark.__file__)
        self.root, self.kind, self.jar, self.pythonpath = root, kind, jar, pythonpath
        self.logs = os.path.join(root, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.specs: list[PodSpec] = []  # every pod started, in order
        self.procs: dict[str, subprocess.Popen] = {}  # pod name -> its process (the JVM: spark-class execs it)

    def initial(self) -> list[PodSpec]:
        return layout(self.kind, self.root)

    def start(self, pod: PodSpec) -> PodSpec:
        """Starts a pod in a process group of its own; returns at once (`wait_registered` waits)."""
        for d in (pod.local_dir, pod.tmp_dir):
            os.makedirs(d, exist_ok=True)
        log = open(self.log_path(pod), "w")
        try:
            proc = subprocess.Popen(
                command(self.home, pod, self.driver, self.app_id),
                env=environment(pod, dict(os.environ), self.home, self.jar, self.pythonpath),
                cwd=self.work_dir(pod),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        self.specs.append(pod)
        self.procs[pod.name] = proc
        return pod

    def work_dir(self, pod: PodSpec) -> str:
        """The pod's working directory, its own as a container's is (not on its node's or claim's storage): an
        executor fetches the application's jars into it, and a replacement on the same claim fetches them anew."""
        d = os.path.join(self.root, "work", pod.name)
        os.makedirs(d, exist_ok=True)
        return d

    def log_path(self, pod: PodSpec) -> str:
        return os.path.join(self.logs, f"{pod.name}.log")

    def registered(self, pod: PodSpec) -> bool:
        """Whether the pod's executor logged its registration with the driver; raises if it exited."""
        proc = self.procs[pod.name]
        with open(self.log_path(pod), errors="replace") as f:
            if REGISTERED in f.read():
                return True
        if proc.poll() is not None:
            raise RuntimeError(f"{pod.name} exited with {proc.returncode}; see {self.log_path(pod)}")
        return False

    def wait_registered(self, pods: list[PodSpec], timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        waiting = list(pods)
        while waiting:
            waiting = [p for p in waiting if not self.registered(p)]
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(f"{', '.join(p.name for p in waiting)} did not register within {timeout} s")
            time.sleep(0.2)

    def kill(self, pod: PodSpec) -> None:
        """The pod dies at once: SIGKILL to its process group (the JVM and its Python workers). Its directories
        stay, as a hostPath's or a claim's do."""
        os.killpg(self.procs[pod.name].pid, signal.SIGKILL)
        self.procs[pod.name].wait(30)

    def live(self) -> list[PodSpec]:
        return [p for p in self.specs if self.procs[p.name].poll() is None]

    def local_dirs(self) -> list[str]:
        return sorted({p.local_dir for p in self.specs})

    def tmp_dirs(self) -> list[str]:
        return sorted({p.tmp_dir for p in self.specs})

    def stop(self, timeout: float = 30) -> list[str]:
        """After the application stopped: each pod exits once its driver is gone; what is left after `timeout`
        is SIGKILLed (its process group). Returns the names of the pods that had to be killed."""
        deadline = time.monotonic() + timeout
        while self.live() and time.monotonic() < deadline:
            time.sleep(0.2)
        killed = []
        for pod in self.live():
            try:
                os.killpg(self.procs[pod.name].pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.procs[pod.name].wait(30)
            killed.append(pod.name)
        return killed
