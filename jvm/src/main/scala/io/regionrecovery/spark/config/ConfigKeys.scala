package io.regionrecovery.spark.config

import java.util.Locale

import io.regionrecovery.spark.config.ConfigType._

/**
 * Every `spark.regionRecovery.*` key, declared once for the JVM side. The Python side declares the
 * same keys (python/region_recovery/config.py); the texts here are copied from there, so that both
 * document a key alike, and ConfigContract prints these declarations for the test that compares.
 * Restart-strategy keys keep Flink's names, values and defaults after the prefix.
 */
object ConfigKeys {
  val Prefix = "spark.regionRecovery."
  private val RS = Prefix + "restart-strategy."

  val DurationForms: String =
    "a whole number with a unit ms, s, min, h or d (e.g. '10 s', '1min', '500ms'); a bare number means milliseconds"
  val BytesForms: String =
    "a whole number with a binary unit b, k/kb/KiB, m/mb/MiB, g/gb/GiB, t/tb/TiB or p/pb/PiB, any case " +
      "(e.g. '64m', '1g', '512 MiB'); a bare number means bytes"

  val LocalDiskShuffleIo = "org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO"
  val KubernetesShuffleIo = "org.apache.spark.shuffle.KubernetesLocalDiskShuffleDataIO"

  private def aliases(groups: (String, Seq[String])*): Seq[(String, String)] =
    groups.flatMap { case (canonical, names) => names.map(_ -> canonical) }

  // ---- restart strategy and failover (read by the Python controller) -----------------------------

  val RestartStrategyType: ConfigKey[String] = ConfigKey(RS + "type",
    ChoiceType(aliases("none" -> Seq("none", "off", "disable"), "fixed-delay" -> Seq("fixed-delay", "fixeddelay"),
      "failure-rate" -> Seq("failure-rate", "failurerate"),
      "exponential-delay" -> Seq("exponential-delay", "exponentialdelay"))),
    "none", "unset: exponential-delay under rr.run and rr.stream",
    "none, off, disable; fixed-delay, fixeddelay; failure-rate, failurerate; " +
      "exponential-delay, exponentialdelay (any case)",
    "Which restart strategy to use. Unset, rr.run restarts under exponential-delay with at most 3 restarts in a " +
      "row (attempts-before-reset-backoff 3 unless set: never unbounded) and rr.stream under exponential-delay, " +
      "Flink's default once a job can restart; none turns restarts off. The deprecated Flink key " +
      "spark.regionRecovery.restart-strategy is read too; .type wins, and a bad value under either is an error.",
    ReadBy.Python, deprecatedNames = Seq(Prefix + "restart-strategy"))

  val FixedDelayAttempts: ConfigKey[Int] = ConfigKey(RS + "fixed-delay.attempts", IntType(Some(0L)), 1, "1",
    "an integer >= 0", "Restarts allowed before the job is declared failed (fixed-delay).", ReadBy.Python)

  val FixedDelayDelay: ConfigKey[Long] = ConfigKey(RS + "fixed-delay.delay", DurationType(None), 1000L, "1 s",
    DurationForms, "Delay between two consecutive restart attempts (fixed-delay).", ReadBy.Python)

  val FailureRateMaxFailures: ConfigKey[Int] = ConfigKey(RS + "failure-rate.max-failures-per-interval",
    IntType(Some(1L)), 1, "1", "an integer >= 1",
    "Restarts allowed within one failure-rate interval before the job is declared failed.", ReadBy.Python)

  val FailureRateInterval: ConfigKey[Long] = ConfigKey(RS + "failure-rate.failure-rate-interval",
    DurationType(Some(1L)), 60000L, "1 min", DurationForms + "; at least 1 ms",
    "Sliding time window in which failures are counted (failure-rate).", ReadBy.Python)

  val FailureRateDelay: ConfigKey[Long] = ConfigKey(RS + "failure-rate.delay", DurationType(None), 1000L, "1 s",
    DurationForms, "Delay between two consecutive restart attempts (failure-rate).", ReadBy.Python)

  val ExponentialInitialBackoff: ConfigKey[Long] = ConfigKey(RS + "exponential-delay.initial-backoff",
    DurationType(Some(1L)), 1000L, "1 s", DurationForms + "; at least 1 ms",
    "Backoff before the first restart after a reset (exponential-delay).", ReadBy.Python)

  val ExponentialMaxBackoff: ConfigKey[Long] = ConfigKey(RS + "exponential-delay.max-backoff",
    DurationType(Some(1L)), 60000L, "1 min", DurationForms + "; at least 1 ms and not below initial-backoff",
    "Highest backoff between restarts (exponential-delay).", ReadBy.Python)

  val ExponentialMultiplier: ConfigKey[Double] = ConfigKey(RS + "exponential-delay.backoff-multiplier",
    DoubleType(v => if (v <= 1) Some("must be greater than 1") else None), 1.5, "1.5", "a number > 1",
    "Factor applied to the backoff after every counted restart attempt (exponential-delay).", ReadBy.Python)

  val ExponentialResetThreshold: ConfigKey[Long] = ConfigKey(RS + "exponential-delay.reset-backoff-threshold",
    DurationType(Some(1L)), 3600000L, "1 h", DurationForms + "; at least 1 ms",
    "A failure this long after the previously scheduled restart resets the backoff and the attempt count " +
      "(exponential-delay).", ReadBy.Python)

  val ExponentialJitter: ConfigKey[Double] = ConfigKey(RS + "exponential-delay.jitter-factor",
    DoubleType(v => if (v < 0 || v > 1) Some("must be between 0 and 1") else None), 0.1, "0.1",
    "a number between 0 and 1",
    "Random offset of up to this fraction of the backoff, added or subtracted (exponential-delay).", ReadBy.Python)

  val ExponentialAttempts: ConfigKey[Option[Int]] = ConfigKey(RS + "exponential-delay.attempts-before-reset-backoff",
    IntOrUnlimitedType, None, "unlimited", "an integer >= 1, or infinite / unlimited",
    "Restart attempts allowed until the backoff is reset (exponential-delay).", ReadBy.Python)

  val FailoverStrategy: ConfigKey[String] = ConfigKey(Prefix + "failover-strategy",
    ChoiceType(Seq("region" -> "region", "full" -> "full")), "region", "region", "region, full (any case)",
    "Which tasks a task failure restarts: its pipelined region and the regions Flink's rules pull in (region), " +
      "or every task of the job (full).", ReadBy.Python)

  val SkipDeterministicConsumers: ConfigKey[Boolean] = ConfigKey(Prefix + "failover.skip-deterministic-consumers",
    BooleanType, false, "false", "true, false",
    "Beyond Flink: do not restart consumers of a restarted deterministic producer's re-readable output, because " +
      "the rerun writes identical data. false keeps Flink's behaviour.", ReadBy.Python)

  val RestartConsumersOfChangedOutputs: ConfigKey[Boolean] = ConfigKey(
    Prefix + "failover.restart-consumers-of-changed-outputs", BooleanType, true, "true", "true, false",
    "Flink's rule 3 where Spark does not apply it: when a recomputed map output differs in content from the one it " +
      "replaces although Spark labels its stage deterministic, every shuffle computed from the old output, " +
      "transitively, is unregistered so that Spark recomputes it, and a running action whose result stage already " +
      "read the old output is cancelled (rr.run restarts it). Decided in the driver JVM before the recomputed " +
      "output registers: each map task asks the driver once its output is committed.", ReadBy.Both)

  // ---- the plugin (read by the JVM on the driver and the executors) ----------------------------------

  val ConnectAdminOperations: ConfigKey[Boolean] = ConfigKey(Prefix + "connect.admin-operations.enabled",
    BooleanType, false, "false", "true, false",
    "Whether a Spark Connect client may change the retention policy (rr.retention_policy: avoided hosts, " +
      "preferred and avoided adopters, release policy, byte cap) and exclude shuffles from retention. Both act " +
      "on every session of the server's application, not only the caller's, so they are off by default: turn " +
      "them on for a server whose clients are one team. A refused call names this key.", ReadBy.Jvm)

  val EventBufferCapacity: ConfigKey[Int] = ConfigKey(Prefix + "event-buffer.capacity", IntType(Some(1L)),
    100000, "100000", "an integer >= 1",
    "Events the driver JVM buffers for the Python controller between two drains. When the buffer is full, " +
      "further events are dropped and counted, and the controller reports its model as incomplete.",
    ReadBy.Jvm, deprecatedNames = Seq(Prefix + "eventBuffer.capacity"))

  val RetainedEnabled: ConfigKey[String] = ConfigKey(Prefix + "retained.enabled",
    ChoiceType(Seq("true", "false", "auto").map(n => n -> n)), "false", "false", "true, false, auto",
    "Keep every committed map output in a retained directory that survives the executor process, and let a live " +
      "executor on the same host adopt a lost executor's outputs instead of Spark recomputing them. Read by the " +
      "plugin (JVM) on the driver and the executors. With true, the application fails to start with Spark's shuffle " +
      "checksums off, the old fetch protocol, the external shuffle service, push-based shuffle, another shuffle " +
      "manager or another shuffle IO plugin (RetentionPreconditions). With auto (what region_recovery.configure() " +
      "sets), outputs are retained by hard link only, and retention stays off, saying why, under those settings, " +
      "under dynamic allocation, in local mode, and on an executor whose retained directory is on another filesystem than its " +
      "spark.local.dir.", ReadBy.Jvm)

  val RetainedDir: ConfigKey[String] = ConfigKey(Prefix + "retained.dir", PathType, "",
    "<java.io.tmpdir>/spark-region-recovery-retained-<user>", "an absolute path",
    "Root of the retained directories on every host: <dir>/<appId>.<incarnation>/<executorId>/ (a random token " +
      "per driver, so an earlier driver's files with the same application id never match), owner-only. Should be " +
      "on the filesystem of spark.local.dir, so retaining is a hard link, not a copy.", ReadBy.Jvm)

  val RetainedMaxBytes: ConfigKey[Long] = ConfigKey(Prefix + "retained.max-bytes", BytesType, 0L, "0",
    BytesForms + "; 0 = no cap",
    "Cap on retained bytes per node (the executor's host unless retained.node-env names a node). Past it, the driver releases the least recently used outputs of shuffles no " +
      "running job or SQL execution uses: unregistered (Spark recomputes them if they are needed again: correct, " +
      "only slower), their retained and served files deleted. Outputs of shuffles in use are never released, so " +
      "a single running shuffle larger than the cap exceeds it (counted as overCap in rr.retained_ledger()).",
    ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.maxBytes"))

  val RetainedRelease: ConfigKey[String] = ConfigKey(Prefix + "retained.release",
    ChoiceType(Seq("shuffle-cleanup", "job-end", "consumers-finished").map(n => n -> n)),
    "shuffle-cleanup", "shuffle-cleanup", "shuffle-cleanup, job-end, consumers-finished",
    "When retained outputs are released before the application ends: when Spark's ContextCleaner removes the " +
      "shuffle (shuffle-cleanup, Spark's own lifetime); when the action that used it succeeds, i.e. its SQL " +
      "execution or, for RDD actions, its job ends (job-end; a failed action keeps its outputs for the restart); " +
      "or as in Flink, once every stage that reads the shuffle has finished (consumers-finished). Released " +
      "outputs are unregistered and their files deleted; a later action that needs them recomputes them.",
    ReadBy.Jvm)

  val RetainedLeaseTimeout: ConfigKey[Long] = ConfigKey(Prefix + "retained.lease-timeout", DurationType(Some(1000L)),
    120000L, "120s", DurationForms + "; at least 1 s",
    "Executors renew their application's lease on its retained directory while the driver answers. An executor " +
      "whose driver has not answered for this long deletes the application's retained files on its host (unless " +
      "another executor of the application there still reaches the driver), and any " +
      "executor removes the directories of other applications whose lease it has seen unchanged for this long, or " +
      "for the longer timeout their lease states (a driver that crashed), timed on its monotonic clock. An executor that stops while its driver does not answer " +
      "deletes them at once.", ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.leaseTimeout"))

  val RetainedNodeEnv: ConfigKey[String] = ConfigKey(Prefix + "retained.node-env", EnvNameType,
    "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME", "SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME",
    "an environment variable's name; empty = always the host",
    "The environment variable in which an executor finds the name of its node: a live executor on the lost " +
      "executor's node adopts its outputs, and leases, fences and cleanup work per node. Unset or empty in the " +
      "executor's environment: the node is the executor's host. On Kubernetes every executor pod is its own " +
      "host; a pod template sets this variable from the downward API (spec.nodeName), and the node's executor " +
      "pods share a hostPath volume holding both spark.local.dir and retained.dir (docs/kubernetes.md).",
    ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.nodeEnv"))

  val RetainedReattachTimeout: ConfigKey[Long] = ConfigKey(Prefix + "retained.reattach-timeout", DurationType(None),
    0L, "0", DurationForms + "; 0 = off",
    "How long a lost executor's outputs stay registered when no live executor is on its node, waiting for a new " +
      "executor that mounts its volume (Spark's persistent volume claim reuse on Kubernetes): that executor finds " +
      "the lost one's retained files, verifies them and the outputs are registered at it, so no map task re-runs. " +
      "Past the timeout they are unregistered and recomputed. Tasks that fetch from the lost executor during the " +
      "wait wait too (their fetches are held, with retained.redirect-fetches): a timeout longer than a " +
      "replacement takes to start delays a job whose replacement never comes by that much. With 0 the outputs " +
      "wait only while an executor Spark already registered on that node has not said hello yet, up to 5 s.",
    ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.reattachTimeout"))

  val RetainedEarlyLoss: ConfigKey[Boolean] = ConfigKey(Prefix + "retained.early-loss-detection", BooleanType, true,
    "true", "true, false",
    "Handle an executor's loss as soon as its connection to the driver closes and another executor on its node " +
      "takes its liveness lock (a lock the kernel releases only when the process is gone): its outputs are " +
      "adopted, then Spark is told to remove it. Spark's own report comes later (seconds on standalone and " +
      "Kubernetes), and a reducer that reached the dead executor before it retries only after " +
      "spark.shuffle.io.retryWait. An executor whose lock is still held is left to Spark. false: act on Spark's " +
      "report only.", ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.earlyLossDetection"))

  val RetainedRedirectFetches: ConfigKey[Boolean] = ConfigKey(Prefix + "retained.redirect-fetches", BooleanType,
    true, "true", "true, false",
    "Send a reducer's fetch that waits on a lost executor to the executor that adopted its outputs as soon as " +
      "the driver relocated them. Without it, a fetch in flight when the executor died waits " +
      "spark.shuffle.io.retryWait, retries the dead address and fails, and its stage runs again. Each executor " +
      "wraps its block manager's block store client to do this (off beside the external shuffle service); it " +
      "also holds fetches from a lost executor while the driver waits for its volume (retained.reattach-timeout). " +
      "A broadcast piece or cached block in flight from the lost executor fails as soon as the loss is handled, " +
      "and its next location serves it (Spark would wait spark.shuffle.io.retryWait first). " +
      "false: leave fetches to Spark.", ReadBy.Jvm, deprecatedNames = Seq(Prefix + "retained.redirectFetches"))

  val RetainedPrepareAdoption: ConfigKey[Boolean] = ConfigKey(Prefix + "retained.prepare-adoption", BooleanType,
    true, "true", "true, false",
    "Prepare each executor's retained outputs at the executor on its node that would adopt them, while nothing " +
      "is wrong: shortly after each commit that executor checks them (index, lengths, commit digest) and " +
      "hard-links them into its block manager's directories, so that when the executor is lost only the " +
      "relocation is left: the driver points reducers at them before it asks that executor to confirm the " +
      "adoption. Outputs an executor adopted are prepared in turn, and what a lost standby had prepared " +
      "is prepared again at another executor of the node or at the next one to join it. Hard links only (no bytes " +
      "are copied); only where Spark's reader detects a corrupt " +
      "block (compressed LZ4 shuffle blocks, spark.shuffle.detectCorrupt). false: the adopter checks and links " +
      "the outputs after the loss.", ReadBy.Jvm)

  val ShuffleIoDelegate: ConfigKey[String] = ConfigKey(Prefix + "shuffle-io.delegate",
    ChoiceType(Seq(LocalDiskShuffleIo.toLowerCase(Locale.ROOT) -> LocalDiskShuffleIo,
      "local-disk" -> LocalDiskShuffleIo,
      KubernetesShuffleIo.toLowerCase(Locale.ROOT) -> KubernetesShuffleIo,
      "kubernetes-local-disk" -> KubernetesShuffleIo)),
    LocalDiskShuffleIo, LocalDiskShuffleIo,
    s"$LocalDiskShuffleIo (local-disk), $KubernetesShuffleIo (kubernetes-local-disk)",
    "The shuffle IO that io.regionrecovery.spark.RegionRecoveryShuffleDataIO wraps (both write the same " +
      "local-disk files). KubernetesLocalDiskShuffleDataIO adds Spark's own recovery of shuffle files from a reused " +
      "persistent volume claim, beside the plugin's (docs/kubernetes.md says what each covers).", ReadBy.Jvm,
    deprecatedNames = Seq(Prefix + "shuffleIo.delegate"))

  // ---- batch job recovery after a driver crash (FLIP-383's keys after the prefix) ---------------------

  private val JR = Prefix + "job-recovery."

  val JobRecoveryEnabled: ConfigKey[Boolean] = ConfigKey(JR + "enabled", BooleanType, false, "false", "true, false",
    "Batch job recovery after a driver crash (Flink's execution.batch.job-recovery.enabled): the driver records " +
      "every materialized DataFrame shuffle in the job's event store, a lost driver's retained files are kept for " +
      "job-recovery.window, and a resubmission with the same job-recovery.job-id reuses the shuffles whose plan, " +
      "input files and settings are the same instead of recomputing them. Needs retained.enabled=true and a " +
      "job-recovery.job-id.", ReadBy.Both)

  val JobRecoveryJobId: ConfigKey[String] = ConfigKey(JR + "job-id", JobIdType, "", "(none)",
    "1 to 128 letters, digits, '.', '_' or '-'",
    "The job's identity across applications, declared by the user; the resubmission uses the same one. A second " +
      "live driver with the same job id is refused.", ReadBy.Both)

  val JobRecoveryCodeVersion: ConfigKey[String] = ConfigKey(JR + "code-version", JobIdType, "", "(none)",
    "1 to 128 letters, digits, '.', '_' or '-'",
    "A version of the job's code that the user declares (a release, a commit): part of every shuffle's identity, so " +
      "a resubmission with another value recomputes every shuffle. For changes the identity cannot see: code the " +
      "executors load that the driver does not (libraries upgraded on the executors only), data a function reads " +
      "from elsewhere than its input files, a module whose source is unchanged but whose values are computed " +
      "when it is imported.", ReadBy.Jvm)

  val JobRecoveryIgnoredCode: ConfigKey[Seq[String]] = ConfigKey(JR + "ignored-code", SettingNamesType, Nil,
    "(none)", "distribution, module or shipped file names, or prefixes ending in '*', comma-separated",
    "Python code the user declares cannot change a result of this job, left out of every Python function's " +
      "identity: an installed distribution (by name), a module (by name, or a prefix ending in '*'), or a file " +
      "shipped to the executors (by file name). By default every installed distribution, every module the driver " +
      "loaded or a function imports and every shipped file counts. A refusal's detail names what differed.",
    ReadBy.Python)

  val JobRecoveryIgnoredSettings: ConfigKey[Seq[String]] = ConfigKey(JR + "ignored-settings", SettingNamesType, Nil,
    "(none)", "setting names or prefixes ending in '*', comma-separated",
    "Settings the user declares cannot change a result of this job, left out of every shuffle's identity on top " +
      "of the built-in list: for a deployment that puts a per-run value in a setting that counts (a temporary path " +
      "in spark.files, a run id in a setting of its own). A refusal's detail names the setting that differed.",
    ReadBy.Jvm)

  val JobRecoveryInputDigest: ConfigKey[String] = ConfigKey(JR + "input-digest",
    ChoiceType(Seq("metadata" -> "metadata", "content" -> "content")), "metadata", "metadata",
    "metadata, content (any case)",
    "How a shuffle's input files are identified across applications. metadata: path, length and modification " +
      "time, with the ETag and version id where the object store's listing gives them (S3A, ABFS). content: also " +
      "a digest of every file's bytes, the file system's checksum where it gives one (HDFS) and otherwise SHA-256 " +
      "read by the driver once per file and driver; a file rewritten with the same length within the same " +
      "modification time (a coarse clock, a copy that keeps times) is then seen.", ReadBy.Jvm)

  val JobRecoveryDir: ConfigKey[String] = ConfigKey(JR + "dir", UriType, "",
    "<java.io.tmpdir>/spark-region-recovery-jobs-<user>", "a Hadoop FileSystem URI or an absolute path",
    "Where the job event store lives: <dir>/<job-id>/segment-*, one segment per application, appended, never " +
      "rewritten (on an object store, one object per flush). A local path (the default) is refused in cluster " +
      "deploy mode, where the next driver may run on another host. A file system on which two drivers could both " +
      "take the job (other than a local one, HDFS, or S3A with its conditional writes) turns job recovery off at " +
      "start, with the reason in the log and the report.", ReadBy.Both)

  val JobRecoveryWorkerTimeout: ConfigKey[Long] = ConfigKey(JR + "previous-worker.recovery.timeout",
    DurationType(None), 30000L, "30 s", DurationForms,
    "How long the new driver waits, from its start, for executors on the hosts that hold a recorded shuffle's " +
      "files (FLIP-383's name). Outputs on hosts with no executor by then are recomputed.", ReadBy.Jvm)

  val JobRecoveryLeaseTimeout: ConfigKey[Long] = ConfigKey(JR + "lease-timeout", DurationType(Some(1000L)), 30000L,
    "30 s", DurationForms + "; at least 1 s",
    "Where job-recovery.dir is not local (HDFS, S3A), the job's lock is a lease its driver renews every tenth of " +
      "this (at most once per job-event.store.write-buffer.flush-interval, which sets a floor of 10 of them). A " +
      "new driver that finds a lease watches it this long on its own monotonic clock: renewed meanwhile, it is " +
      "refused; unchanged, it takes the job, so a resubmission after a crash starts this late (the time written " +
      "in the lease, another host's clock, is never trusted). A driver paused longer than this (GC, a frozen " +
      "host) loses the job, stops recording and deletes nothing of it.", ReadBy.Jvm)

  val JobRecoveryWindow: ConfigKey[Long] = ConfigKey(JR + "window", DurationType(Some(1000L)), 1800000L, "30 min",
    DurationForms + "; at least 1 s",
    "How long a lost driver's retained files are kept for a resubmission (instead of being deleted at once), " +
      "skipped by other applications' sweeps until then. 30 min covers a scheduler's retry (Airflow waits 5 min " +
      "by default) or an operator's rerun, and bounds the disk a job that is never resubmitted holds.",
    ReadBy.Jvm)

  val JobEventWriteBufferSize: ConfigKey[Long] = ConfigKey(Prefix + "job-event.store.write-buffer.size",
    BytesType, 1048576L, "1m", BytesForms,
    "Bytes of events the driver buffers before it writes them to the job event store (FLIP-383's " +
      "job-event.store.write-buffer.size). A materialized shuffle is written at once in any case.", ReadBy.Jvm)

  val JobEventFlushInterval: ConfigKey[Long] = ConfigKey(Prefix + "job-event.store.write-buffer.flush-interval",
    DurationType(Some(1L)), 1000L, "1 s", DurationForms + "; at least 1 ms",
    "How often buffered events are flushed to the job event store (FLIP-383's " +
      "job-event.store.write-buffer.flush-interval).", ReadBy.Jvm)

  // ---- streaming: batch sizing during recovery and backlog (FLINK-35761, FLIP-309; read by the source) ---

  private val CP = Prefix + "execution.checkpointing."

  val CheckpointingInterval: ConfigKey[Long] = ConfigKey(CP + "interval", DurationType(None), 0L, "0",
    DurationForms + "; 0 = none",
    "The commit interval of a streaming query that is not behind (Flink's execution.checkpointing.interval): set " +
      "the query's trigger to processingTime of this interval. With it set, execution.checkpointing." +
      "interval-during-backlog must be 0 or at least this long.", ReadBy.Jvm)

  val CheckpointingIntervalDuringBacklog: ConfigKey[Long] = ConfigKey(CP + "interval-during-backlog",
    DurationType(None), -1L, "execution.checkpointing.interval, else 30 s",
    DurationForms + "; 0 = no bound during backlog",
    "While a region-recovery source is behind (FLIP-309's isProcessingBacklog), each batch is sized from the " +
      "measured throughput to take about this long, and no batch, fresh ones included, takes more than this " +
      "size times streaming.recovery.ramp-factor; 0 means backlog batches take all available data (up to " +
      "streaming.max-batch). Unset: execution.checkpointing.interval, else 30 s.", ReadBy.Jvm)

  /** interval-during-backlog when neither it nor execution.checkpointing.interval is set. */
  val DefaultBacklogIntervalMs: Long = 30000L

  val CheckpointingDuringRecovery: ConfigKey[Boolean] = ConfigKey(CP + "during-recovery.enabled", BooleanType,
    true, "true", "true, false",
    "Commit during recovery (FLINK-35761's switch): from the first batch a region-recovery source plans after a " +
      "start or restart, batches start at streaming.recovery.initial-batch and grow by " +
      "streaming.recovery.ramp-factor while the source is behind, so a failure during catch-up loses at most one " +
      "bounded batch. On by default: using the source is the opt-in (Flink's switch, off by default, applies to " +
      "every job). Off: the first batch takes all available data (up to streaming.max-batch), as plain Spark does.",
    ReadBy.Jvm)

  val StreamingInitialBatch: ConfigKey[Int] = ConfigKey(Prefix + "streaming.recovery.initial-batch",
    IntType(Some(1L)), 10, "10", "an integer >= 1",
    "Size of the first batch during recovery, in the source's unit: files for the file sources, records for " +
      "Kafka.", ReadBy.Jvm)

  val StreamingRampFactor: ConfigKey[Double] = ConfigKey(Prefix + "streaming.recovery.ramp-factor",
    DoubleType(v => if (v <= 1) Some("must be greater than 1") else None), 2.0, "2.0", "a number > 1",
    "Each batch during recovery, and each change of size during backlog, is at most this factor larger than the " +
      "one before.", ReadBy.Jvm)

  val StreamingMaxBatch: ConfigKey[Option[Int]] = ConfigKey(Prefix + "streaming.max-batch", IntOrUnlimitedType,
    None, "unlimited", "an integer >= 1, or infinite / unlimited",
    "No batch of a region-recovery source admits more than this, in the source's unit (files or records). " +
      "The query's own maxFilesPerTrigger / maxOffsetsPerTrigger is never raised by it: the smaller one caps.",
    ReadBy.Jvm)

  val StreamingLagThreshold: ConfigKey[Long] = ConfigKey(Prefix + "streaming.backlog.lag-threshold",
    DurationType(None), 0L, "0", DurationForms + "; 0 = off",
    "A file source is also behind when the newest file of its last batch is older than this (modification " +
      "time); 0: behind only when the last batch hit its limit.", ReadBy.Jvm)

  /** Every key, sorted by name. */
  val all: Seq[ConfigKey[_]] = Seq[ConfigKey[_]](
    RestartStrategyType, FixedDelayAttempts, FixedDelayDelay, FailureRateMaxFailures, FailureRateInterval,
    FailureRateDelay, ExponentialInitialBackoff, ExponentialMaxBackoff, ExponentialMultiplier,
    ExponentialResetThreshold, ExponentialJitter, ExponentialAttempts, FailoverStrategy, SkipDeterministicConsumers,
    RestartConsumersOfChangedOutputs, ConnectAdminOperations, EventBufferCapacity, RetainedEnabled, RetainedDir,
    RetainedMaxBytes,
    RetainedRelease, RetainedLeaseTimeout, RetainedNodeEnv, RetainedReattachTimeout, RetainedEarlyLoss,
    RetainedRedirectFetches, RetainedPrepareAdoption, ShuffleIoDelegate,
    JobRecoveryEnabled, JobRecoveryJobId, JobRecoveryCodeVersion,
    JobRecoveryInputDigest, JobRecoveryIgnoredSettings, JobRecoveryIgnoredCode, JobRecoveryDir,
    JobRecoveryWorkerTimeout, JobRecoveryWindow, JobRecoveryLeaseTimeout,
    JobEventWriteBufferSize, JobEventFlushInterval,
    CheckpointingInterval, CheckpointingIntervalDuringBacklog, CheckpointingDuringRecovery, StreamingInitialBatch,
    StreamingRampFactor, StreamingMaxBatch, StreamingLagThreshold).sortBy(_.name)

  /** A key by its name or one of its deprecated names. */
  def byName(name: String): Option[ConfigKey[_]] = all.find(k => k.name == name || k.deprecatedNames.contains(name))

  private lazy val knownNames: Seq[String] = all.flatMap(k => k.name +: k.deprecatedNames).sorted

  /**
   * Warnings for values set under a deprecated name (the keys renamed to Flink's style, the Flink key
   * `restart-strategy`), in name order; the Python controller logs the same text
   * (config.deprecated_key_warning).
   */
  def deprecatedKeyWarnings(conf: Iterable[(String, String)]): Seq[String] = {
    val set = conf.map(_._1).toSet
    all.flatMap(k => k.deprecatedNames.filter(set.contains).map(old => deprecatedKeyWarning(old, k.name))).sorted
  }

  def deprecatedKeyWarning(old: String, current: String): String =
    s"Configuration key $old is deprecated: use $current (its value is read while $current is unset)."

  /**
   * Warnings for the keys under the prefix that no key declares, in name order: a typo in a key's
   * first part (`restart-stratgy.type`) would otherwise be ignored silently. The driver plugin logs
   * them at start; the Python controller logs the same text (config.unknown_key_warning).
   */
  def unknownKeyWarnings(conf: Iterable[(String, String)]): Seq[String] =
    conf.toSeq.sortBy(_._1).collect {
      case (name, value) if name.startsWith(Prefix) && byName(name).isEmpty => unknownKeyWarning(name, value)
    }

  def unknownKeyWarning(name: String, value: String): String = {
    val hint = closeMatch(name).fold("")(m => s" Did you mean $m?")
    val groups = all.map(_.name.stripPrefix(Prefix).takeWhile(_ != '.')).distinct.sorted.mkString(", ")
    s"Unknown configuration key ${ConfigType.cut(name)} (value ${ConfigType.shown(value)}) is ignored.$hint " +
      s"Known keys start with $Prefix and one of: $groups (`region-recovery config` lists them)."
  }

  /**
   * The known key closest to `name`, as Python's difflib.get_close_matches(word, known, n=1) picks it
   * (cutoff 0.6; ties to the greater name), comparing the names without the prefix every one shares.
   */
  def closeMatch(name: String): Option[String] = {
    val word = name.stripPrefix(Prefix)
    if (word.length >= 200) return None // no typo is that long (and difflib would start junking characters)
    val scored = knownNames.map(k => (ratio(k.stripPrefix(Prefix), word), k)).filter(_._1 >= 0.6)
    scored.maxOption(Ordering.Tuple2(Ordering.Double.TotalOrdering, Ordering.String)).map(_._2)
  }

  /** difflib.SequenceMatcher(None, a, b).ratio(): 2 * matched characters / total length. */
  private def ratio(a: String, b: String): Double = {
    // the longest common block, first in a then in b (find_longest_match), then the same on each side
    def matched(alo: Int, ahi: Int, blo: Int, bhi: Int): Int = {
      var (besti, bestj, bestk) = (alo, blo, 0)
      var ending = new Array[Int](b.length + 1) // ending(j + 1): the common block ending at a(i - 1), b(j)
      for (i <- alo until ahi) {
        val next = new Array[Int](b.length + 1)
        for (j <- blo until bhi if a(i) == b(j)) {
          val k = ending(j) + 1
          next(j + 1) = k
          if (k > bestk) { besti = i - k + 1; bestj = j - k + 1; bestk = k }
        }
        ending = next
      }
      if (bestk == 0) 0
      else bestk + matched(alo, besti, blo, bestj) + matched(besti + bestk, ahi, bestj + bestk, bhi)
    }
    val total = a.length + b.length
    if (2.0 * math.min(a.length, b.length) / total < 0.6) 0.0 // difflib's real_quick_ratio bound
    else 2.0 * matched(0, a.length, 0, b.length) / total
  }
}
