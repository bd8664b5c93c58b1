"""Executors as Kubernetes-like pods, in containers on this machine, without Kubernetes.

Kubernetes has no external shuffle service; every executor pod is its own host (its pod IP) with its own
filesystem, and the executor pods of one node may share a `hostPath` volume. Simulated here:

- a **master container** (Spark's standalone Master, as `hosts.StandaloneCluster` runs it) with **no
  workers**: the driver (in the test process, on 127.0.0.1) names `spark://...` as its master, which
  registers the application and never gives it an executor;
- **pod containers**, each running ONE executor JVM directly, as a Kubernetes executor pod does:
  `spark-class org.apache.spark.executor.CoarseGrainedExecutorBackend --driver-url ... --executor-id ...
  --hostname <pod address> --cores 1 --app-id ... --resourceProfileId 0`, no Worker. The driver accepts
  an executor that registers on its own: `CoarseGrainedSchedulerBackend`'s `RegisterExecutor` checks only
  that the executor id is not taken and the host not excluded, whatever the cluster manager launched.
  Why no standalone Worker per pod: killing a worker's container makes the Master report the worker lost,
  and Spark's DAGScheduler then unregisters every output on that host itself (`handleWorkerRemoved` ->
  `removeOutputsOnHost`), which never happens on Kubernetes: there a pod's loss is only its executor's
  disconnect (`ExecutorProcessLost`, no worker host).

Each pod has its own container name and hostname, its own loopback address 127.0.0.N on the host
network (`SPARK_LOCAL_IP`, `--hostname`) and its own process namespace; its JVM has `-Xmx512m`
(`SPARK_EXECUTOR_MEMORY`, which `spark-class` turns into `-Xmx` for this class; an `-Xmx` in
`JAVA_TOOL_OPTIONS` would lose to the launcher's default `-Xmx1g`, which comes later on the command line).

Storage, in host directories under `root` (deleted by `clean`):

- a **node** (`start_pod(..., node=...)`): the node's directory is bind-mounted at `/spark-node` in
  every pod of that node (a `hostPath` volume). A pod's local dir is `/spark-node/pods/<pod name>` (its
  private files) and the application's retained dir `/spark-node/retained`: one mount, so hard links work.
  `SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME=<node>` is what a pod template sets from the downward API
  (`spec.nodeName`); the plugin reads it through `spark.regionRecovery.retained.node-env`;
- a **reattachable volume** (`start_pod(..., volume=...)`, a persistent volume claim): its directory is
  mounted at `/spark-pvc`, holding the local dir `/spark-pvc/local` and the retained dir
  `/spark-pvc/retained`; `replace_pod` starts a new pod (new name, address and executor id) on the lost
  pod's volume. Such a pod sets no node name: each pod is its own node.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from hosts import AUTHENTICATED_OPTS, IMAGE, JVM_OPTIONS, MASTER_PORT, WORKER_TIMEOUT, Host, docker

BACKEND = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
NODE_ENV = "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME"
NODE_MOUNT = "/spark-node"
NODE_RETAINED = f"{NODE_MOUNT}/retained"
PVC_MOUNT = "/spark-pvc"
PVC_LOCAL = f"{PVC_MOUNT}/local"
PVC_RETAINED = f"{PVC_MOUNT}/retained"
EXECUTOR_MEMORY = "512m"
REGISTERED = "Successfully registered with driver"


@dataclass
class Pod:
    """One executor pod: a container running one executor JVM."""

    name: str
    address: str
    executor_id: str
    node: str | None  # the node whose directory is mounted at /spark-node (None: a volume pod)
    volume: str | None  # the volume mounted at /spark-pvc (None: a node pod)
    host: Host
    local_on_host: Path  # its local dir, seen from this machine

    @property
    def local_dir(self) -> str:
        return PVC_LOCAL if self.volume else f"{NODE_MOUNT}/pods/{self.name}"

    def logs(self) -> str:
        return self.host.logs()


class PodCluster:
    """A standalone master without workers, and executor pods that register with a running driver."""

    def __init__(self, prefix: str, master_address: str, root: Path):
        self.prefix = prefix
        self.root = root
        self.master = Host(
            f"{prefix}-master",
            master_address,
            f"exec /opt/spark/bin/spark-class org.apache.spark.deploy.master.Master --host {master_address} "
            f"--port {MASTER_PORT} --webui-port 0",
            {"SPARK_MASTER_OPTS": f"-D{WORKER_TIMEOUT} {AUTHENTICATED_OPTS}"},
        )
        self.pods: list[Pod] = []
        self.driver_url: str | None = None
        self.app_id: str | None = None
        self._next_executor = 1

    @property
    def url(self) -> str:
        return f"spark://{self.master.address}:{MASTER_PORT}"

    def start(self) -> PodCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        self.master.start().wait_log("I have been elected leader")
        return self

    # ---- the application the pods join ---------------------------------------------------------------

    def bind(self, sc) -> None:
        """The running SparkContext the next pods register with: its driver endpoint and application id."""
        conf = sc.getConf()
        self.driver_url = (
            f"spark://CoarseGrainedScheduler@{conf.get('spark.driver.host')}:{conf.get('spark.driver.port')}"
        )
        self.app_id = sc.applicationId

    # ---- storage -------------------------------------------------------------------------------------

    def node_dir(self, node: str) -> Path:
        return _shared_dir(self.root / "nodes" / node)

    def volume_dir(self, volume: str) -> Path:
        return _shared_dir(self.root / "volumes" / volume)

    def node_files(self, node: str) -> dict[str, int]:
        """Every file below a node's directory (relative path -> bytes)."""
        return walk(self.root / "nodes" / node)

    def volume_files(self, volume: str) -> dict[str, int]:
        return walk(self.root / "volumes" / volume)

    def files_left(self) -> dict[str, dict[str, int]]:
        """Every file below every node's and volume's directory: "nodes/<node>" or "volumes/<v>" -> files."""
        left = {}
        for kind in ("nodes", "volumes"):
            base = self.root / kind
            for d in sorted(base.iterdir()) if base.is_dir() else []:
                files = walk(d)
                if files:
                    left[f"{kind}/{d.name}"] = files
        return left

    # ---- pods ----------------------------------------------------------------------------------------

    def start_pod(
        self,
        name: str,
        address: str,
        node: str | None = None,
        volume: str | None = None,
        executor_id: str | None = None,
        node_env: bool = True,
    ) -> Pod:
        """Starts an executor pod of the bound application, on `node` (its directory at /spark-node) or on
        `volume` (at /spark-pvc); returns at once (`wait_registered` waits for its registration)."""
        assert self.driver_url and self.app_id, "bind(sc) first: a pod registers with a running driver"
        assert (node is None) != (volume is None), "a pod runs on a node's directory or on a volume"
        if executor_id is None:
            executor_id = str(self._next_executor)
            self._next_executor += 1
        full = f"{self.prefix}-{name}"
        env = {
            "SPARK_EXECUTOR_MEMORY": EXECUTOR_MEMORY,
            "JAVA_TOOL_OPTIONS": JVM_OPTIONS,
            "SPARK_EXECUTOR_OPTS": AUTHENTICATED_OPTS,  # the backend's own JVM: before the driver's settings reach it
        }
        if node is not None:
            volumes = {str(self.node_dir(node)): NODE_MOUNT}
            local = f"{NODE_MOUNT}/pods/{name}"
            on_host = self.node_dir(node) / "pods" / name
            if node_env:
                env[NODE_ENV] = node
        else:
            volumes = {str(self.volume_dir(volume)): PVC_MOUNT}
            local = PVC_LOCAL
            on_host = self.volume_dir(volume) / "local"
        env["SPARK_LOCAL_DIRS"] = local
        command = (
            f"mkdir -p {local} && exec /opt/spark/bin/spark-class {BACKEND} --driver-url {self.driver_url} "
            f"--executor-id {executor_id} --hostname {address} --cores 1 --app-id {self.app_id} "
            "--resourceProfileId 0"
        )
        host = Host(full, address, command, env, volumes)
        pod = Pod(name, address, executor_id, node, volume, host, on_host)
        self.pods.append(pod)
        host.start()
        return pod

    def wait_registered(self, pods: list[Pod], timeout: float = 240) -> None:
        for p in pods:
            p.host.wait_log(REGISTERED, timeout)

    def pod(self, name: str) -> Pod:
        (p,) = [p for p in self.pods if p.name == name]
        return p

    def pod_of_executor(self, executor_id: str) -> Pod:
        (p,) = [p for p in self.pods if p.executor_id == executor_id]
        return p

    def kill_pod(self, *pods: Pod) -> None:
        """The pods die at once (one `docker kill`: SIGKILL to every process of each); their files stay
        where they are mounted from, as a hostPath volume's or a claim's do."""
        docker("kill", *(p.host.id for p in pods))

    def replace_pod(self, old: Pod, new_name: str, new_address: str) -> Pod:
        """A new pod (new name, address and executor id) mounting the lost pod's volume."""
        assert old.volume is not None, "only a pod on a volume can be replaced on its volume"
        return self.start_pod(new_name, new_address, volume=old.volume)

    def remove_pods(self) -> None:
        for p in reversed(self.pods):
            p.host.stop()
        self.pods = []

    def clean(self) -> None:
        """Removes every pod and deletes every node's and volume's directory (the next application starts
        from empty disks and executor id 1)."""
        self.remove_pods()
        for kind in ("nodes", "volumes"):
            _remove_tree(self.root / kind)
        self._next_executor = 1
        self.driver_url = self.app_id = None

    def stop(self) -> None:
        self.clean()
        self.master.stop()
        _remove_tree(self.root)


def walk(base: Path) -> dict[str, int]:
    """Every regular file below `base` (path relative to it -> bytes); {} when it does not exist."""
    out: dict[str, int] = {}
    if not base.exists():
        return out
    try:
        for d, _, files in os.walk(base, onerror=_raise):
            for f in files:
                p = Path(d) / f
                out[str(p.relative_to(base))] = p.lstat().st_size
        return out
    except PermissionError:  # the containers run as root; this process may not
        lines = _in_container(base, "find /x -type f -printf '%s %P\\n'")
        return {ln.split(" ", 1)[1]: int(ln.split(" ", 1)[0]) for ln in lines.splitlines() if ln.strip()}


def _raise(e: OSError) -> None:
    raise e


def _shared_dir(d: Path) -> Path:
    """A directory the containers (root) and this process both write to."""
    d.mkdir(parents=True, exist_ok=True)
    d.chmod(0o777)
    return d


def _remove_tree(d: Path) -> None:
    if not d.exists():
        return
    try:
        shutil.rmtree(d)
    except PermissionError:  # files the containers' root made, this process being another user
        _in_container(d, "rm -rf /x/* /x/.[!.]*")
        shutil.rmtree(d)


def _in_container(d: Path, script: str) -> str:
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "-v", f"{d}:/x", IMAGE, "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} in a container over {d} failed: {done.stderr[-2000:]}")
    return done.stdout


def wait_until(predicate, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
