"""Retained shuffle outputs on a real local-cluster, with real faults.

Each scenario runs twice, side by side: with spark.regionRecovery.retained.enabled=true (a live
executor on the same host adopts the lost executor's retained outputs) and with retention off, which
is vanilla Spark without an external shuffle service (every map output of the lost executor is
recomputed). The count compared is map tasks Spark started after the fault, from the live model.

Every application runs with Spark's authentication and encryption on (SECURED). Tests of one configuration share an
application (`shared_cluster`), each looking only at the shuffles it ran;
what an application leaves once it ends is checked when the shared one ends (nothing_left_at_its_end). The
heartbeat timeout has settings, and so an application, of its own.
"""

from __future__ import annotations

import glob
import json
import os
import re
import threading
import time
from operator import add

import pytest

from region_recovery.testing import faults
from sparkcluster import AUTHENTICATED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

N_MAPS, N_REDUCES = 6, 3
MEASURED: dict = {}  # scenario -> counts, printed at the end of the module
LEFT_AT_END: dict[str, list | None] = {}  # app id -> retained files left when its shared application ended


# Spark's authentication, its RPC encryption and its encryption of local files, on in every application here: the
# plugin's messages travel on Spark's authenticated, encrypted RPC, and adopted outputs are encrypted files that the
# adopter serves as they are (read with the application's key).
SECURED = {**AUTHENTICATED, "spark.io.encryption.enabled": "true"}


def retention_conf(root: str, enabled: bool, **extra) -> dict:
    conf = {
        **SECURED,
        "spark.regionRecovery.retained.enabled": "true" if enabled else "false",
        "spark.regionRecovery.retained.dir": root,
    }
    conf.update(extra)
    return conf


def pairs_rdd(sc, n=3000):
    return sc.parallelize(range(n), N_MAPS).map(lambda x: (x % 30, x)).reduceByKey(add, N_REDUCES)


def outputs_by_executor(model, shuffle_id):
    on = {}
    for out in model.shuffles[shuffle_id].outputs.values():
        if out.available:
            on.setdefault(out.executor_id, []).append(out.map_index)
    return {e: sorted(v) for e, v in on.items()}


def retained_files(root: str, app_id: str, executor_id: str | None = None, shuffle_id: int | None = None) -> list:
    """Retained files of an application on this host: <root>/<appId>.<incarnation>/<executor>/shuffle_*
    (shuffle_<id>_* for one shuffle)."""
    base = os.path.join(root, glob.escape(app_id) + ".*")
    if executor_id is not None:
        base = os.path.join(base, executor_id)
    name = "shuffle_*" if shuffle_id is None else f"shuffle_{shuffle_id}_*"
    return sorted(p for p in glob.glob(os.path.join(base, "**", name), recursive=True))


def app_dir(c) -> str:
    """This driver's retained directory: <root>/<appId>.<incarnation> (a random token per driver)."""
    return c.rr.status()["retained_app_dir"]


def settled(model, shuffle_id, victim, n_outputs):
    """The JVM decided about every output of the victim (adopted or unregistered) and the model saw it."""
    sh = model.shuffles[shuffle_id]
    adopted = sum(1 for a in sh.adoptions if a.from_executor == victim)
    dropped = sum(1 for o in sh.outputs.values() if o.lost_reason and o.lost_reason.startswith("retention:"))
    return adopted + dropped >= n_outputs


def record(name: str, **counts) -> None:
    MEASURED[name] = counts
    print(f"\n[retention] {name}: " + json.dumps(counts, sort_keys=True))


@pytest.fixture(scope="module", autouse=True)
def summary():
    # autouse: set up before shared_cluster, so torn down after it stopped the shared applications
    yield
    if MEASURED:
        print("\n[retention] summary\n" + json.dumps(MEASURED, indent=2, sort_keys=True))
    assert_nothing_left_at_end()


def executor_dirs(pid: int) -> list[str]:
    """The local directories a standalone worker gave an executor (SPARK_EXECUTOR_DIRS in its environment)."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env.get(b"SPARK_EXECUTOR_DIRS", b"").decode().split(os.pathsep)


def left_of(root: str, app_id: str) -> list:
    return glob.glob(os.path.join(root, glob.escape(app_id) + ".*", "**", "*"), recursive=True)


def close_and_check_nothing_left(c, root: str) -> None:
    app_id = c.sc.applicationId
    c.close()
    left = left_of(root, app_id)
    assert left == [], f"retained files left after the application ended: {left}"


def nothing_left_at_its_end(c, root: str) -> None:
    """close_and_check_nothing_left for a shared application, which ends after the last test that uses it: what
    is left is listed right after it stopped, and asserted by assert_nothing_left_at_end at the module's end."""
    app_id = c.sc.applicationId
    if app_id not in LEFT_AT_END:
        LEFT_AT_END[app_id] = None
        c.on_close.append(lambda: LEFT_AT_END.__setitem__(app_id, left_of(root, app_id)))


def assert_nothing_left_at_end() -> None:
    """At a module's end, once its shared applications stopped: none left a retained file."""
    left = {app: files for app, files in LEFT_AT_END.items() if files != []}
    LEFT_AT_END.clear()  # each module asserts about its own applications
    assert left == {}, f"retained files left after the shared applications ended (None: not stopped): {left}"


def earlier_shuffles(c) -> set[int]:
    """With both executors up and the model caught up: the shuffles the shared application already ran."""
    c.wait_executors(2)
    c.rr.sync()
    return set(c.model.shuffles)


def run_and_pick_victim(c):
    """Runs the map stage once; returns the RDD, its result, the shuffle, and the executor holding
    the most of its outputs with their map indexes. The shuffle is the one this call ran: on a shared
    application, earlier tests' shuffles are left out."""
    known = earlier_shuffles(c)
    pairs = pairs_rdd(c.sc)
    expected = sorted(pairs.collect())
    c.rr.sync()
    (sid,) = [s for s in c.model.shuffles if s not in known]
    on = outputs_by_executor(c.model, sid)
    victim = max(on, key=lambda e: len(on[e]))
    return pairs, expected, sid, victim, on[victim]


# ---------------------------------------------------------------------------------------------------
def test_corrupt_retained_file_is_found_after_adoption_and_recomputed(shared_cluster, shared_root):
    """A retained data file corrupted on disk, same length. With Spark's defaults (LZ4 blocks, each with a
    checksum, read with spark.shuffle.detectCorrupt) the adopter checks only structure and digest before the
    relocation, then reads the data in the background: the corrupt output is unregistered before the next job
    and exactly it is recomputed. With uncompressed blocks the adopter reads every byte first and refuses it
    (RetentionAgentSuite)."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    pairs, expected, sid, victim, lost = run_and_pick_victim(c)
    bad = c.model.shuffles[sid].outputs[lost[0]]
    data = os.path.join(app_dir(c), victim, f"shuffle_{sid}_{bad.map_id}_0.data")
    with open(data, "r+b") as f:  # same length, different bytes: the LZ4 stream's header
        first = f.read(1)
        f.seek(0)
        f.write(bytes([first[0] ^ 0xFF]))

    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 60)
    sh = c.model.shuffles[sid]
    assert sorted(a.map_index for a in sh.adoptions if a.from_executor == victim) == lost, "adopted: cheap checks"

    def found(m):
        reason = m.shuffles[sid].outputs[bad.map_index].lost_reason or ""
        return "corrupt retained file found after its adoption" in reason

    assert c.model.wait_for(found, 60), "the background check did not report the corrupt output"
    reason = sh.outputs[bad.map_index].lost_reason
    assert "checksum mismatch" in reason, reason
    before = c.model.map_tasks_started
    got = sorted(pairs.collect())
    c.rr.sync()
    reexecuted = c.model.map_tasks_started - before
    assert got == expected
    assert reexecuted == 1, "exactly the corrupt output is recomputed"
    record(
        "corrupt-retained-file",
        victim_outputs=len(lost),
        adopted=len(lost),
        map_tasks_reexecuted=reexecuted,
        reason=reason,
    )
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
def test_shuffle_cleanup_releases_retained_files_including_adopted_ones(shared_cluster, shared_root):
    """ContextCleaner's shuffle cleanup (here forced, as the GC of a ShuffleDependency would) deletes
    the retained copies on the host, also those an executor adopted after a loss."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    known = earlier_shuffles(c)
    first = pairs_rdd(c.sc)
    second = c.sc.parallelize(range(100), 2).map(lambda x: (x, 1)).reduceByKey(add, 2)
    first.count()
    second.count()
    c.rr.sync()
    sid_first, sid_second = sorted(s for s in c.model.shuffles if s not in known)
    app_id = c.sc.applicationId
    on = outputs_by_executor(c.model, sid_first)
    victim = max(on, key=lambda e: len(on[e]))
    faults.wait_gone(faults.kill_executor(c.rr, victim))
    assert c.model.wait_for(lambda m: settled(m, sid_first, victim, len(on[victim])), 60)

    def files_of(sid):
        return [p for p in retained_files(root, app_id) if os.path.basename(p).startswith(f"shuffle_{sid}_")]

    assert len(files_of(sid_first)) == 3 * N_MAPS and files_of(sid_second)
    c.sc._jsc.sc().cleaner().get().doCleanupShuffle(sid_first, True)
    deadline = time.monotonic() + 30
    while files_of(sid_first) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert files_of(sid_first) == [], "retained files of a cleaned shuffle are released"
    assert len(files_of(sid_second)) == 3 * 2, "other shuffles keep theirs"
    # The coordinator reports the deletion after its agent's reply: the files can be gone before the
    # event exists, so wait for the event rather than for one sync.
    reason = f"shuffle {sid_first} removed"
    assert c.model.wait_for(lambda m: any(d.reason == reason for d in m.retained_deletions), 30), (
        "no RetainedFilesDeleted event for the cleaned shuffle"
    )
    released = c.model.read(lambda m: [d for d in m.retained_deletions if d.reason == reason])
    assert released[0].files == 3 * N_MAPS and released[0].bytes > 0
    record("shuffle-cleanup", released_files=released[0].files, released_bytes=released[0].bytes)
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
# Only with retention: plain Spark recomputing every output of a killed executor (the premise) is checked by the
# benchmark's smoke runs (executor-crash, pod-loss), in their vanilla modes; an application less here.
def test_sigkill_after_map_stage_before_consumers(shared_cluster, shared_root):
    """Kill the executor holding most map outputs between two jobs reading the shuffle."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    # job 1: the map stage and a first consumer (failure-free run)
    pairs, expected, sid, victim, lost = run_and_pick_victim(c)
    sh = c.model.shuffles[sid]
    assert all(o.retained_bytes and o.retained_bytes > 0 for o in sh.outputs.values()), (
        "every committed output was reported retained, with its size"
    )
    assert all(o.retained_checksum for o in sh.outputs.values())
    assert len(retained_files(root, c.sc.applicationId, victim, sid)) == 3 * len(lost)  # data, index, checksum
    assert os.path.dirname(app_dir(c)) == root
    assert re.fullmatch(re.escape(c.sc.applicationId) + r"\.[0-9a-f]{16}", os.path.basename(app_dir(c)))
    assert oct(os.stat(app_dir(c)).st_mode & 0o777) == "0o700"

    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 60), "executor removal not seen"
    assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 60), "no adoption decision"

    before = c.model.map_tasks_started
    got = sorted(pairs.collect())  # job 2: consumers only, if the outputs survived
    c.rr.sync()
    reexecuted = c.model.map_tasks_started - before
    assert got == expected
    sh = c.model.shuffles[sid]
    counts = {"victim_outputs": len(lost), "map_tasks_reexecuted": reexecuted}
    adoptions = [a for a in sh.adoptions if a.from_executor == victim]
    counts["adopted"] = len(adoptions)
    counts["adoption_latency_ms"] = max(a.time - a.loss_time for a in adoptions) if adoptions else None
    counts["jvm"] = c.rr.retention()
    (loss,) = [r for r in counts["jvm"] if r["executor_id"] == victim]
    # on local-cluster the Worker reports the exit within milliseconds too: either may be first
    early = loss["reason"].startswith("Executor process gone")
    assert early or loss["reason"] == "Command exited with code 137", loss
    counts["handled_on"] = "closed connection" if early else "Spark's report"
    assert sorted(a.map_index for a in adoptions) == lost
    assert reexecuted == 0, f"map tasks re-executed: {reexecuted}"
    assert c.jvm_available_outputs(sid) == N_MAPS
    for i in lost:
        out = sh.outputs[i]
        assert out.available and out.adopted_from == victim and out.executor_id != victim
    # The coordinator purges the lost executor's directory and writes its fence after the adoption
    # events settled() waited for; its RetainedFilesDeleted event follows the fence.
    assert c.model.wait_for(lambda m: any(d.executor_id == victim for d in m.retained_deletions), 30), (
        "no RetainedFilesDeleted event for the lost executor"
    )
    assert retained_files(root, c.sc.applicationId, victim) == [], "the lost executor's directory is gone"
    assert os.path.exists(os.path.join(app_dir(c), f"{victim}.fenced"))
    record("sigkill-between-jobs/retained", **counts)
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
def test_a_hello_is_taken_only_over_its_executors_own_connection(shared_cluster, shared_root):
    """Spark's registry says who an agent is. The driver's endpoint is asked with hellos naming a live executor:
    from another connection it is refused; from the connection that executor registered with Spark over it passes
    that check and is refused as a second hello (the first one stays); an id Spark never registered is refused."""
    c = shared_cluster(**retention_conf(shared_root, True))
    c.wait_executors(2)
    c.sc.parallelize(range(4), 4).count()  # tasks run only once every executor's plugin (and its hello) is done
    jvm = c.sc._jvm
    coordinator = jvm.io.regionrecovery.spark.CurrentApplication.current().features().retention().get()

    def agents() -> dict:
        live = coordinator.liveAgents()
        return {live.apply(i).executorId(): live.apply(i).node() for i in range(live.size())}

    before = agents()
    executor_id = sorted(before)[0]
    address = jvm.org.apache.spark.regionrecovery.SparkInternals.registeredExecutorAddress(c.sc._jsc.sc(), executor_id)
    assert address.isDefined(), f"Spark registered no connection for executor {executor_id}"
    nil = jvm.scala.jdk.javaapi.CollectionConverters.asScala(jvm.java.util.ArrayList()).toSeq()

    def hello(eid: str, sender: str) -> str:
        forged = jvm.io.regionrecovery.spark.retention.RetentionAgentHello(eid, "forged-node", "forged-ref", nil, nil)
        return coordinator.handle(forged, sender)

    assert "not over the connection the executor registered with Spark over" in hello(executor_id, "127.0.0.1:1")
    assert hello(executor_id, address.get()) == "its agent already said hello"
    assert hello("no-such-executor", address.get()) == "Spark has no live executor of that id"
    assert agents() == before, "no hello replaced a registered agent"


# ---------------------------------------------------------------------------------------------------
def test_sigkill_while_consumer_stage_runs(shared_cluster, shared_root):
    """Kill the executor holding most map outputs while the consuming stage's tasks are running."""
    root = shared_root
    c = shared_cluster(**retention_conf(root, True))
    c.wait_executors(2)

    def slow(it):
        time.sleep(2.0)
        return iter(sorted(it))

    expected = sorted(pairs_rdd(c.sc).mapPartitions(slow).collect())  # failure-free reference run
    c.rr.sync()
    known = set(c.model.shuffles)  # the reference run's shuffle and the shared application's earlier ones
    job_rdd = pairs_rdd(c.sc).mapPartitions(slow)
    result: dict = {}
    map_started_before = c.model.map_tasks_started
    thread = threading.Thread(target=lambda: result.setdefault("rows", job_rdd.collect()), daemon=True)
    thread.start()

    def consumer_running(m):
        sids = [s for s in m.shuffles if s not in known]
        if not sids:
            return False
        sid = max(sids)
        stages = [
            st for st in m.stages.values() if st.shuffle_id is None and st.job_ids and max(st.job_ids) == max(m.jobs)
        ]
        return (
            bool(stages)
            and any(a.tasks_started > 0 for a in stages[0].attempts.values())
            and len(m.shuffles[sid].outputs) == N_MAPS
        )

    assert c.model.wait_for(consumer_running, 120), "the consuming stage did not start"
    sid = max(s for s in c.model.shuffles if s not in known)
    on = outputs_by_executor(c.model, sid)
    victim = max(on, key=lambda e: len(on[e]))
    lost = on[victim]
    map_started_at_kill = c.model.map_tasks_started
    pid = faults.kill_executor(c.rr, victim)
    assert faults.wait_gone(pid)
    thread.join(240)
    assert not thread.is_alive(), "the job did not finish"
    c.rr.sync()
    reexecuted = c.model.map_tasks_started - map_started_at_kill
    assert map_started_at_kill - map_started_before == N_MAPS
    assert sorted(result["rows"]) == expected
    sh = c.model.shuffles[sid]
    job = c.model.jobs[max(c.model.jobs)]
    counts = {
        "victim_outputs": len(lost),
        "map_tasks_reexecuted": reexecuted,
        "fetch_failures": sum(1 for f in job.failures if f.kind == "fetch-failed"),
    }
    # adoption events come from the coordinator's thread: wait for them, not for one sync
    assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 60), "no adoption decision"
    counts["adopted"] = sum(1 for a in sh.adoptions if a.from_executor == victim)
    counts["jvm"] = c.rr.retention()
    assert counts["adopted"] == len(lost)
    assert reexecuted == 0, f"map tasks re-executed: {reexecuted} ({counts})"
    record("sigkill-during-consumer/retained", **counts)
    nothing_left_at_its_end(c, root)


# ---------------------------------------------------------------------------------------------------
def test_fetch_in_flight_when_its_executor_dies_goes_to_the_adopter(shared_cluster, shared_root):
    """A reducer is fetching from the executor when it dies: the fetch is sent to the adopter.

    The victim is frozen (SIGSTOP) before the consumers start, so a reducer on the other executor sends its
    request and gets no answer; then it is killed. Without redirection that fetch waits
    spark.shuffle.io.retryWait, retries the dead address, fails (a fetch failure, a new stage attempt).
    """
    c = shared_cluster(**retention_conf(shared_root, True))
    pairs, expected, sid, victim, lost = run_and_pick_victim(c)
    (survivor,) = [e for e in c.wait_executors(2) if e != victim]
    jobs_before = set(c.model.jobs)
    redirected_before = int(c.rr.status()["fetches_redirected"])
    pid = faults.freeze_executor(c.rr, victim)
    c.remember_frozen(pid)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault("rows", pairs.collect()), daemon=True)
    thread.start()

    def consumers_started(m):
        stage_ids = {s for k, j in m.jobs.items() if k not in jobs_before for s in j.stage_ids}
        stages = [m.stages[s] for s in stage_ids if s in m.stages]
        return sum(a.tasks_started for st in stages for a in st.attempts.values()) >= 2

    # one core per executor: with two reduce tasks launched, one runs on the survivor, fetching from the victim
    assert c.model.wait_for(consumers_started, 60), "the consumers did not start"
    time.sleep(1.5)  # its request to the frozen victim is out, unanswered
    before = c.model.map_tasks_started
    faults.kill_pid(pid)
    assert faults.wait_gone(pid)
    thread.join(120)
    assert not thread.is_alive(), "the job did not finish"
    c.rr.sync()
    assert sorted(result["rows"]) == expected
    (job,) = c.jobs_since(jobs_before)
    fetch_failures = [f for f in job.failures if f.kind == "fetch-failed"]
    assert fetch_failures == [], "the fetch waiting on the dead executor failed instead of going to the adopter"
    assert c.model.map_tasks_started == before, "no map output was recomputed"
    # the survivor's agent reports what it redirected to the driver, and logs it
    status = {}

    def reported(_model) -> bool:
        status.update(c.rr.status())
        return int(status["fetches_redirected"]) > redirected_before

    assert c.model.wait_for(reported, 30), "the driver heard of no redirected fetch"
    log = os.path.join(os.readlink(f"/proc/{faults.executor_pid(c.rr, survivor)}/cwd"), "stderr")
    with open(log, errors="replace") as f:
        redirected = [line for line in f if f"blocks from lost executor {victim} was sent again" in line]
    assert redirected, f"no redirected fetch in {log}"
    record(
        "fetch-in-flight/retained",
        victim_outputs=len(lost),
        fetches_redirected=int(status["fetches_redirected"]) - redirected_before,
        blocks_redirected=int(status["blocks_redirected"]),
    )
    nothing_left_at_its_end(c, shared_root)


# ---------------------------------------------------------------------------------------------------
# last: its settings are its own, so it gets an application of its own; settings of the first application of a
# process would leak into the later ones (see sparkcluster.forget_leaked_plugin_settings)
def test_heartbeat_timeout_unregisters_deletes_and_fences(shared_cluster, shared_root):
    """SIGSTOP until the driver times the executor out: its outputs are not trusted, its retained
    files are deleted within spark.network.timeout + 5 s, and after SIGCONT it serves nothing."""
    root = shared_root
    timeout_s = 8
    c = shared_cluster(
        **retention_conf(
            root,
            True,
            **{
                "spark.network.timeout": f"{timeout_s}s",
                "spark.executor.heartbeatInterval": "1s",
                "spark.network.timeoutInterval": "1s",
            },
        )
    )
    pairs, expected, sid, victim, lost = run_and_pick_victim(c)
    app_id = c.sc.applicationId
    assert retained_files(root, app_id, victim)

    frozen_at = time.monotonic()
    pid = faults.freeze_executor(c.rr, victim)
    c.remember_frozen(pid)
    deadline = frozen_at + timeout_s + 5
    while retained_files(root, app_id, victim) and time.monotonic() < deadline:
        time.sleep(0.2)
    gone_after = time.monotonic() - frozen_at
    assert retained_files(root, app_id, victim) == [], (
        f"retained files of the timed-out executor still there {gone_after:.1f} s after SIGSTOP"
    )
    assert c.model.wait_for(lambda m: not m.executors[victim].alive, 10)
    assert c.model.executors[victim].loss.kind.value == "heartbeat-timeout"
    assert c.model.wait_for(lambda m: settled(m, sid, victim, len(lost)), 10)
    sh = c.model.shuffles[sid]
    assert not [a for a in sh.adoptions if a.from_executor == victim], "a timed-out executor's outputs are not adopted"
    assert all(not sh.outputs[i].available for i in lost)

    served = [
        p
        for d in executor_dirs(pid)
        for i in lost
        for p in glob.glob(
            os.path.join(d, "**", f"shuffle_{sid}_{c.model.shuffles[sid].outputs[i].map_id}_0.data"), recursive=True
        )
    ]
    assert len(served) == len(lost), "the frozen executor's block manager files are still there"
    faults.thaw(pid)  # it comes back: it must not resurrect anything
    deadline = time.monotonic() + 10
    while any(os.path.exists(p) for p in served) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(p) for p in served), "the thawed executor still has the files it served"
    before = c.model.map_tasks_started
    got = sorted(pairs.collect())
    c.rr.sync()
    reexecuted = c.model.map_tasks_started - before
    assert got == expected
    assert reexecuted == len(lost)
    time.sleep(3)
    assert retained_files(root, app_id, victim) == [], "the thawed executor retained files again"
    jvm = c.sc._jvm.org.apache.spark.regionrecovery.SparkInternals
    assert jvm.outputsOnExecutor(victim).size() == 0, "an output is registered on the timed-out executor"
    exited = faults.wait_gone(pid, timeout=30)
    record(
        "heartbeat-timeout",
        victim_outputs=len(lost),
        map_tasks_reexecuted=reexecuted,
        retained_files_gone_after_s=round(gone_after, 1),
        thawed_process_exited=exited,
    )
    nothing_left_at_its_end(c, root)
