package io.regionrecovery.spark.sql

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.{AtomicInteger, AtomicLong}

import org.apache.spark.sql.catalyst.trees.TreeNodeTag
import org.apache.spark.sql.execution.{CommandResultExec, SparkPlan}
import org.apache.spark.sql.execution.adaptive.{AdaptiveSparkPlanExec, QueryStageExec, ShuffleQueryStageExec}
import org.apache.spark.sql.execution.exchange.ShuffleExchangeExec

/**
 * Shuffle reuse across the attempts of one restarted DataFrame action.
 *
 * A DataFrame rebuilt after a failed action plans fresh shuffle exchanges (new shuffle ids), so
 * Spark would recompute every upstream shuffle. While a restart scope is open (Python's `rr.run`),
 * [[ExchangeReuseRule]] tags each planned exchange with its canonical plan; when an attempt fails,
 * [[FailedQueryCapture]] records the exchanges that attempt materialized under that tag; the next
 * attempt's identical exchanges (same canonical plan) are replaced by a [[ReusedShuffleExchangeExec]]
 * that reads the recorded shuffle, so Spark skips those map stages. Records are dropped when the
 * last scope closes, which lets Spark's ContextCleaner release the shuffles again.
 */
object ExchangeReuse {
  /** The canonical form of an exchange as first planned (children not yet query stages). */
  val KeyTag: TreeNodeTag[SparkPlan] = TreeNodeTag[SparkPlan]("regionRecovery.exchangeKey")

  private val openScopes = new AtomicInteger(0)
  private val completed = new ConcurrentHashMap[SparkPlan, ShuffleExchangeExec]()
  private val capturedTotal = new AtomicLong(0)
  private val reusedTotal = new AtomicLong(0)

  def active: Boolean = openScopes.get > 0

  def beginScope(): Unit = openScopes.incrementAndGet()

  /** Closes a scope; the last one forgets every recorded exchange. */
  def endScope(): Unit = if (openScopes.decrementAndGet() <= 0) {
    openScopes.set(0)
    completed.clear()
  }

  /** The recorded exchange for a freshly planned one, if its shuffle is still known to Spark. */
  def lookup(key: SparkPlan): Option[ShuffleExchangeExec] = Option(completed.get(key)).filter { e =>
    val known = org.apache.spark.regionrecovery.SparkInternals.availableMapOutputs(e.shuffleId) >= 0
    if (!known) completed.remove(key)
    known
  }

  /** Counts a replaced plan subtree (one per topmost reused exchange; those below it are reused with it). */
  def recordReuse(): Unit = reusedTotal.incrementAndGet()

  /** Records every shuffle stage a failed query materialized (called on the listener thread). */
  def capture(plan: SparkPlan): Int =
    if (!active) 0
    else {
      var n = 0
      materializedShuffles(plan).foreach { e =>
        e.getTagValue(KeyTag).foreach { key =>
          completed.put(key, e)
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

  def statusJson(): String =
    s"""{"scopes": ${openScopes.get}, "recorded": ${completed.size}, "captured": ${capturedTotal.get}, """ +
      s""""reused": ${reusedTotal.get}}"""
}
