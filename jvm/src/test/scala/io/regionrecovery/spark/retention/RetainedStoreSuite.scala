package io.regionrecovery.spark.retention

import java.io.{File, IOException}
import java.nio.file.{Files, Path}
import java.nio.file.attribute.PosixFilePermissions

import scala.jdk.CollectionConverters._
import scala.util.Using

import org.scalatest.funsuite.AnyFunSuite

class RetainedStoreSuite extends AnyFunSuite {
  private def withRoot(f: (Path, RetainedStore) => Unit): Unit = {
    val tmp = Files.createTempDirectory("rr-store-")
    val root = tmp.resolve("retained")
    try f(root, new RetainedStore(root.toAbsolutePath.normalize()))
    finally {
      def rm(p: Path): Unit = { if (Files.isDirectory(p)) Files.list(p).forEach(rm); Files.deleteIfExists(p) }
      rm(tmp)
    }
  }

  private def file(dir: Path, name: String, bytes: Int): File = {
    Files.createDirectories(dir)
    val p = dir.resolve(name); Files.write(p, Array.fill[Byte](bytes)(7)); p.toFile
  }

  test("retain hard-links the files into <root>/<app>/<executor>/, directories owner-only") {
    withRoot { (root, store) =>
      val blockmgr = root.getParent.resolve("blockmgr")
      val data = file(blockmgr, "shuffle_1_5_0.data", 100)
      val index = file(blockmgr, "shuffle_1_5_0.index", 24)
      val (files, bytes) =
        store.retain("app-1", "3", "shuffle_1_5", Seq(data, index, new File(blockmgr.toFile, "absent")))
      assert(files == 2 && bytes == 124)
      val kept = root.resolve("app-1").resolve("3").resolve("shuffle_1_5_0.data")
      assert(Files.isSameFile(kept, data.toPath), "a hard link, not a copy")
      for (d <- Seq(root, root.resolve("app-1"), root.resolve("app-1").resolve("3")))
        assert(PosixFilePermissions.toString(Files.getPosixFilePermissions(d)) == "rwx------", d)
      // the executor deletes its own copy (shutdown hook): the retained link keeps the bytes
      Files.delete(data.toPath)
      assert(Files.size(kept) == 100)
    }
  }

  test("a fenced executor retains nothing") {
    withRoot { (root, store) =>
      val data = file(root.getParent.resolve("bm"), "shuffle_0_1_0.data", 10)
      store.writeFence("app-1", "2")
      assert(store.retain("app-1", "2", "shuffle_0_1", Seq(data)) == ((0, 0L)))
      assert(!Files.exists(store.executorDir("app-1", "2")))
    }
  }

  test("a reattached volume holds other executors' files: unfenced, non-empty directories of the application only") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      assert(store.heldExecutors("app-1", "9").isEmpty, "no application directory yet")
      store.retain("app-1", "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      store.retain("app-1", "2", "shuffle_0_2", Seq(file(bm, "shuffle_0_2_0.data", 10)))
      store.retain("app-1", "9", "shuffle_0_3", Seq(file(bm, "shuffle_0_3_0.data", 10)))
      store.retain("app-2", "4", "shuffle_0_4", Seq(file(bm, "shuffle_0_4_0.data", 10)))
      Files.createDirectories(store.executorDir("app-1", "5")) // empty: nothing to offer
      store.writeFence("app-1", "2") // purged by the driver: never offered again
      assert(store.heldExecutors("app-1", "9") == Seq("1"))
    }
  }

  test("a lost executor's Spark directories: only Spark-named, absolute, not the deleting executor's own, no link") {
    withRoot { (root, _) =>
      val node = root.getParent.resolve("local")
      val lostBm = node.resolve("blockmgr-0b9e1c4e-4c51-4b0f-9a43-6f4fd1e0c2a1")
      val lostRoot = node.resolve("spark-7d0f3e2a-1b2c-4d5e-8f90-a1b2c3d4e5f6")
      val own = node.resolve("blockmgr-11111111-2222-4333-8444-555555555555")
      val other = node.resolve("data")
      Seq(lostBm.resolve("0c"), lostRoot.resolve("userFiles"), own.resolve("0c"), other).foreach(
        Files.createDirectories(_))
      file(lostBm.resolve("0c"), "shuffle_0_5_0.data", 100)
      file(lostRoot.resolve("userFiles"), "app.jar", 20)
      file(own.resolve("0c"), "shuffle_0_6_0.data", 7)
      file(other, "keep", 1)
      val link = node.resolve("spark-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee")
      Files.createSymbolicLink(link, other)
      val local = Seq(node.toString)
      assert(LostExecutorDirs.refusal("relative/blockmgr-x", Set.empty, local).contains("not an absolute path"))
      assert(LostExecutorDirs.refusal(other.toString, Set.empty, local).exists(_.startsWith("not named")))
      assert(LostExecutorDirs.refusal(own.toString, Set(own.toString), local).contains("this executor's own directory"))
      assert(LostExecutorDirs.refusal(link.toString, Set.empty, local).contains("a symbolic link"))
      val asked = Seq(lostBm, lostRoot, own, other, link, node.resolve("blockmgr-00000000-0000-4000-8000-000000000000"))
      assert(LostExecutorDirs.delete(asked.map(_.toString), Seq(own.toString), local) == ((2, 120L)))
      assert(!Files.exists(lostBm) && !Files.exists(lostRoot))
      assert(Files.exists(own.resolve("0c").resolve("shuffle_0_6_0.data")) && Files.exists(other.resolve("keep")))
      assert(Files.isSymbolicLink(link) && Files.exists(other), "a link is neither followed nor removed")
    }
  }

  test("a lost executor's Spark directories: only in the node's local dir or one beside it, no linked directory") {
    withRoot { (root, _) =>
      val node = root.getParent.resolve("node") // a hostPath volume, or a Worker's spark.local.dir
      val mine = node.resolve("executor-1") // the deleting executor's configured local dir
      val elsewhere = root.getParent.resolve("elsewhere")
      val uuid = "0b9e1c4e-4c51-4b0f-9a43-6f4fd1e0c2a1"
      val sameDir = mine.resolve(s"spark-$uuid")
      val beside = node.resolve("executor-7").resolve(s"blockmgr-$uuid") // another Worker's, another pod's
      val outside = elsewhere.resolve(s"blockmgr-$uuid")
      val tooDeep = node.resolve("executor-7").resolve("b").resolve(s"blockmgr-$uuid")
      Seq(sameDir, beside, outside, tooDeep).foreach(d => file(d, "shuffle_0_1_0.data", 10))
      Files.createSymbolicLink(node.resolve("linked"), elsewhere) // node/linked/blockmgr-<uuid> is `outside`
      val viaLink = node.resolve("linked").resolve(s"blockmgr-$uuid")
      val local = Seq(mine.toString)
      assert(LostExecutorDirs.refusal(sameDir.toString, Set.empty, local).isEmpty)
      assert(LostExecutorDirs.refusal(beside.toString, Set.empty, local).isEmpty)
      Seq(outside, tooDeep).foreach { p =>
        assert(LostExecutorDirs.refusal(p.toString, Set.empty, local).exists(_.startsWith("not in this node's")),
          p.toString)
      }
      assert(LostExecutorDirs.refusal(viaLink.toString, Set.empty, local).contains(
          "in a directory that is a symbolic link"))
      assert(LostExecutorDirs.refusal(beside.toString, Set.empty, Nil).exists(_.startsWith("not in this node's")),
        "no local dir known: nothing is deleted")
      assert(LostExecutorDirs.refusal(s"/blockmgr-$uuid", Set.empty, Seq("/tmp")).exists(_.startsWith("not in")),
        "nothing beside a local dir at the filesystem's root")
      val asked = Seq(sameDir, beside, outside, tooDeep, viaLink).map(_.toString)
      assert(LostExecutorDirs.delete(asked, Nil, local) == ((2, 20L)))
      assert(!Files.exists(sameDir) && !Files.exists(beside) && Files.exists(outside.resolve("shuffle_0_1_0.data")) &&
        Files.exists(tooDeep.resolve("shuffle_0_1_0.data")))
      // a local dir named through a link of its own (a node's /tmp that is a link) is compared by its real path
      val alias = root.getParent.resolve("alias")
      Files.createSymbolicLink(alias, mine)
      file(sameDir, "app.jar", 3)
      assert(LostExecutorDirs.refusal(sameDir.toString, Set.empty, Seq(alias.toString)).isEmpty)
      assert(LostExecutorDirs.refusal(sameDir.toString, Set(alias.resolve(s"spark-$uuid").toString), local).contains(
          "this executor's own directory"))
    }
  }

  test("an executor's node: the named environment variable if set and not blank, else its host") {
    val env = Map("NODE_NAME" -> "node-a", "BLANK" -> " ").get _
    assert(RetentionAgent.nodeOf("NODE_NAME", env, "10.0.0.7") == "node-a")
    assert(RetentionAgent.nodeOf("BLANK", env, "10.0.0.7") == "10.0.0.7")
    assert(RetentionAgent.nodeOf("UNSET", env, "10.0.0.7") == "10.0.0.7")
    assert(RetentionAgent.nodeOf("", env, "10.0.0.7") == "10.0.0.7", "empty setting: always the host")
  }

  test("deleteTree counts what it deletes and refuses anything outside the root, or the root itself") {
    withRoot { (root, store) =>
      val d = store.executorDir("app-1", "4")
      file(d, "shuffle_2_9_0.data", 50); file(d, "shuffle_2_9_0.index", 16)
      assert(store.deleteTree(store.appDir("app-1")) == ((2, 66L)))
      assert(!Files.exists(store.appDir("app-1")))
      assert(store.deleteTree(store.appDir("nothing-here")) == ((0, 0L)))
      intercept[IllegalArgumentException](store.deleteTree(root))
      intercept[IllegalArgumentException](store.deleteTree(root.getParent))
      intercept[IllegalArgumentException](store.deleteTree(root.resolve("..").resolve("elsewhere")))
    }
  }

  test("names cannot escape the root") {
    withRoot { (root, store) =>
      assert(store.executorDir("app-1", "../../etc").startsWith(root))
      intercept[IllegalArgumentException](store.appDir(".."))
    }
  }

  test("releaseShuffle deletes one shuffle's files in every executor directory of the application") {
    withRoot { (_, store) =>
      file(store.executorDir("app-1", "1"), "shuffle_3_1_0.data", 10)
      file(store.executorDir("app-1", "2"), "shuffle_3_2_0.data", 20)
      file(store.executorDir("app-1", "2"), "shuffle_4_7_0.data", 30)
      assert(store.releaseShuffle("app-1", 3) == ((2, 30L)))
      assert(Files.exists(store.executorDir("app-1", "2").resolve("shuffle_4_7_0.data")))
    }
  }

  test("a failed retain leaves no partial copy and says what could not be retained") {
    withRoot { (root, store) =>
      val data = file(root.getParent.resolve("bm"), "shuffle_0_1_0.data", 10)
      Files.createDirectories(root)
      Files.write(root.resolve("app-1"), Array[Byte](1)) // a file where the app directory must go
      val e = intercept[IOException](store.retain("app-1", "1", "shuffle_0_1", Seq(data)))
      assert(e.getMessage.contains("cannot retain map output shuffle_0_1"))
    }
  }

  /** A source on another filesystem than the root (tmpfs), so retaining must copy; None if there is none. */
  private def otherFilesystem(root: Path): Option[Path] = {
    val shm = java.nio.file.Paths.get("/dev/shm")
    Files.createDirectories(root)
    if (Files.isDirectory(shm) && Files.getFileStore(shm) != Files.getFileStore(root))
      Some(Files.createTempDirectory(shm, "rr-src-"))
    else None
  }

  test("a full disk fails the copy with a clear error before writing a byte") {
    withRoot { (root, store) =>
      val src = otherFilesystem(root)
      assume(src.isDefined, "needs /dev/shm on another filesystem than the temp directory")
      try {
        val data = file(src.get, "shuffle_0_1_0.data", 4096)
        store.usableSpace = _ => RetainedStore.MinFreeBytes + 1000 // less than the file leaves free
        val e = intercept[IOException](store.retain("app-1", "1", "shuffle_0_1", Seq(data)))
        assert(e.getMessage.contains("disk full") && e.getMessage.contains("shuffle_0_1_0.data"), e.getMessage)
        assert(!Files.exists(store.executorDir("app-1", "1").resolve("shuffle_0_1_0.data")), "nothing written")
        store.usableSpace = _ => Long.MaxValue
        assert(store.retain("app-1", "1", "shuffle_0_1", Seq(data)) == ((1, 4096L)), "copies when there is room")
        assert(!Files.isSameFile(store.executorDir("app-1", "1").resolve("shuffle_0_1_0.data"), data.toPath))
      } finally src.foreach(d => { Files.list(d).forEach(Files.delete(_)); Files.delete(d) })
    }
  }

  test("link-only (retained.enabled=auto): a source on another filesystem is not copied, and the probe says why") {
    withRoot { (root, store) =>
      val same = Files.createDirectories(root.getParent.resolve("local"))
      assert(store.linkProblem(Seq(same.toFile)).isEmpty, "the same filesystem links")
      assert(Files.list(root).iterator.asScala.forall(p => !p.getFileName.toString.startsWith(".link-probe")))
      assert(Files.list(same).count == 0L, "the probe file is deleted")
      val src = otherFilesystem(root)
      assume(src.isDefined, "needs /dev/shm on another filesystem than the temp directory")
      try {
        val why = store.linkProblem(Seq(same.toFile, src.get.toFile))
        assert(why.exists(w => w.contains(src.get.toString) && w.contains("not on one filesystem")), why)
        assert(Files.list(src.get).count == 0L, "the probe file is deleted")
        store.linkOnly = true
        val data = file(src.get, "shuffle_0_1_0.data", 4096)
        val e = intercept[IOException](store.retain("app-1", "1", "shuffle_0_1", Seq(data)))
        assert(e.getMessage.contains("retained.enabled=auto retains by hard link only"), e.getMessage)
        assert(!Files.exists(store.executorDir("app-1", "1").resolve("shuffle_0_1_0.data")), "nothing copied")
      } finally src.foreach(d => { Files.list(d).forEach(Files.delete(_)); Files.delete(d) })
    }
  }

  test("a root that is a symbolic link, not a directory, or another user's is refused; a missing one is fine") {
    withRoot { (root, _) =>
      val base = Files.createDirectories(root.getParent.resolve("roots"))
      assert(RetainedStore.rootProblem(base.resolve("not-yet")).isEmpty)
      val mine = Files.createDirectories(base.resolve("mine"))
      assert(RetainedStore.rootProblem(mine).isEmpty)
      val link = Files.createSymbolicLink(base.resolve("link"), mine)
      assert(RetainedStore.rootProblem(link).exists(p =>
          p.contains("symbolic link") &&
            p.contains("spark.regionRecovery.retained.dir") && p.contains(mine.toString)))
      val file = Files.write(base.resolve("file"), Array[Byte](1))
      assert(RetainedStore.rootProblem(file).exists(_.contains("is not a directory")))
      // others could plant or replace files an adopter then serves
      val open = Files.createDirectories(base.resolve("open"))
      Files.setPosixFilePermissions(open, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"))
      assert(RetainedStore.rootProblem(open).exists(p => p.contains("every user") && p.contains("its group")))
      Files.setPosixFilePermissions(open, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxr-x"))
      assert(RetainedStore.rootProblem(open).exists(p => p.contains("its group") && p.contains("chmod go-w")))
      Files.setPosixFilePermissions(open, java.nio.file.attribute.PosixFilePermissions.fromString("rwxr-xr-x"))
      assert(RetainedStore.rootProblem(open).isEmpty)
      val nobody = scala.util.Try(root.getFileSystem.getUserPrincipalLookupService.lookupPrincipalByName("nobody"))
      assume(System.getProperty("user.name") == "root" && nobody.isSuccess, "giving a directory away needs root")
      val foreign = Files.createDirectories(base.resolve("foreign"))
      Files.setOwner(foreign, nobody.get)
      assert(RetainedStore.rootProblem(foreign).exists(p => p.contains("is owned by nobody, not by root")))
    }
  }

  test("releaseOutputs deletes exactly the named outputs of one executor") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      val dir = store.executorDir("app-1", "1")
      for (m <- Seq(5L, 50L)) store.retain("app-1", "1", s"shuffle_2_$m",
        Seq(file(bm, s"shuffle_2_${m}_0.data", 10),
          file(bm, s"shuffle_2_${m}_0.index", 16), file(bm, s"shuffle_2_${m}_0.checksum.ADLER32", 8)))
      assert(store.releaseOutputs("app-1", "1", Seq(OutputRef(2, 5L, 0))) == ((3, 34L)))
      val left = Using.resource(Files.list(dir))(_.iterator().asScala.map(_.getFileName.toString).toSet)
      assert(left == Set("shuffle_2_50_0.data", "shuffle_2_50_0.index", "shuffle_2_50_0.checksum.ADLER32"))
    }
  }

  /** A sweeper whose monotonic clock the test moves. */
  private final class Sweeper(store: RetainedStore, own: String) {
    var nanos = 0L
    val watch = new LeaseWatch(() => nanos)
    def advance(ms: Long): Unit = nanos += ms * 1000000L
    def sweep(now: Long, timeoutMs: Long = 30000L): Seq[(String, Int, Long)] =
      store.sweepExpired(own, now, timeoutMs, watch)
    /** Sees every lease, then again a whole timeout later: what did not change in between goes. */
    def sweepAfterQuiet(now: Long, timeoutMs: Long = 30000L): Seq[(String, Int, Long)] = {
      assert(sweep(now, timeoutMs).isEmpty, "no directory goes on first sight")
      advance(timeoutMs)
      sweep(now, timeoutMs)
    }
  }

  test("the sweep removes other applications whose lease did not change for a timeout; live ones and its own stay") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      val now = System.currentTimeMillis()
      val sweeper = new Sweeper(store, "app-own")
      for (app <- Seq("app-dead", "app-live", "app-own", "app-nolease"))
        store.retain(app, "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      store.renewLease("app-dead", now + 60000, 30000L) // what it states does not matter: it is never renewed again
      store.renewLease("app-live", now - 1, 30000L)
      store.renewLease("app-own", now - 1, 30000L)
      store.renewLease("app-gone", now - 1, 30000L) // a lease left without its directory
      Files.write(store.leaseFile("app-corrupt"), "not a number".getBytes("UTF-8"))
      Files.createDirectories(store.appDir("app-corrupt"))
      assert(sweeper.sweep(now).isEmpty, "nothing goes on first sight, whatever a lease states")
      sweeper.advance(29999L)
      store.renewLease("app-live", now + 29999L, 30000L) // renewed within the timeout
      assert(sweeper.sweep(now).isEmpty)
      sweeper.advance(1L)
      val swept = sweeper.sweep(now)
      assert(swept.map(_._1).toSet == Set("app-dead", "app-nolease", "app-corrupt"))
      assert(swept.find(_._1 == "app-dead").get._2 == 1)
      assert(namesUnder(root) == Set("app-live", "app-live.lease", "app-own", "app-own.lease"))
      sweeper.advance(29998L)
      assert(sweeper.sweep(now).isEmpty, "app-live's renewal, seen 1 ms ago, restarted its timeout")
      sweeper.advance(1L)
      assert(sweeper.sweep(now).map(_._1) == Seq("app-live"), "and it was not renewed since")
    }
  }

  test("a jumping wall clock neither expires a renewed lease nor keeps one that stopped changing") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      val now = System.currentTimeMillis()
      val sweeper = new Sweeper(store, "app-own")
      for (app <- Seq("app-behind", "app-ahead"))
        store.retain(app, "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      // writers whose clocks are ten minutes behind and ahead; the sweeper's own wall clock jumped an hour
      store.renewLease("app-behind", now - 600000L, 30000L)
      store.renewLease("app-ahead", now + 600000L, 30000L)
      val jumped = now + 3600000L
      assert(sweeper.sweep(jumped).isEmpty)
      val swept = (1 to 8).flatMap { i =>
        sweeper.advance(7500L) // a quarter of the timeout: app-behind renews, app-ahead's writer is gone
        store.renewLease("app-behind", now - 600000L + i * 7500L, 30000L)
        sweeper.sweep(jumped).map(r => (i, r._1))
      }
      assert(swept == Seq((4, "app-ahead")), "app-ahead went after 30 s unchanged, its stated expiry unread")
      assert(namesUnder(root) == Set("app-behind", "app-behind.lease"))
    }
  }

  test("a sweeper with a shorter lease timeout waits the timeout a live lease states before it takes it for expired") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      val now = System.currentTimeMillis()
      val sweeper = new Sweeper(store, "app-own") // retained.lease-timeout=2s here; app-long's is 120 s
      for (app <- Seq("app-long", "app-old-format"))
        store.retain(app, "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      store.renewLease("app-long", now + 120000L, 120000L) // renewed every 30 s by its live executors
      Files.write(store.leaseFile("app-old-format"), (now + 120000L).toString.getBytes("UTF-8")) // states no timeout
      assert(sweeper.sweep(now, 2000L).isEmpty)
      sweeper.advance(2000L)
      assert(sweeper.sweep(now, 2000L).map(_._1) == Seq("app-old-format"), "a lease stating no timeout: the sweeper's")
      sweeper.advance(27999L)
      assert(sweeper.sweep(now, 2000L).isEmpty, "app-long renews within its own 120 s: live")
      store.renewLease("app-long", now + 150000L, 120000L)
      assert(sweeper.sweep(now, 2000L).isEmpty)
      sweeper.advance(119999L)
      assert(sweeper.sweep(now, 2000L).isEmpty)
      sweeper.advance(1L)
      assert(sweeper.sweep(now, 2000L).map(_._1) == Seq("app-long"), "unchanged for its whole stated timeout")
      assert(namesUnder(root).isEmpty)
    }
  }

  test("a liveness lock tells whether its holder process is gone; the lock file is not a retained file") {
    withRoot { (_, store) =>
      assert(store.processGone("app", "1", 0L).isEmpty, "no lock file: cannot tell")
      val mine = store.holdAlive("app", "1")
      assert(store.processGone("app", "1", 50L).contains(false), "held (by this JVM)")
      mine.channel().close()
      assert(store.processGone("app", "1", 0L).contains(true), "released")
      // another process holds it (an fcntl lock, as Java's): alive until the kernel releases it at its exit
      val file = store.aliveFile("app", "2")
      Files.createFile(file)
      val holder = new ProcessBuilder("python3", "-c",
        "import fcntl, sys, time; f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX); " +
          "print('locked', flush=True); time.sleep(60)", file.toString).start()
      try {
        assert(new java.io.BufferedReader(new java.io.InputStreamReader(holder.getInputStream)).readLine() == "locked")
        assert(store.processGone("app", "2", 100L).contains(false))
        holder.destroyForcibly().waitFor()
        assert(store.processGone("app", "2", 2000L).contains(true), "the kernel released the killed process's lock")
      } finally holder.destroyForcibly()
      assert(store.deleteApp("app")._1 == 0, "lock files are not counted as retained files")
    }
  }

  test("deleteApp removes the application's directory and lease, nothing else") {
    withRoot { (root, store) =>
      val bm = root.getParent.resolve("bm")
      store.retain("app-1", "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      store.retain("app-2", "1", "shuffle_0_1", Seq(file(bm, "shuffle_0_1_0.data", 10)))
      store.renewLease("app-1", 5L, 30000L)
      assert(store.deleteApp("app-1") == ((1, 10L)))
      assert(!Files.exists(store.appDir("app-1")) && !Files.exists(store.leaseFile("app-1")))
      assert(Files.exists(store.executorDir("app-2", "1").resolve("shuffle_0_1_0.data")))
    }
  }

  private def namesUnder(root: Path): Set[String] =
    Using.resource(Files.list(root))(_.iterator().asScala.map(_.getFileName.toString).toSet)

  /**
   * A dead application's directory on this host, its lease expired a minute ago: one 10-byte file,
   * from a source of its own (a hard link shares the inode, so rewriting a shared source changes it).
   */
  private def deadApp(root: Path, store: RetainedStore, app: String, now: Long): Unit = {
    store.retain(app, "1", "shuffle_0_1", Seq(file(root.getParent.resolve("bm-" + app), "shuffle_0_1_0.data", 10)))
    store.renewLease(app, now - 60000, 30000L)
  }

  test("a kept directory survives the sweep after its lease expired, until its deadline") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      deadApp(root, store, "app-kept", now)
      store.markKept("app-kept", now + 60000, "nightly-etl")
      assert(store.keptUntil("app-kept") == Some((now + 60000, "nightly-etl")))
      val sweeper = new Sweeper(store, "app-other")
      assert(sweeper.sweepAfterQuiet(now).isEmpty)
      assert(namesUnder(root) == Set("app-kept", "app-kept.lease", "app-kept.keep"), "kept with lease and mark")
      assert(sweeper.sweep(now + 60000).isEmpty, "the deadline itself still keeps")
    }
  }

  test("after its deadline a kept directory is swept with its lease and its mark") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      deadApp(root, store, "app-kept", now)
      store.markKept("app-kept", now - 1, "nightly-etl")
      assert(new Sweeper(store, "app-other").sweepAfterQuiet(now) == Seq(("app-kept", 1, 10L)))
      assert(namesUnder(root).isEmpty)
    }
  }

  test("a past deadline does not take a directory whose lease is live; the own application is never swept") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      deadApp(root, store, "app-back", now)
      store.markKept("app-back", now - 1, "j")
      deadApp(root, store, "app-own", now)
      store.markKept("app-own", now - 1, "j")
      val sweeper = new Sweeper(store, "app-own")
      assert(sweeper.sweep(now).isEmpty)
      sweeper.advance(30000L)
      store.renewLease("app-back", now + 60000, 30000L) // its driver answered again
      assert(sweeper.sweep(now).isEmpty)
      assert(namesUnder(root) ==
        Set("app-back", "app-back.lease", "app-back.keep", "app-own", "app-own.lease", "app-own.keep"))
      store.deleteApp("app-own")
      Files.write(store.keepFile("app-own"),
        s"${now - 1}\tj".getBytes("UTF-8")) // nor is an own mark without a directory
      assert(sweeper.sweep(now).isEmpty)
      assert(Files.exists(store.keepFile("app-own")))
    }
  }

  test("a keep mark without a directory is removed once expired, kept before") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      // markKept writes no mark without a directory; one left by a race or an earlier version is swept
      Files.createDirectories(root)
      Files.write(store.keepFile("app-future"), s"${now + 60000}\tj".getBytes("UTF-8"))
      Files.write(store.keepFile("app-past"), s"${now - 1}\tj".getBytes("UTF-8"))
      store.markKept("app-none", now + 60000, "j")
      assert(new Sweeper(store, "app-own").sweep(now).isEmpty, "a mark's deadline is its own: no wait")
      assert(namesUnder(root) == Set("app-future.keep"))
    }
  }

  test("an unreadable keep mark counts as expired: it keeps nothing") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      deadApp(root, store, "app-corrupt", now)
      Files.write(store.keepFile("app-corrupt"), "not a deadline".getBytes("UTF-8")) // written just now
      Files.write(store.keepFile("app-nojob"), s"${now + 60000}\t".getBytes("UTF-8"))
      assert(store.keptUntil("app-corrupt").isEmpty && store.keptUntil("app-nojob").isEmpty)
      assert(store.keptApps().isEmpty)
      assert(new Sweeper(store, "app-own").sweepAfterQuiet(now).map(_._1) == Seq("app-corrupt"))
      assert(namesUnder(root).isEmpty, "directory, lease and both marks gone")
    }
  }

  test("deleteApp removes the keep mark too") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      deadApp(root, store, "app-1", now)
      store.markKept("app-1", now + 60000, "j")
      assert(store.deleteApp("app-1") == ((1, 10L)))
      assert(namesUnder(root).isEmpty)
      assert(store.keptUntil("app-1").isEmpty)
    }
  }

  test("keptApps lists every kept directory with its files and bytes") {
    withRoot { (root, store) =>
      val now = System.currentTimeMillis()
      val bm = root.getParent.resolve("bm")
      store.retain("app-b", "1", "shuffle_0_1",
        Seq(file(bm, "shuffle_0_1_0.data", 100), file(bm, "shuffle_0_1_0.index", 16)))
      store.retain("app-b", "2", "shuffle_0_2", Seq(file(bm, "shuffle_0_2_0.data", 50)))
      store.markKept("app-b", now + 60000, "job-b")
      deadApp(root, store, "app-a", now)
      store.markKept("app-a", now - 1, "job-a") // past its deadline, not yet swept: listed, the caller compares
      deadApp(root, store, "app-unkept", now)
      store.markKept("app-nodir", now + 60000, "job-c")
      assert(store.keptApps() == Seq(("app-a", now - 1, "job-a", 1, 10L), ("app-b", now + 60000, "job-b", 3, 166L)))
      store.markKept("app-b", now + 120000, "job-b") // a later mark replaces the earlier one
      assert(store.keptUntil("app-b") == Some((now + 120000, "job-b")))
      assert(!namesUnder(root).exists(_.endsWith(".tmp")))
    }
  }

  test("markKept refuses a job id that would break the mark's format") {
    withRoot { (_, store) =>
      intercept[IllegalArgumentException](store.markKept("app-1", 1L, ""))
      intercept[IllegalArgumentException](store.markKept("app-1", 1L, "a\tb"))
    }
  }

  test("a lease or keep mark interrupted mid-write leaves the old one and no temporary file") {
    withRoot { (root, store) =>
      store.renewLease("app-1", 1L, 30000L)
      Files.createDirectories(store.appDir("app-1"))
      store.markKept("app-1", 2L, "job")
      // a stopping executor interrupts its lease thread: the write's channel closes under it
      Thread.currentThread().interrupt()
      try intercept[java.nio.channels.ClosedByInterruptException](store.renewLease("app-1", 3L, 30000L))
      finally Thread.interrupted()
      Thread.currentThread().interrupt()
      try intercept[java.nio.channels.ClosedByInterruptException](store.markKept("app-1", 4L, "job"))
      finally Thread.interrupted()
      assert(!namesUnder(root).exists(_.endsWith(".tmp")))
      assert(new String(Files.readAllBytes(store.leaseFile("app-1"))) == "1 30000")
      assert(store.keptUntil("app-1") == Some((2L, "job")))
    }
  }

  test("leases and keep marks are the owner's alone (0600), whatever the umask") {
    withRoot { (root, store) =>
      store.renewLease("app-1", 1L, 30000L)
      Files.createDirectories(store.appDir("app-1"))
      store.markKept("app-1", 2L, "job")
      Seq(store.leaseFile("app-1"), store.keepFile("app-1")).foreach { f =>
        assert(java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(f)) == "rw-------",
          f)
      }
      store.renewLease("app-1", 3L, 30000L) // renewed: still the owner's alone
      assert(java.nio.file.attribute.PosixFilePermissions.toString(
        Files.getPosixFilePermissions(store.leaseFile("app-1"))) == "rw-------")
    }
  }

  test("an agent's request is read back only if it is made of a request's own classes") {
    val request = RecoverRequest("app.1", "3", Array(RecoverRef(1, 2L, 3, 4L, 5, 6L)))
    assert(AgentEnvelope.unwrap(AgentEnvelope.wrap(request)).asInstanceOf[RecoverRequest].outputs.head.mapId == 4L)
    val withList = PurgeRequest("app.1", "3", fence = true, sparkDirs = Seq("/a/blockmgr-1", "/a/spark-2"))
    assert(AgentEnvelope.unwrap(AgentEnvelope.wrap(withList)) == withList)
    val bm = org.apache.spark.regionrecovery.TestLocations.blockManagerId("1", "127.0.0.1", 7000)
    val moved = OutputsMoved("3", bm, Array(1), Array(2L), complete = true, batches = 1)
    assert(AgentEnvelope.unwrap(AgentEnvelope.wrap(moved)).asInstanceOf[OutputsMoved].to == bm)
    // anything else is rejected before it is built: here a plain JDK object where a request should be
    val bytes = new java.io.ByteArrayOutputStream()
    val out = new java.io.ObjectOutputStream(bytes)
    out.writeObject(new java.util.Date(0L))
    out.close()
    intercept[java.io.InvalidClassException](AgentEnvelope.unwrap(bytes.toByteArray))
  }
}
