package org.apache.spark.regionrecovery.ui

import scala.jdk.CollectionConverters._
import scala.xml.Node

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}
import jakarta.servlet.http.HttpServletRequest

import org.apache.spark.ui.{SparkUI, SparkUITab, UIUtils, WebUIPage}
import org.apache.spark.util.kvstore.KVStore

/** The "Recovery" tab: what the plugin lost, kept, adopted, decided and restarted. */
private[spark] class RecoveryTab(store: KVStore, parent: SparkUI) extends SparkUITab(parent, "recovery") {
  attachPage(new RecoveryPage(this, store))
}

private[spark] object RecoveryTab {

  /** Attaches the tab to `ui` (once; a later call finds it there). */
  def attach(store: KVStore, ui: SparkUI): Unit =
    if (!ui.getTabs.exists(_.prefix == "recovery")) ui.attachTab(new RecoveryTab(store, ui))
}

/** A parsed row: its kind, time and fields. */
private case class Row(kind: String, time: Long, fields: JsonNode) {
  def text(name: String): String = Option(fields.get(name)).filterNot(_.isNull).map { n =>
    if (n.isValueNode) n.asText() else n.toString
  }.getOrElse("")
  def long(name: String): Long = Option(fields.get(name)).filter(n => n.isNumber || n.isTextual)
    .flatMap(n => n.asText().toLongOption).getOrElse(0L)
  def count(name: String): Int = Option(fields.get(name)).filter(_.isArray).map(_.size).getOrElse(0)
}

private[spark] class RecoveryPage(tab: RecoveryTab, store: KVStore) extends WebUIPage("") {
  private val mapper = new ObjectMapper()

  private def rows(): Seq[Row] = {
    val view = store.view(classOf[RecoveryUiRow]).closeableIterator()
    try view.asScala.map(r => Row(r.kind, r.time, mapper.readTree(r.json))).toSeq
    finally view.close()
  }

  private def when(t: Long): String = if (t <= 0) "" else UIUtils.formatDate(t)
  private def size(bytes: Long): String = org.apache.spark.util.Utils.bytesToString(bytes)

  private def table[T](id: String, headers: Seq[String], items: Seq[T])(cells: T => Seq[Any]): Seq[Node] =
    if (items.isEmpty) <p class={s"rr-$id-empty"}>None.</p>
    else
      <table class={s"table table-bordered table-sm table-striped rr-$id"} id={s"rr-table-$id"}>
        <thead><tr>{headers.map(h => <th>{h}</th>)}</tr></thead>
        <tbody>{items.map(i => <tr>{cells(i).map(c => <td>{c.toString}</td>)}</tr>)}</tbody>
      </table>

  override def render(request: HttpServletRequest): Seq[Node] = {
    val all = rows()
    def of(kind: String) = all.filter(_.kind == kind)
    val removed = of(RecoveryUiListener.ExecutorRemoved)
    val losses = of(RecoveryUiEvent.ExecutorLost).map(r => r.text("executor_id") -> r).toMap
    val decisions = of(RecoveryUiEvent.Decision)
    val attempts = of(RecoveryUiEvent.Attempt)
    val restarts = of(RecoveryUiEvent.Restart).map(r => (r.text("run"), r.long("attempt")) -> r).toMap
    val retained = of(RecoveryUiEvent.Retained)
    val latest = retained.lastOption
    val adopted = losses.values.map(_.long("adopted")).sum
    val savedByRestarts = attempts.map(_.long("map_tasks_saved")).sum
    def breakdown(field: String): Seq[(String, Long)] = latest.toSeq.flatMap { r =>
      Option(r.fields.get(field)).filter(_.isObject).toSeq.flatMap(_.properties().asScala.map { e =>
        val v = e.getValue
        e.getKey -> (if (v.isObject) Option(v.get("bytes")).map(_.asLong).getOrElse(0L) else v.asLong)
      })
    }.sortBy(-_._2)

    val content =
      <div id="rr-summary">
        <h4>Summary</h4>
        <ul class="list-unstyled">
          <li><strong>Executors lost:</strong> <span id="rr-executors-lost">{removed.size}</span></li>
          <li><strong>Map outputs adopted</strong> (map tasks not re-run):
            <span id="rr-adopted">{adopted}</span></li>
          <li><strong>Map tasks saved by restarts</strong> (reused shuffles):
            <span id="rr-saved-by-restarts">{savedByRestarts}</span></li>
          <li><strong>Recovery decisions:</strong> <span id="rr-decisions">{decisions.size}</span></li>
          <li><strong>Restart attempts:</strong> <span id="rr-attempts">{attempts.size}</span></li>
          <li><strong>Retained now:</strong>
            <span id="rr-retained-bytes">{latest.map(r => size(r.long("bytes"))).getOrElse("retention off")}</span>
          </li>
        </ul>
      </div>
      <h4>Executors lost</h4> ++
        table("executors",
          Seq("Executor", "Removed", "Reason", "Outputs adopted", "Unregistered (recomputed)",
            "Adopter", "Why", "Loss to decision (ms)"), removed) { r =>
          val l = losses.get(r.text("executor_id"))
          Seq(r.text("executor_id"), when(r.time), r.text("reason"), l.map(_.long("adopted")).getOrElse(""),
            l.map(_.long("unregistered")).getOrElse(""), l.map(_.text("adopter")).getOrElse(""),
            l.map(_.text("adopter_reason")).getOrElse("retention off"), l.map(_.long("total_ms")).getOrElse(""))
        } ++
        <h4>Retained bytes</h4> ++
        table("retained-hosts", Seq("Host", "Bytes"), breakdown("hosts"))(h => Seq(h._1, size(h._2))) ++
        table("retained-executors", Seq("Executor", "Bytes"), breakdown("executors"))(e => Seq(e._1, size(e._2))) ++
        table("retained-shuffles", Seq("Shuffle", "Bytes"), breakdown("shuffles"))(s => Seq(s._1, size(s._2))) ++
        <h5>Over time</h5> ++
        table("retained-over-time", Seq("Time", "Retained", "Outputs", "Released so far"), retained.takeRight(30)) {
          r => Seq(when(r.time), size(r.long("bytes")), r.long("outputs"), r.long("released"))
        } ++
        <h4>Recovery decisions (planned against actual re-execution)</h4> ++
        table("decisions",
          Seq("Time", "Jobs", "Stage", "Cause", "Failover", "Tasks failed", "Outputs lost",
            "Planned", "Actually re-run", "Agrees"), decisions) { r =>
          Seq(when(r.time), r.text("job_ids"), s"${r.text("stage_id")}.${r.text("stage_attempt")}", r.text("cause"),
            r.text("failover_strategy"), r.count("failed_tasks"), r.count("lost_outputs"), r.count("planned"),
            r.count("actual"), Option(r.fields.get("comparison")).map(_.path("agrees").asText).getOrElse(""))
        } ++
        <h4>Restart attempts</h4> ++
        table("attempts",
          Seq("Action", "Attempt", "Outcome", "Wall (ms)", "Map tasks run", "Map stages reused",
            "Map tasks saved", "Decision", "Backoff (ms)"), attempts) { r =>
          val d = restarts.get((r.text("run"), r.long("attempt")))
          Seq(r.text("run"), r.long("attempt"), if (r.text("succeeded") == "true") "succeeded" else r.text("error"),
            r.long("wall_ms"), r.long("map_tasks_launched"), r.long("map_stages_skipped"), r.long("map_tasks_saved"),
            d.map(x => if (x.text("restart") == "true") "restart" else "give up: " + x.text("reason")).getOrElse(""),
            d.map(_.long("backoff_ms")).getOrElse(""))
        }
    UIUtils.headerSparkPage(request, "Recovery", content, tab)
  }
}
