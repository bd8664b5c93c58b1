"""A standalone master and worker on 127.0.0.1, started by the benchmark, with Spark's external shuffle service.

The external shuffle service is what standalone and YARN users deploy against executor loss: the worker
serves the shuffle files of its executors after they die. local-cluster cannot run it (its workers share
the driver's JVM), so `executor-crash` and `tpch-executor-kill` run every mode on this cluster instead, and only
the `vanilla-ess` mode turns the service on for its application (spark.shuffle.service.enabled).

One worker with two cores gives two one-core executors on one host, as local-cluster[2,1,1024] does.
The master and worker run in their own process group and are stopped by their pids.

`StandaloneCluster(workdir, worker=False)` starts the master alone (`pod-loss`): an application registers
with it and gets no executor from it; its executors are the pods `bench.pods` starts, which register with
the driver on their own, as Kubernetes executor pods do.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """`with StandaloneCluster(workdir) as c:` gives c.url (the master), c.app_conf (every application's
    executor sizes) and c.ess_conf (what an application sets to use the worker's shuffle service)."""

    def __init__(
        self, workdir: str, cores: int = 2, memory: str = "2g", env: dict[str, str] | None = None, worker: bool = True
    ):
        import pyspark

        self.home = os.path.dirname(pyspark.__file__)
        self.workdir = workdir
        self.cores, self.memory = cores, memory
        self.env = env or {}  # e.g. PYTHONPATH: the executors' Python workers inherit the worker's environment
        self.worker = worker  # False: the master alone, which launches no executor
        self.master_port, self.ess_port = free_port(), free_port()
        self.procs: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def app_conf(self) -> dict[str, str]:
        """Every application's settings: two one-core executors of 1 GiB, as local-cluster[2,1,1024]; without a
        worker none (the pods set their own cores and heap)."""
        if not self.worker:
            return {}
        return {"spark.executor.cores": "1", "spark.cores.max": str(self.cores), "spark.executor.memory": "1g"}

    @property
    def ess_conf(self) -> dict[str, str]:
        """An application's settings to fetch from the worker's shuffle service."""
        return {"spark.shuffle.service.enabled": "true", "spark.shuffle.service.port": str(self.ess_port)}

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def _start(self, name: str, args: list[str], env: dict[str, str], ready: str, timeout: float = 120) -> None:
        log_path = os.path.join(self.workdir, f"{name}.log")
        log = open(log_path, "w")
        proc = subprocess.Popen(
            [os.path.join(self.home, "bin", "spark-class"), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs.append(proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the standalone {name} exited with {proc.returncode}; see {log_path}")
            with open(log_path, errors="replace") as f:
                if ready in f.read():
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the standalone {name} did not log {ready!r} within {timeout} s; see {log_path}")

    def start(self) -> StandaloneCluster:
        for sub in ("worker", "local", "logs"):
            os.makedirs(os.path.join(self.workdir, sub), exist_ok=True)
        env = dict(
            os.environ,
            **self.env,
            SPARK_HOME=self.home,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=os.path.join(self.workdir, "logs"),
            SPARK_LOCAL_DIRS=os.path.join(self.workdir, "local"),  # the executors' block manager directories
        )
        try:
            self._start(
                "master",
                ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(self.master_port)]
                + ["--webui-port", str(free_port())],
                env,
                "I have been elected leader",
            )
            if not self.worker:
                return self
            opts = f"-Dspark.shuffle.service.enabled=true -Dspark.shuffle.service.port={self.ess_port}"
            self._start(
                "worker",
                ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(self.cores)]
                + ["--memory", self.memory, "--webui-port", str(free_port())]
                + ["--work-dir", os.path.join(self.workdir, "worker"), self.url],
                dict(env, SPARK_WORKER_OPTS=opts),
                "Successfully registered with master",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):  # the worker first: it kills its executors
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
