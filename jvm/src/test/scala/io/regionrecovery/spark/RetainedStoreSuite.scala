package io.regionrecovery.spark

import java.io.{File, IOException}
import java.nio.file.{Files, Path}
import java.nio.file.attribute.PosixFilePermissions

import org.scalatest.funsuite.AnyFunSuite

class RetainedStoreSuite extends AnyFunSuite {
  private def withRoot(f: (Path, RetainedStore) => Unit): Unit = {
    val tmp = Files.createTempDirectory("rr-store-")
    val root = tmp.resolve("retained")
    try f(root, new RetainedStore(root.toAbsolutePath.normalize())) finally {
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
      val (files, bytes) = store.retain("app-1", "3", "shuffle_1_5", Seq(data, index, new File(blockmgr.toFile, "absent")))
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
}
