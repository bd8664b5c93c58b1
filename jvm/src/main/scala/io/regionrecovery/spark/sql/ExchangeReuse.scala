package io.regionrecovery.spark.sql

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import org.apache.spark.internal.Logging
import org.apache.spark.regionrecovery.SparkInternals
import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{CommandResultExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

import io.regionrecovery.spark.core.Json
import io.regionrecovery.spark.shuffleidentity.{IdentityPart, InputFingerprint}

/**
 * Shuffle reuse across the attempts of one restarted DataFrame action, scoped to that action.
 *
 * A DataFrame rebuilt after a failed action plans fresh shuffle exchanges (new shuffle ids), so
 * Spark would recompute every upstream shuffle. Python's `rr.run` opens a scope ([[beginScope]])
 * and sets its id as the local property [[ScopeProperty]] on the thread that runs each attempt.
 * [[ExchangeReuseRule]] reads that property on the thread that plans the query: it tags each planned
 * exchange with its canonical plan and the scope; when the query fails, [[FailedQueryCapture]]
 * records (on the listener thread, which has no local properties: hence the tag) every exchange it
 * materialized under that scope, with the fingerprint of the input that exchange read. The retry's
 * exchange is replaced by a [[ReusedShuffleExchangeExec]] only if it is planned under the same open
 * scope, its canonical plan equals a recorded one, and its freshly computed input fingerprint
 * ([[InputFingerprint]]) equals the recorded one. Everything else is refused and counted with its
 * reason: the input changed, an input is not fingerprintable, the shuffle is gone, or the plan
 * matched a shuffle recorded by another scope (or was planned outside any open scope). Closing a
 * scope forgets its records, which lets Spark's ContextCleaner release those shuffles again.
 */
object ExchangeReuse extends Logging {

  /** The local property (SparkContext.setLocalProperty) naming the scope of the thread's queries. */
  val ScopeProperty = "regionRecovery.reuseScope"

  /** The canonical form of an exchange as first planned (children not yet query stages). */
  val KeyTag: TreeNodeTag[SparkPlan] = TreeNodeTag[SparkPlan]("regionRecovery.exchangeKey")

  /** The scope an exchange was planned in. */
  val ScopeTag: TreeNodeTag[String] = TreeNodeTag[String]("regionRecovery.reuseScope")

  /** The settings an exchange was planned under (a retry under other settings is not the same shuffle). */
  val SettingsTag: TreeNodeTag[IdentityPart] = TreeNodeTag[IdentityPart]("regionRecovery.settings")

  /** Why an exchange that matched a recorded one by plan was not replaced by it. */
  object Reason {
    val InputChanged: String = InputFingerprint.InputChangedReason
    val NotFingerprintable: String = InputFingerprint.NotFingerprintableReason
    val ShuffleGone = "shuffle_gone"
    val OtherScope = "other_scope"
    val OutsideRun = "outside_run"
    val SettingsChanged = "settings_changed"
    val all: Seq[String] = Seq(InputChanged, NotFingerprintable, ShuffleGone, OtherScope, OutsideRun, SettingsChanged)
  }

  final case class Refusal(reason: String, shuffleId: Int, detail: String) {
    def json: String = Json.obj("reason" -> Json.str(reason), "shuffle_id" -> shuffleId.toString,
      "detail" -> Json.str(detail))
  }

  /** A shuffle a failed attempt materialized, with the fingerprint of what it read. */
  final case class Recorded(exchange: ShuffleExchangeExec, inputs: InputFingerprint.Result)

  /** One `rr.run`: the shuffles its failed attempts left, and what its attempts reused or refused. */
  final class Scope private[ExchangeReuse] (val id: String) {
    private[ExchangeReuse] val records = new ConcurrentHashMap[SparkPlan, Recorded]()
    private[ExchangeReuse] val captured = new AtomicLong(0)
    private[ExchangeReuse] val reused = new AtomicLong(0)
    private val refusals = new java.util.ArrayList[Refusal]()
    // what was already counted for a query: (execution id, recorded shuffle), since the rule runs on
    // every re-planning of an adaptive query
    private val counted = ConcurrentHashMap.newKeySet[(String, Int)]()

    private[ExchangeReuse] def once(execution: String, shuffleId: Int): Boolean = counted.add((execution, shuffleId))

    private[ExchangeReuse] def refuse(r: Refusal): Unit = refusals.synchronized(refusals.add(r))

    def refused: Seq[Refusal] = refusals.synchronized(refusals.asScala.toList)

    def json: String = Json.obj("scope" -> Json.str(id), "open" -> "true", "recorded" -> records.size.toString,
      "captured" -> captured.get.toString, "reused" -> reused.get.toString,
      "refused" -> refused.map(_.json).mkString("[", ", ", "]"))
  }

  private val scopes = new ConcurrentHashMap[String, Scope]()
  private val scopeIds = new AtomicLong(0)
  private val capturedTotal = new AtomicLong(0)
  private val reusedTotal = new AtomicLong(0)
  private val refusedTotal: Map[String, AtomicLong] = Reason.all.map(_ -> new AtomicLong(0)).toMap
  // refusals of queries planned outside any open scope, counted once per (execution id, shuffle)
  private val countedOutside = ConcurrentHashMap.newKeySet[(String, Int)]()

  /** Opens a scope and returns its id (unique in this JVM). */
  def beginScope(): String = beginScope(None)

  /**
   * Opens a scope owned by a Spark Connect session (`owner`): only that session's queries, carrying the scope as
   * an operation tag ([[ConnectTagPrefix]]), belong to it.
   */
  def beginScope(owner: Option[String]): String = {
    val id = s"reuse-scope-${scopeIds.incrementAndGet()}"
    scopes.put(id, new Scope(id))
    owner.foreach(owners.put(id, _))
    id
  }

  /** Closes a scope and forgets what it recorded; a later query carrying its id is outside any scope. */
  def endScope(id: String): Boolean = {
    val found = scopes.remove(id) != null
    owners.remove(id)
    if (scopes.isEmpty) countedOutside.clear()
    found
  }

  /** The user tag a Spark Connect client adds to the operations of a scope: this prefix, then the scope id. */
  val ConnectTagPrefix = "region-recovery-"

  // Spark Connect turns a client's tag into the job tag SparkConnect_SessionTag_User_<user>_Session_<session>_Tag_<tag>
  private val ConnectScopeTag =
    ("SparkConnect_SessionTag_User_.*_Session_(.+)_Tag_" +
      java.util.regex.Pattern.quote(ConnectTagPrefix) + "(reuse-scope-\\d+)").r
  private val owners = new ConcurrentHashMap[String, String]()

  /**
   * The scope of a query: the thread's scope property (a classic session's `rr.run`), else the scope a Spark Connect
   * client tagged its operation with (`jobTags`: the thread's job tags), if the scope belongs to that client's
   * session. A scope named by another session's query is not its scope: runs never share shuffles.
   */
  def scopeOf(property: String, jobTags: Iterable[String]): String =
    if (property != null) property
    else
      jobTags.iterator.collectFirst {
        case ConnectScopeTag(session, id) if Option(owners.get(id)).contains(session) => id
      }.orNull

  def scope(id: String): Option[Scope] = Option(id).flatMap(i => Option(scopes.get(i)))

  private def anyRecords: Boolean = scopes.values.asScala.exists(!_.records.isEmpty)

  /**
   * The rule's work on one plan, planned on a thread whose scope property is `scopeId` (null: none)
   * as part of SQL execution `execution`, under `settings` (read when first needed). Top-down, so the
   * largest reusable subtree is replaced and nothing below it is planned again.
   */
  def rewrite(plan: SparkPlan, scopeId: String, execution: String, settings: => IdentityPart): SparkPlan = {
    lazy val now = settings
    val current = scope(scopeId)
    if (current.isEmpty && !anyRecords) plan
    else
      plan.transformDown { case e: ShuffleExchangeExec =>
        try decide(e, current, scopeId, execution, now)
        catch {
          case NonFatal(t) => // never fail the user's query: plan it as Spark would
            logWarning(s"region-recovery: exchange reuse skipped an exchange: $t")
            e
        }
      }
  }

  private def decide(e: ShuffleExchangeExec, current: Option[Scope], scopeId: String, execution: String,
      settings: => IdentityPart): SparkPlan = {
    val key = e.canonicalized
    current match {
      case None =>
        elsewhere(key, None).foreach { case (other, rec) =>
          if (countedOutside.add((execution, rec.exchange.shuffleId))) {
            refusedTotal(Reason.OutsideRun).incrementAndGet()
            val where = if (scopeId == null) "no rr.run scope" else s"scope $scopeId, which is closed"
            logInfo(s"region-recovery: not reusing shuffle ${rec.exchange.shuffleId} of ${other.id} for a query " +
              s"planned with $where")
          }
        }
        e
      case Some(s) =>
        e.setTagValue(KeyTag, key)
        e.setTagValue(ScopeTag, s.id)
        e.setTagValue(SettingsTag, settings)
        Option(s.records.get(key)) match {
          case None =>
            elsewhere(key, Some(s)).foreach { case (other, rec) =>
              refuse(s, execution, rec, Reason.OtherScope,
                s"recorded by a failed attempt of ${other.id}, " +
                  s"planned in ${s.id}")
            }
            e
          case Some(rec) => reuseOrRefuse(e, key, s, rec, execution, settings)
        }
    }
  }

  private def reuseOrRefuse(e: ShuffleExchangeExec, key: SparkPlan, s: Scope, rec: Recorded, execution: String,
      settings: IdentityPart): SparkPlan = {
    val sid = rec.exchange.shuffleId
    val then = rec.exchange.getTagValue(SettingsTag)
    if (SparkInternals.availableMapOutputs(sid) < 0) {
      s.records.remove(key, rec)
      refuse(s, execution, rec, Reason.ShuffleGone, s"Spark no longer knows shuffle $sid")
      e
    } else if (!then.exists(_.digest == settings.digest)) {
      refuse(s, execution, rec, Reason.SettingsChanged,
        then.map(t => "the failed attempt ran under other settings: " + settings.changesSince(t))
          .getOrElse("the failed attempt's settings are unknown"))
      e
    } else
      rec.inputs match {
        case InputFingerprint.NotFingerprintable(leaf) =>
          refuse(s, execution, rec, Reason.NotFingerprintable, s"the failed attempt read $leaf")
          e
        case before: InputFingerprint.Fingerprint =>
          InputFingerprint.of(e.child) match {
            case InputFingerprint.NotFingerprintable(leaf) =>
              refuse(s, execution, rec, Reason.NotFingerprintable, s"this attempt reads $leaf")
              e
            case now: InputFingerprint.Fingerprint if now.digest != before.digest =>
              refuse(s, execution, rec, Reason.InputChanged,
                s"the failed attempt read ${before.describe}; " +
                  s"this attempt reads ${now.describe}")
              e
            case _ =>
              if (s.once(execution, sid)) {
                s.reused.incrementAndGet()
                reusedTotal.incrementAndGet()
              }
              val reused = ReusedShuffleExchangeExec(e.outputPartitioning, rec.exchange,
                ReusedShuffleSourceExec(e.child.output), before)
              // AQE links each new query stage to a logical node (asserted), found on the exchange or
              // below it; the subtree below is gone here, so carry the link over.
              e.logicalLink.orElse(e.collectFirst { case p if p.logicalLink.isDefined => p.logicalLink.get })
                .foreach(reused.setLogicalLink)
              reused.setTagValue(KeyTag, key)
              reused.setTagValue(ScopeTag, s.id)
              reused
          }
      }
  }

  /** Open scopes other than `except` that recorded a shuffle under this canonical plan. */
  private def elsewhere(key: SparkPlan, except: Option[Scope]): Seq[(Scope, Recorded)] =
    scopes.values.asScala.iterator.filterNot(s => except.exists(_ eq s))
      .flatMap(s => Option(s.records.get(key)).map(s -> _)).toSeq

  private def refuse(s: Scope, execution: String, rec: Recorded, reason: String, detail: String): Unit =
    if (s.once(execution, rec.exchange.shuffleId)) {
      refusedTotal(reason).incrementAndGet()
      s.refuse(Refusal(reason, rec.exchange.shuffleId, detail))
      logWarning(s"region-recovery: ${s.id} does not reuse shuffle ${rec.exchange.shuffleId} ($reason): $detail")
    }

  /** Records every shuffle stage a failed query materialized under an open scope (called on the listener thread). */
  def capture(plan: SparkPlan): Int =
    if (scopes.isEmpty) 0
    else {
      var n = 0
      materializedShuffles(plan).foreach { e =>
        for {
          key <- e.getTagValue(KeyTag)
          s <- scope(e.getTagValue(ScopeTag).orNull)
        } {
          // from the nodes that ran: a prep rule's node may be a copy of what AQE executed
          s.records.put(key, Recorded(e, InputFingerprint.ofExecuted(e.child)))
          s.captured.incrementAndGet()
          n += 1
        }
      }
      capturedTotal.addAndGet(n.toLong)
      n
    }

  /** Materialized shuffle exchanges anywhere in an executed plan, including inside AQE and commands. */
  private def materializedShuffles(plan: SparkPlan): Seq[ShuffleExchangeExec] = {
    val found = Seq.newBuilder[ShuffleExchangeExec]
    def walk(p: SparkPlan): Unit = p match {
      case a: AdaptiveSparkPlanExec => walk(a.executedPlan)
      case s: ShuffleQueryStageExec =>
        s.shuffle match {
          case e: ShuffleExchangeExec if s.isMaterialized => found += e
          // under job recovery: Spark's exchange inside, unless it was served from a crashed driver's
          // files (its runtime statistics are the wrapper's, not the inner exchange's)
          case r: io.regionrecovery.spark.jobrecovery.RecoverableShuffleExchangeExec
              if s.isMaterialized && r.recorded.isEmpty => found += r.inner
          case _ =>
        }
        walk(s.plan)
      case q: QueryStageExec => walk(q.plan)
      case c: CommandResultExec => walk(c.commandPhysicalPlan)
      case other =>
        other.children.foreach(walk)
        other.subqueries.foreach(walk)
    }
    walk(plan)
    found.result()
  }

  def statusJson(): String = {
    val open = scopes.values.asScala.toList
    Json.obj(
      "scopes" -> open.size.toString,
      "recorded" -> open.map(_.records.size).sum.toString,
      "captured" -> capturedTotal.get.toString,
      "reused" -> reusedTotal.get.toString,
      "refused" -> Json.obj(Reason.all.map(r => r -> refusedTotal(r).get.toString): _*),
      "scope_property" -> Json.str(ScopeProperty))
  }

  /** One scope's records and decisions as JSON; `{"scope": id, "open": false}` once it is closed. */
  def scopeJson(id: String): String =
    scope(id).map(_.json).getOrElse(Json.obj("scope" -> Json.str(id), "open" -> "false"))
}
