"""A standalone Spark cluster of containers on this machine, one "host" per container.

Every host has its own hostname, its own loopback address (127.0.0.2, 127.0.0.3, ...) on the host
network (no bridge, no traffic outside 127.0.0.0/8) and its own filesystem: `spark.local.dir`
(/data/local) and the retained directory (/data/retained) vanish with the container. Containers
are started with testcontainers (its reaper is off: it would pull an image) from the image that
docker/build-images.sh builds, and removed by the fixtures that start them.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from sparkcluster import AUTHENTICATED

IMAGE = "region-recovery:dev"
LOCAL_DIR = "/data/local"
RETAINED_DIR = "/data/retained"
MASTER_PORT = 7077
# Every JVM of a host (master, worker, executors: a worker's executors inherit its environment) compiles with
# C1 only and collects with the serial collector, as the JVMs of the tests on this machine do (tests/conftest.py):
# they live for seconds to minutes, on 2 cores shared with the other test worker. They map the image's class
# archive (docker/class_archive.py), as this machine's JVMs map target/cds/spark.jsa; a JVM it does not fit, or an
# image without one, runs without it, silently.
JVM_OPTIONS = (
    "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    " -XX:SharedArchiveFile=/opt/cds/spark.jsa -Xlog:cds=off -Xlog:cds+dynamic=off"
)
WORKER_TIMEOUT = "spark.worker.timeout=30"
# Spark's authentication and RPC encryption in every daemon (master, workers, their shuffle service, pods): a
# standalone cluster shares one secret, which the applications set too (conftest.container_conf)
AUTHENTICATED_OPTS = " ".join(f"-D{k}={v}" for k, v in AUTHENTICATED.items())


def authenticated_conf_dir(directory: Path) -> str:
    """A SPARK_CONF_DIR whose spark-defaults.conf sets them, for a driver started as a command (the demo, a job)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in AUTHENTICATED.items()))
    return str(directory)


def docker(*args: str, timeout: float = 120) -> str:
    """Runs the docker client; raises with its output when it fails."""
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


@dataclass
class Host:
    """One container: a master or a worker, reachable at `address`."""

    name: str
    address: str
    command: str
    env: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, str] = field(default_factory=dict)  # host directory -> mount point (read-write)
    container: object = None  # testcontainers DockerContainer while it runs

    @property
    def id(self) -> str:
        return self.container.get_wrapped_container().id

    def start(self) -> Host:
        from testcontainers.core.container import DockerContainer

        c = DockerContainer(IMAGE).with_command(["bash", "-c", self.command]).with_name(self.name)
        c = c.with_kwargs(network_mode="host", hostname=self.name)
        env = {"SPARK_LOCAL_IP": self.address, "SPARK_LOCAL_DIRS": LOCAL_DIR, "JAVA_TOOL_OPTIONS": JVM_OPTIONS}
        for k, v in {**env, **self.env}.items():
            c = c.with_env(k, v)
        for source, target in self.volumes.items():
            c = c.with_volume_mapping(source, target, "rw")
        self.container = c.start()
        return self

    def logs(self) -> str:
        out, err = self.container.get_logs()
        return (out + err).decode(errors="replace")

    def wait_log(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.logs():
                return
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: '{text}' not logged within {timeout} s; last lines:\n{self.logs()[-3000:]}")

    def exec(self, *cmd: str, timeout: float = 60) -> str:
        return docker("exec", self.id, *cmd, timeout=timeout)

    def files(self, root: str = RETAINED_DIR) -> dict[str, int]:
        """Every regular file below `root` on this host, with its size in bytes."""
        out = self.exec("find", root, "-type", "f", "-printf", "%s %p\\n")
        return {line.split(" ", 1)[1]: int(line.split(" ", 1)[0]) for line in out.splitlines() if line.strip()}

    def java_pids(self, main_class: str) -> list[int]:
        """Pids (in this container) of the JVMs running `main_class`."""
        out = self.exec("ps", "-eo", "pid=,args=")
        return [int(line.split(None, 1)[0]) for line in out.splitlines() if main_class in line]

    def executor_log_tail(self, lines: int = 40) -> str:
        """The last region-recovery and error lines the executors of this host logged (for failure messages)."""
        return self.exec(
            "sh", "-c", f"grep -h 'region-recovery\\|ERROR\\|Exception\\|SIGNAL' /data/work/*/*/stderr | tail -{lines}"
        )

    def worker_log_tail(self, lines: int = 20) -> str:
        """The last lines a worker logged about its executors: how each ended (its exit code tells a SIGTERM, 143,
        from the kill the worker forces 10 s later, 137), for failure messages."""
        return "\n".join([line for line in self.logs().splitlines() if "xecutor" in line][-lines:])

    def kill_pid(self, pid: int) -> None:
        self.exec("kill", "-KILL", str(pid))

    def pause(self) -> None:
        docker("pause", self.id)

    def unpause(self) -> None:
        docker("unpause", self.id)

    def kill(self) -> None:
        """Node loss: every process of the host dies at once, and its disk goes with the container."""
        docker("kill", self.id)

    def stop(self) -> None:
        if self.container is None:
            return
        try:
            if docker("inspect", "-f", "{{.State.Paused}}", self.id).strip() == "true":
                self.unpause()
        except RuntimeError:
            pass
        try:
            self.container.stop(force=True, delete_volume=True)
        except Exception:  # already gone (killed and removed)
            pass
        self.container = None


class StandaloneCluster:
    """A standalone master and `workers` workers, each a host; `cores[i]` executor slots on worker i."""

    def __init__(self, prefix: str, first_address: int, cores: list[int], worker_conf: dict[str, str] | None = None):
        self.prefix = prefix
        a = first_address
        self.master = Host(
            f"{prefix}-master",
            f"127.0.0.{a}",
            f"exec /opt/spark/bin/spark-class org.apache.spark.deploy.master.Master --host 127.0.0.{a} "
            f"--port {MASTER_PORT} --webui-port 0",
            # a lost worker is dropped after 30 s (default 60 s), later than a frozen executor's heartbeat timeout
            {"SPARK_MASTER_OPTS": f"-D{WORKER_TIMEOUT} {AUTHENTICATED_OPTS}"},
        )
        # the workers' heartbeat interval is a quarter of their own spark.worker.timeout: the same on both sides
        opts = " ".join(
            [f"-D{WORKER_TIMEOUT}", AUTHENTICATED_OPTS, *(f"-D{k}={v}" for k, v in (worker_conf or {}).items())]
        )
        self.workers = [
            Host(
                f"{prefix}-worker-{i + 1}",
                f"127.0.0.{a + 1 + i}",
                f"exec /opt/spark/bin/spark-class org.apache.spark.deploy.worker.Worker --host 127.0.0.{a + 1 + i} "
                f"--cores {n} --memory 2g --webui-port 0 --work-dir /data/work {self.url}",
                {"SPARK_WORKER_OPTS": opts},
            )
            for i, n in enumerate(cores)
        ]

    @property
    def url(self) -> str:
        return f"spark://{self.master.address}:{MASTER_PORT}"

    @property
    def hosts(self) -> list[Host]:
        return [self.master, *self.workers]

    def start(self) -> StandaloneCluster:
        self.master.start().wait_log("I have been elected leader")
        for w in self.workers:
            w.start()
        for w in self.workers:
            w.wait_log("Successfully registered with master")
        return self

    def restart_worker(self, w: Host) -> None:
        """A lost host comes back (a new container: an empty disk)."""
        w.stop()
        w.start().wait_log("Successfully registered with master")

    def worker_at(self, address: str) -> Host:
        (w,) = [w for w in self.workers if w.address == address]
        return w

    def stop(self) -> None:
        for h in reversed(self.hosts):
            h.stop()

    def retained_left(self) -> dict[str, dict[str, int]]:
        """Files under the retained directory of every running worker: host name -> {path: bytes}."""
        left = {}
        for w in self.workers:
            if w.container is not None:
                files = w.files() if _exists(w, RETAINED_DIR) else {}
                if files:
                    left[w.name] = files
        return left

    def wait_no_retained_bytes(self, timeout: float = 60) -> dict[str, dict[str, int]]:
        """Waits until no worker has a retained file left; returns what is left at the deadline."""
        deadline = time.monotonic() + timeout
        left = self.retained_left()
        while left and time.monotonic() < deadline:
            time.sleep(1)
            left = self.retained_left()
        return left


def _exists(h: Host, path: str) -> bool:
    return h.exec("sh", "-c", f"test -e {path} && echo yes || echo no").strip() == "yes"
