"""Every ``spark.regionRecovery.*`` key, declared once: type, default, accepted values, documentation,
section of docs/configuration.md, and which side reads it. The plugin declares the same keys
(``config/ConfigKeys.scala``); tests/contract proves the two agree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .parsers import (
    DURATION_FORMS,
    parse_attempts_or_unlimited,
    parse_duration_ms,
    parse_env_name,
    parse_jitter,
    parse_job_id,
    parse_multiplier,
    parse_path,
    parse_setting_names,
    parse_uri,
)
from .registry import PREFIX, ConfigError, ConfigKey, register, register_namespace, renamed
from .typed import boolean, choice, duration, integer, size

_RS = PREFIX + "restart-strategy."
_RESTART = "Restart strategy"
_FAILOVER = "Failover"
_PLUGIN = "Plugin (JVM side)"
_RETAINED = "Retained shuffle outputs"

_RESTART_TYPES = {
    **dict.fromkeys(["none", "off", "disable"], "none"),
    **dict.fromkeys(["fixed-delay", "fixeddelay"], "fixed-delay"),
    **dict.fromkeys(["failure-rate", "failurerate"], "failure-rate"),
    **dict.fromkeys(["exponential-delay", "exponentialdelay"], "exponential-delay"),
}
_FAILOVER_STRATEGIES = {"region": "region", "full": "full"}
_RELEASE_POLICIES = {p: p for p in ("shuffle-cleanup", "job-end", "consumers-finished")}

# what an unset strategy means, as `region-recovery config` and docs/configuration.md show it
RESTART_STRATEGY_UNSET = "unset: exponential-delay under rr.run and rr.stream"
RESTART_STRATEGY_TYPE = choice(
    _RS + "type",
    "none",
    _RESTART_TYPES,
    "none, off, disable; fixed-delay, fixeddelay; failure-rate, failurerate; "
    "exponential-delay, exponentialdelay (any case)",
    (
        "Which restart strategy to use. Unset, `rr.run` restarts under `exponential-delay` with at most 3 "
        "restarts in a row (`attempts-before-reset-backoff` 3 unless set: never unbounded) and `rr.stream` "
        "under `exponential-delay`, Flink's default once a job can restart; `none` turns restarts off. The "
        "deprecated Flink key `spark.regionRecovery.restart-strategy` is read too; `.type` wins, and a bad "
        "value under either is an error."
    ),
    deprecated_names=(PREFIX + "restart-strategy",),
    shown_default=RESTART_STRATEGY_UNSET,
    section=_RESTART,
)
FIXED_DELAY_ATTEMPTS = integer(
    _RS + "fixed-delay.attempts",
    1,
    (
        "Restarts allowed before the job is declared failed; failure number attempts+1 is not restarted. "
        "Every failure counts."
    ),
    minimum=0,
    section=_RESTART,
)
FIXED_DELAY_DELAY = duration(
    _RS + "fixed-delay.delay",
    "1 s",
    ("Delay between two consecutive restart attempts."),
    section=_RESTART,
)
FAILURE_RATE_MAX_FAILURES = integer(
    _RS + "failure-rate.max-failures-per-interval",
    1,
    (
        "Restarts allowed within one interval. The job fails when more than this many failures fall within "
        "the interval (a failure exactly one interval after the oldest counted one still counts)."
    ),
    minimum=1,
    section=_RESTART,
)
FAILURE_RATE_INTERVAL = duration(
    _RS + "failure-rate.failure-rate-interval",
    "1 min",
    ("Sliding window in which failures are counted."),
    minimum_ms=1,
    section=_RESTART,
)
FAILURE_RATE_DELAY = duration(
    _RS + "failure-rate.delay",
    "1 s",
    ("Delay between two consecutive restart attempts."),
    section=_RESTART,
)
EXPONENTIAL_INITIAL_BACKOFF = duration(
    _RS + "exponential-delay.initial-backoff",
    "1 s",
    ("Backoff of the first restart after a reset."),
    minimum_ms=1,
    section=_RESTART,
)
EXPONENTIAL_MAX_BACKOFF = duration(
    _RS + "exponential-delay.max-backoff",
    "1 min",
    "Highest backoff.",
    minimum_ms=1,
    accepted_extra=" and not below initial-backoff",
    section=_RESTART,
)
EXPONENTIAL_MULTIPLIER = register(
    ConfigKey(
        _RS + "exponential-delay.backoff-multiplier",
        1.5,
        parse_multiplier,
        "a number > 1",
        (
            "The k-th restart attempt since a reset waits `initial-backoff × multiplier^k` (k = 0, 1, …), ± "
            "jitter, clamped to [initial, max]."
        ),
        "1.5",
        type="double",
        section=_RESTART,
    )
)
EXPONENTIAL_RESET_THRESHOLD = duration(
    _RS + "exponential-delay.reset-backoff-threshold",
    "1 h",
    ("A failure at least this long after the previously scheduled restart resets the backoff and the attempt count."),
    minimum_ms=1,
    section=_RESTART,
)
EXPONENTIAL_JITTER = register(
    ConfigKey(
        _RS + "exponential-delay.jitter-factor",
        0.1,
        parse_jitter,
        "a number between 0 and 1",
        (
            "A random whole number of milliseconds of up to this fraction of the backoff is added or subtracted, "
            "so that jobs failing together do not restart together."
        ),
        "0.1",
        type="double",
        section=_RESTART,
    )
)
EXPONENTIAL_ATTEMPTS = register(
    ConfigKey(
        _RS + "exponential-delay.attempts-before-reset-backoff",
        None,
        parse_attempts_or_unlimited,
        "an integer >= 1, or infinite / unlimited",
        (
            "Restart attempts allowed until the backoff resets; the next one fails the job. Failures that arrive "
            "before a scheduled restart merge into it and do not count."
        ),
        "unlimited",
        type="int-or-unlimited",
        minimum=1,
        section=_RESTART,
    )
)
FAILOVER_STRATEGY = choice(
    PREFIX + "failover-strategy",
    "region",
    _FAILOVER_STRATEGIES,
    "region, full (any case)",
    (
        "`region`: restart the failed task's pipelined region, the producer regions of inputs that are no "
        "longer available, and every consumer region of a restarted region, transitively (Flink's "
        "`RestartPipelinedRegionFailoverStrategy`). `full`: restart every task of the job. The planner uses "
        "it for every recovery decision; for a job-level restart (`rr.run`), `region` reuses every shuffle "
        "the failed attempt completed and `full` unregisters them so that the next attempt recomputes "
        "everything."
    ),
    section=_FAILOVER,
)
SKIP_DETERMINISTIC_CONSUMERS = boolean(
    PREFIX + "failover.skip-deterministic-consumers",
    False,
    (
        "Beyond Flink. When `true`, a restarted producer whose output is deterministic (Spark knows each "
        "RDD's determinism) and re-readable does not drag in the consumers that already read that output: the "
        "rerun writes identical data, so their results stay correct. Indeterminate producers (for example a "
        "round-robin `repartition`) keep Flink's behaviour. `false` is Flink-exact."
    ),
    section=_FAILOVER,
)
RESTART_CONSUMERS_OF_CHANGED_OUTPUTS = boolean(
    PREFIX + "failover.restart-consumers-of-changed-outputs",
    True,
    (
        "Flink's rule 3 where Spark does not apply it. Spark rolls back the consumers of a recomputed map "
        "stage only when it knows the stage is indeterminate (and, for DataFrame shuffles, when its own "
        "order-independent row checksum differs). When a recomputed map output differs in content from the "
        "output it replaced although Spark labels the stage deterministic (random keys, a time-dependent "
        "function), every shuffle computed from the old output, transitively, is unregistered so Spark "
        "recomputes it from the new data, and a running action whose result stage already read the old output "
        "is cancelled with a `region-recovery: changed-output:` reason (`rr.run` restarts it) instead of "
        "returning a result built from both versions. Decided in the driver JVM before the recomputed output "
        "registers: each map task asks the driver once its output is committed (one round trip per map task). "
        "Compared: Spark's per-partition checksums for DETERMINATE stages; only the record count for UNORDERED "
        "stages, whose bytes legitimately change with the order rows arrive in (a change that keeps the count is "
        "not detected there). `false` turns the guard off, on both sides."
    ),
    read_by="both",
    section=_FAILOVER,
)
CONNECT_ADMIN_OPERATIONS = boolean(
    PREFIX + "connect.admin-operations.enabled",
    False,
    (
        "Whether a Spark Connect client may change the retention policy (`rr.retention_policy`: avoided hosts, "
        "preferred and avoided adopters, release policy, byte cap) and exclude shuffles from retention. Both act "
        "on every session of the server's application, not only the caller's, so they are off by default: turn "
        "them on for a server whose clients are one team. A refused call names this key."
    ),
    read_by="jvm",
    section=_PLUGIN,
)
EVENT_BUFFER_CAPACITY = integer(
    PREFIX + "event-buffer.capacity",
    100_000,
    (
        "Events the driver keeps for the Python controller between two drains (about 100 bytes each). When it "
        "is full, new events are dropped and counted; the count reaches Python with every batch and is logged "
        "as an error, never silently."
    ),
    minimum=1,
    read_by="jvm",
    section=_PLUGIN,
)
RETAINED_ENABLED = choice(
    PREFIX + "retained.enabled",
    "false",
    {"true": "true", "false": "false", "auto": "auto"},
    "true, false, auto",
    (
        "When `true`, the shuffle IO hook hard-links every committed map output (data, index, checksum) into "
        "the retained directory of its executor, and the driver's shuffle component reports reliable storage, "
        "so Spark no longer unregisters a lost executor's outputs itself. When an executor is lost, a live "
        "executor on the same host verifies each output against the digest of Spark's per-partition checksums "
        "and lengths reported at commit, adopts it, and Spark's map output tracker is pointed at it if the "
        "output is still registered there unchanged: those map tasks are not re-run. Outputs that cannot be "
        "adopted (no live executor on the host, missing, corrupt or foreign files, an INDETERMINATE stage or "
        "a shuffle with a checksum mismatch) are unregistered at once, so Spark recomputes exactly those. A "
        "heartbeat timeout is not trusted: that executor's outputs are unregistered and its retained files "
        "deleted. The application fails to start with `true` and `spark.shuffle.checksum.enabled=false`, "
        "`spark.shuffle.useOldFetchProtocol=true`, `spark.shuffle.service.enabled=true`, "
        "`spark.shuffle.push.enabled=true`, a `spark.shuffle.manager` other than sort, or a "
        "`spark.shuffle.sort.io.plugin.class` other than the plugin's. `auto` is what "
        "`region_recovery.configure()` sets when the key is not set: outputs are retained by hard link only "
        "(no extra bytes while Spark keeps its own file, never a copy), and retention stays off, with an INFO "
        "line saying why, under the settings `true` refuses, under `spark.dynamicAllocation.enabled=true`, "
        "in local mode, and on an executor whose retained directory is on another filesystem than its "
        "`spark.local.dir`. "
        "`false` (the key's default, for the plugin enabled without `configure()`) changes nothing in how "
        "Spark handles executor loss."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_DIR = register(
    ConfigKey(
        PREFIX + "retained.dir",
        "",
        parse_path,
        "an absolute path",
        (
            "Root of the retained directories on every host, `<dir>/<appId>.<incarnation>/<executorId>/` (the "
            "incarnation is a random token per driver, so files an earlier driver or application attempt with "
            "the same application id left behind never match), created owner-only "
            "(0700). Put it on the filesystem of `spark.local.dir`: retaining is then a hard link (no extra "
            "bytes, no copy); elsewhere each output is copied (0600). The plugin deletes only below this root."
        ),
        "<java.io.tmpdir>/spark-region-recovery-retained-<user>",
        type="path",
        read_by="jvm",
        section=_RETAINED,
    )
)
RETAINED_MAX_BYTES = size(
    PREFIX + "retained.max-bytes",
    "0",
    (
        "Cap on retained bytes per node (the executor's host unless `retained.node-env` names a node). Past it, "
        "the driver releases the least recently used outputs of shuffles that no running job or SQL execution "
        "uses: they are unregistered (Spark recomputes them if "
        "a later action needs them: correct, only slower) and the owning executor deletes their retained and "
        "served files. Outputs of shuffles in use are never released, so one running shuffle larger than the "
        'cap exceeds it; `rr.retained_ledger()["over_cap"]` counts those moments.'
    ),
    accepted_extra="; 0 = no cap",
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_RELEASE = choice(
    PREFIX + "retained.release",
    "shuffle-cleanup",
    _RELEASE_POLICIES,
    "shuffle-cleanup, job-end, consumers-finished",
    (
        "When outputs are released before the application ends. `shuffle-cleanup`: when Spark's "
        "ContextCleaner removes the shuffle (Spark's own lifetime). `job-end`: when the action that used the "
        "shuffle succeeds, that is when its SQL execution ends (a DataFrame action, all its adaptive jobs) "
        "or, for RDD actions, its job; a failed action keeps its outputs, which a region restart reuses. "
        "`consumers-finished`: as in Flink, once every stage that reads the shuffle has finished (a later "
        "action that reads it again recomputes it)."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_LEASE_TIMEOUT = duration(
    PREFIX + "retained.lease-timeout",
    "120s",
    (
        "The safety nets that do not depend on Python. Each executor renews its application's lease "
        "(`<dir>/<appId>.<incarnation>.lease`) every quarter of this while the driver answers. An executor "
        "whose driver has not answered for this long deletes the application's retained files on its host "
        "(unless another executor of the application there still reaches the driver: then it alone is cut off); "
        "an executor that stops while its driver does not answer (driver exit, lost connection) deletes them "
        "at once; and every executor removes the directories of other applications whose lease it has seen "
        "unchanged for this long, or for the longer timeout their lease states (a crashed driver, or an earlier "
        "driver of the same application id), "
        "when it starts and on every renewal. Both are timed on the monotonic clock: a wall clock's jump "
        "neither expires a live lease nor keeps a dead one."
    ),
    minimum_ms=1000,
    read_by="jvm",
    section=_RETAINED,
)

RETAINED_NODE_ENV = register(
    ConfigKey(
        PREFIX + "retained.node-env",
        "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME",
        parse_env_name,
        "an environment variable's name; empty = always the host",
        (
            "The environment variable in which an executor finds the name of its node: a live executor on the "
            "lost executor's node adopts its outputs, and leases, fences and cleanup work per node. Unset or "
            "empty in the executor's environment: the node is the executor's host. On Kubernetes every executor "
            "pod is its own host; a pod template sets this variable from the downward API (`spec.nodeName`), and "
            "the node's executor pods share a `hostPath` volume holding both `spark.local.dir` and `retained.dir` "
            "(docs/kubernetes.md)."
        ),
        "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME",
        type="env-name",
        read_by="jvm",
        section=_RETAINED,
    )
)
RETAINED_REATTACH_TIMEOUT = duration(
    PREFIX + "retained.reattach-timeout",
    "0 ms",
    (
        "How long a lost executor's outputs stay registered when no live executor is on its node, waiting for "
        "a new executor that mounts its volume (Spark's persistent volume claim reuse on Kubernetes): that "
        "executor finds the lost one's retained files, verifies them and the outputs are registered at it, so "
        "no map task re-runs. Past the timeout they are unregistered and recomputed. Tasks that fetch from the "
        "lost executor during the wait wait too (their fetches are held, with retained.redirect-fetches): a "
        "timeout longer than a replacement takes to start delays a job whose replacement never comes by that much. "
        "With 0 the outputs wait only while an executor Spark already registered on that node has not said hello "
        "yet, up to 5 s."
    ),
    accepted_extra="; 0 = off",
    shown_default="0",
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_EARLY_LOSS_DETECTION = boolean(
    PREFIX + "retained.early-loss-detection",
    True,
    (
        "Handle an executor's loss as soon as its connection to the driver closes and another executor on its "
        "node takes its liveness lock (a lock the kernel releases only when the process is gone): its outputs "
        "are adopted, then Spark is told to remove it. Spark's own report comes later (seconds on standalone and "
        "Kubernetes), and a reducer that reached the dead executor before it retries only after "
        "spark.shuffle.io.retryWait. An executor whose lock is still held is left to Spark. false: act on "
        "Spark's report only."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_REDIRECT_FETCHES = boolean(
    PREFIX + "retained.redirect-fetches",
    True,
    (
        "Send a reducer's fetch that waits on a lost executor to the executor that adopted its outputs as soon "
        "as the driver relocated them. Without it, a fetch in flight when the executor died waits "
        "spark.shuffle.io.retryWait, retries the dead address and fails, and its stage runs again. Each executor "
        "wraps its block manager's block store client to do this (off beside the external shuffle service); it "
        "also holds fetches from a lost executor while the driver waits for its volume (retained.reattach-timeout). "
        "A broadcast piece or cached block in flight from the lost executor fails as soon as the loss is handled, "
        "and its next location serves it (Spark would wait spark.shuffle.io.retryWait first). "
        "false: leave fetches to Spark."
    ),
    read_by="jvm",
    section=_RETAINED,
)
RETAINED_PREPARE_ADOPTION = boolean(
    PREFIX + "retained.prepare-adoption",
    True,
    (
        "Prepare each executor's retained outputs at the executor on its node that would adopt them, while "
        "nothing is wrong: shortly after each commit that executor checks them (index, lengths, commit digest) and "
        "hard-links them into its block manager's directories, so that when the executor is lost only the "
        "relocation is left: the driver points reducers at them before it asks that executor to confirm the "
        "adoption. Outputs an executor adopted are prepared in turn, and what a lost standby had prepared is "
        "prepared again at another executor of the node or at the next one to join it. Hard links only (no bytes are "
        "copied); only where Spark's reader detects a corrupt "
        "block (compressed LZ4 shuffle blocks, spark.shuffle.detectCorrupt). false: the adopter checks and links "
        "the outputs after the loss."
    ),
    read_by="jvm",
    section=_RETAINED,
)
LOCAL_DISK_SHUFFLE_IO = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"
KUBERNETES_SHUFFLE_IO = "org.apache.spark.shuffle.KubernetesLocalDiskShuffleDataIO"
SHUFFLE_IO_DELEGATE = choice(
    PREFIX + "shuffle-io.delegate",
    LOCAL_DISK_SHUFFLE_IO,
    {
        LOCAL_DISK_SHUFFLE_IO.lower(): LOCAL_DISK_SHUFFLE_IO,
        "local-disk": LOCAL_DISK_SHUFFLE_IO,
        KUBERNETES_SHUFFLE_IO.lower(): KUBERNETES_SHUFFLE_IO,
        "kubernetes-local-disk": KUBERNETES_SHUFFLE_IO,
    },
    f"{LOCAL_DISK_SHUFFLE_IO} (local-disk), {KUBERNETES_SHUFFLE_IO} (kubernetes-local-disk)",
    (
        "The shuffle IO that `io.regionrecovery.spark.RegionRecoveryShuffleDataIO` wraps (both write the same "
        "local-disk files). KubernetesLocalDiskShuffleDataIO adds Spark's own recovery of shuffle files from a "
        "reused persistent volume claim, beside the plugin's (docs/kubernetes.md says what each covers)."
    ),
    read_by="jvm",
    section=_RETAINED,
)

_JOB_RECOVERY = "Batch job recovery after a driver crash"
_JR = PREFIX + "job-recovery."

JOB_RECOVERY_ENABLED = boolean(
    _JR + "enabled",
    False,
    (
        "Batch job recovery after a driver crash (Flink's `execution.batch.job-recovery.enabled`): the driver "
        "records every materialized DataFrame shuffle in the job's event store, a lost driver's retained files "
        "are kept for `job-recovery.window`, and a resubmission with the same `job-recovery.job-id` reuses the "
        "shuffles whose plan, input files and settings are the same instead of recomputing them. Needs "
        "`retained.enabled=true` and a `job-recovery.job-id`. See docs/internals/job-recovery.md."
    ),
    read_by="both",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_JOB_ID = register(
    ConfigKey(
        _JR + "job-id",
        "",
        parse_job_id,
        "1 to 128 letters, digits, '.', '_' or '-'",
        (
            "The job's identity across applications, declared by the user; the resubmission uses the same one. "
            "A second live driver with the same job id is refused."
        ),
        "(none)",
        type="job-id",
        read_by="both",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_CODE_VERSION = register(
    ConfigKey(
        _JR + "code-version",
        "",
        parse_job_id,
        "1 to 128 letters, digits, '.', '_' or '-'",
        (
            "A version of the job's code that the user declares (a release, a commit): part of every shuffle's "
            "identity, so a resubmission with another value recomputes every shuffle. For changes the identity "
            "cannot see: code the executors load that the driver does not (libraries upgraded on the executors "
            "only), data a function reads from elsewhere than its input files, a module whose source is unchanged "
            "but whose values are computed when it is imported."
        ),
        "(none)",
        type="job-id",
        read_by="jvm",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_INPUT_DIGEST = choice(
    _JR + "input-digest",
    "metadata",
    {"metadata": "metadata", "content": "content"},
    "metadata, content (any case)",
    (
        "How a shuffle's input files are identified across applications. `metadata`: path, length and "
        "modification time, with the ETag and version id where the object store's listing gives them (S3A, "
        "ABFS). `content`: also a digest of every file's bytes, the file system's checksum where it gives one "
        "(HDFS) and otherwise SHA-256 read by the driver once per file and driver; a file rewritten with the "
        "same length within the same modification time (a coarse clock, a copy that keeps times) is then "
        "seen. See docs/internals/job-recovery.md."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_IGNORED_CODE = register(
    ConfigKey(
        _JR + "ignored-code",
        [],
        parse_setting_names,
        "distribution, module or shipped file names, or prefixes ending in '*', comma-separated",
        (
            "Python code the user declares cannot change a result of this job, left out of every Python "
            "function's identity: an installed distribution (by name), a module (by name, or a prefix ending in "
            "'*'), or a file shipped to the executors (by file name). By default every installed distribution, "
            "every module the driver loaded or a function imports and every shipped file counts. A refusal's "
            "detail names what differed."
        ),
        "(none)",
        type="setting-names",
        read_by="python",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_IGNORED_SETTINGS = register(
    ConfigKey(
        _JR + "ignored-settings",
        [],
        parse_setting_names,
        "setting names or prefixes ending in '*', comma-separated",
        (
            "Settings the user declares cannot change a result of this job, left out of every shuffle's identity "
            "on top of the built-in list: for a deployment that puts a per-run value in a setting that counts (a "
            "temporary path in `spark.files`, a run id in a setting of its own). A refusal's detail names the "
            "setting that differed."
        ),
        "(none)",
        type="setting-names",
        read_by="jvm",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_DIR = register(
    ConfigKey(
        _JR + "dir",
        "",
        parse_uri,
        "a Hadoop FileSystem URI or an absolute path",
        (
            "Where the job event store lives: `<dir>/<job-id>/segment-*`, one segment per application, appended, "
            "never rewritten (on an object store, one object per flush). A local path (the default) is refused in "
            "cluster deploy mode, where the next driver may run on another host. A file system on which two drivers "
            "could both take the job (other than a local one, HDFS, or S3A with its conditional writes) turns job "
            "recovery off at start, with the reason in the log and the report."
        ),
        "<java.io.tmpdir>/spark-region-recovery-jobs-<user>",
        type="uri",
        read_by="both",
        section=_JOB_RECOVERY,
    )
)
JOB_RECOVERY_WORKER_TIMEOUT = duration(
    _JR + "previous-worker.recovery.timeout",
    "30 s",
    (
        "How long the new driver waits, from its start, for executors on the hosts that hold a recorded "
        "shuffle's files (FLIP-383's name). Outputs on hosts with no executor by then are recomputed."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_LEASE_TIMEOUT = duration(
    _JR + "lease-timeout",
    "30 s",
    (
        "Where `job-recovery.dir` is not local (HDFS, S3A), the job's lock is a lease its driver renews every "
        "tenth of this (at most once per `job-event.store.write-buffer.flush-interval`, which sets a floor of 10 "
        "of them). A new driver that finds a lease watches it this long on its own monotonic clock: renewed "
        "meanwhile, it is refused; unchanged, it takes the job, so a resubmission after a crash starts this late "
        "(the time written in the lease, another host's clock, is never trusted). A driver paused longer than "
        "this (GC, a frozen host) loses the job, stops recording and deletes nothing of it."
    ),
    minimum_ms=1000,
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_RECOVERY_WINDOW = duration(
    _JR + "window",
    "30 min",
    (
        "How long a lost driver's retained files are kept for a resubmission (instead of being deleted at "
        "once), skipped by other applications' sweeps until then. 30 min covers a scheduler's retry (Airflow "
        "waits 5 min by default) or an operator's rerun, and bounds the disk a job that is never resubmitted "
        "holds."
    ),
    minimum_ms=1000,
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_EVENT_WRITE_BUFFER_SIZE = size(
    PREFIX + "job-event.store.write-buffer.size",
    "1m",
    (
        "Bytes of events the driver buffers before it writes them to the job event store (FLIP-383's "
        "`job-event.store.write-buffer.size`). A materialized shuffle is written at once in any case."
    ),
    read_by="jvm",
    section=_JOB_RECOVERY,
)
JOB_EVENT_FLUSH_INTERVAL = duration(
    PREFIX + "job-event.store.write-buffer.flush-interval",
    "1 s",
    (
        "How often buffered events are flushed to the job event store (FLIP-383's "
        "`job-event.store.write-buffer.flush-interval`)."
    ),
    minimum_ms=1,
    read_by="jvm",
    section=_JOB_RECOVERY,
)

_STREAMING = "Streaming: batch sizing during recovery and backlog"
_CP = PREFIX + "execution.checkpointing."

CHECKPOINTING_INTERVAL = duration(
    _CP + "interval",
    "0 ms",
    (
        "The commit interval of a streaming query that is not behind (Flink's `execution.checkpointing.interval`): "
        "set the query's trigger to processingTime of this interval. With it set, `execution.checkpointing."
        "interval-during-backlog` must be 0 or at least this long."
    ),
    accepted_extra="; 0 = none",
    shown_default="0",
    read_by="jvm",
    section=_STREAMING,
)
CHECKPOINTING_INTERVAL_DURING_BACKLOG = register(
    ConfigKey(
        _CP + "interval-during-backlog",
        -1,  # unset: execution.checkpointing.interval, else 30 s (read by the source)
        parse_duration_ms,
        DURATION_FORMS + "; 0 = no bound during backlog",
        (
            "While a region-recovery source is behind (FLIP-309's isProcessingBacklog), each batch is sized from "
            "the measured throughput to take about this long, and no batch, fresh ones included, takes more than "
            "this size times `streaming.recovery.ramp-factor`; 0 means backlog batches take all available data (up "
            "to `streaming.max-batch`). Unset: `execution.checkpointing.interval`, else 30 s."
        ),
        "execution.checkpointing.interval, else 30 s",
        type="duration",
        read_by="jvm",
        section=_STREAMING,
    )
)
CHECKPOINTING_DURING_RECOVERY = boolean(
    _CP + "during-recovery.enabled",
    True,
    (
        "Commit during recovery (FLINK-35761's switch): from the first batch a region-recovery source plans after "
        "a start or restart, batches start at `streaming.recovery.initial-batch` and grow by "
        "`streaming.recovery.ramp-factor` while the source is behind, so a failure during catch-up loses at most "
        "one bounded batch. On by default: using the source is the opt-in (Flink's switch, off by default, "
        "applies to every job). Off: the first batch takes all available data (up to `streaming.max-batch`), as "
        "plain Spark does."
    ),
    read_by="jvm",
    section=_STREAMING,
)
STREAMING_INITIAL_BATCH = integer(
    PREFIX + "streaming.recovery.initial-batch",
    10,
    ("Size of the first batch during recovery, in the source's unit: files for the file sources, records for Kafka."),
    minimum=1,
    read_by="jvm",
    section=_STREAMING,
)
STREAMING_RAMP_FACTOR = register(
    ConfigKey(
        PREFIX + "streaming.recovery.ramp-factor",
        2.0,
        parse_multiplier,
        "a number > 1",
        (
            "Each batch during recovery, and each change of size during backlog, is at most this factor larger "
            "than the one before."
        ),
        "2.0",
        type="double",
        read_by="jvm",
        section=_STREAMING,
    )
)
STREAMING_MAX_BATCH = register(
    ConfigKey(
        PREFIX + "streaming.max-batch",
        None,
        parse_attempts_or_unlimited,
        "an integer >= 1, or infinite / unlimited",
        (
            "No batch of a region-recovery source admits more than this, in the source's unit (files or records). "
            "The query's own maxFilesPerTrigger / maxOffsetsPerTrigger is never raised by it: the smaller one caps."
        ),
        "unlimited",
        type="int-or-unlimited",
        minimum=1,
        read_by="jvm",
        section=_STREAMING,
    )
)
STREAMING_LAG_THRESHOLD = duration(
    PREFIX + "streaming.backlog.lag-threshold",
    "0 ms",
    (
        "A file source is also behind when the newest file of its last batch is older than this (modification "
        "time); 0: behind only when the last batch hit its limit."
    ),
    accepted_extra="; 0 = off",
    shown_default="0",
    read_by="jvm",
    section=_STREAMING,
)


def check_streaming_intervals(conf: Mapping[str, Any]) -> None:
    """Flink's rule: `interval-during-backlog` is 0 or at least `interval` (when both are set)."""
    interval = CHECKPOINTING_INTERVAL.read(conf)
    backlog = CHECKPOINTING_INTERVAL_DURING_BACKLOG.read(conf)
    if interval > 0 and backlog not in (-1, 0) and backlog < interval:
        raise ConfigError(
            f"{CHECKPOINTING_INTERVAL_DURING_BACKLOG.name} ({backlog} ms) must be 0 or at least "
            f"{CHECKPOINTING_INTERVAL.name} ({interval} ms), as in Flink.",
            key=CHECKPOINTING_INTERVAL_DURING_BACKLOG.name,
            value=conf.get(CHECKPOINTING_INTERVAL_DURING_BACKLOG.name),
        )


# The project's own keys follow one rule since 0.1: Flink's (lowercase words joined by hyphens, in
# dot-separated groups). The camel-case spellings they had before are still read, with a warning.
EVENT_BUFFER_CAPACITY = renamed(EVENT_BUFFER_CAPACITY, PREFIX + "eventBuffer.capacity")
RETAINED_MAX_BYTES = renamed(RETAINED_MAX_BYTES, PREFIX + "retained.maxBytes")
RETAINED_LEASE_TIMEOUT = renamed(RETAINED_LEASE_TIMEOUT, PREFIX + "retained.leaseTimeout")
RETAINED_NODE_ENV = renamed(RETAINED_NODE_ENV, PREFIX + "retained.nodeEnv")
RETAINED_REATTACH_TIMEOUT = renamed(RETAINED_REATTACH_TIMEOUT, PREFIX + "retained.reattachTimeout")
RETAINED_EARLY_LOSS_DETECTION = renamed(RETAINED_EARLY_LOSS_DETECTION, PREFIX + "retained.earlyLossDetection")
RETAINED_REDIRECT_FETCHES = renamed(RETAINED_REDIRECT_FETCHES, PREFIX + "retained.redirectFetches")
SHUFFLE_IO_DELEGATE = renamed(SHUFFLE_IO_DELEGATE, PREFIX + "shuffleIo.delegate")

register_namespace(PREFIX + "retained")
register_namespace(PREFIX + "shuffle-io")
register_namespace(PREFIX + "restart-strategy")
register_namespace(PREFIX + "failover")
register_namespace(PREFIX + "event-buffer")
register_namespace(PREFIX + "job-recovery")
register_namespace(PREFIX + "job-event")
register_namespace(PREFIX + "execution.checkpointing")
register_namespace(PREFIX + "streaming")
