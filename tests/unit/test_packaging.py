"""spark_settings / configure / jar_path, with pyspark's real SparkSession.Builder and no JVM.

SparkSession.Builder() and .config(...) only fill a dict (Builder._options); a JVM starts at
getOrCreate(). test_builder_starts_no_jvm checks that, so the other tests can use the real builder.
"""

from __future__ import annotations

import logging
import os

import pytest
from pyspark import SparkContext
from pyspark.sql import SparkSession

import region_recovery
from region_recovery import configure
from region_recovery._version import __version__
from region_recovery.errors import JarNotFoundError, SparkConnectNotSupportedError
from region_recovery.jvm import inherited_conf, packaging
from region_recovery.jvm.packaging import (
    DEFAULT_RETAINED_CAP,
    JAR_ENV,
    LOCAL_DISK_SHUFFLE_IO,
    MAVEN_COORDINATE,
    PLUGIN_CLASS,
    QUERY_LISTENER_CLASS,
    RETAINED_CAP_KEY,
    RETAINED_KEY,
    SHUFFLE_IO_CLASS,
    SQL_EXTENSION_CLASS,
    jar_path,
    spark_settings,
)

SHUFFLE_IO_KEY = "spark.shuffle.sort.io.plugin.class"
QUEUE_KEY = "spark.scheduler.listenerbus.eventqueue.regionRecovery.capacity"
JAR_NAME = f"region-recovery-spark_2.13-{__version__}.jar"


def _child_pids() -> set:
    """Processes whose parent is this one (a JVM launched by pyspark would be one)."""
    me = str(os.getpid())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            found.add(int(entry))
    return found


@pytest.fixture(autouse=True)
def _no_connect_env(monkeypatch, tmp_path):
    for key in ("SPARK_REMOTE", "MASTER", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
        monkeypatch.delenv(key, raising=False)
    # nothing inherited unless a test says so: no defaults file, no gateway an earlier test left
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "no-conf"))
    monkeypatch.setattr(inherited_conf, "_running_jvm_properties", dict)


@pytest.fixture
def jar(tmp_path, monkeypatch):
    """A jar file named by REGION_RECOVERY_JAR (its content does not matter to the settings)."""
    path = tmp_path / "dist" / JAR_NAME
    path.parent.mkdir()
    path.write_bytes(b"PK\x05\x06" + b"\x00" * 18)
    monkeypatch.setenv(JAR_ENV, str(path))
    return str(path)


@pytest.fixture
def package_dir(tmp_path, monkeypatch):
    """Makes jar_path look for the bundled jar under tmp_path/pkg/jars instead of the real package."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    monkeypatch.setattr(packaging, "BUNDLED_JARS_DIR", str(pkg / "jars"))
    monkeypatch.delenv(JAR_ENV, raising=False)
    return pkg


def builder() -> SparkSession.Builder:
    return SparkSession.builder.master("local[2]").appName("unit")


# ---- the builder itself ----------------------------------------------------------------------


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to list child processes")
def test_builder_starts_no_jvm(jar):
    # Order-independent: an earlier test in this process may have left a gateway; none may appear here.
    children = _child_pids()
    gateway, context = SparkContext._gateway, SparkContext._active_spark_context
    b = configure(SparkSession.Builder().master("local[2]").config("spark.x", "1"))
    assert isinstance(b, SparkSession.Builder)
    assert b._options["spark.plugins"] == PLUGIN_CLASS
    assert SparkContext._gateway is gateway and SparkContext._active_spark_context is context
    assert _child_pids() - children == set()


def test_configure_returns_the_same_builder_with_all_settings(jar):
    b = builder()
    assert configure(b) is b
    opts = b._options
    assert opts["spark.plugins"] == PLUGIN_CLASS
    assert opts["spark.jars"] == jar
    assert opts["spark.driver.extraClassPath"] == jar
    assert "spark.executor.extraClassPath" not in opts, "a path of the driver's machine is not sent to executors"
    assert opts[SHUFFLE_IO_KEY] == SHUFFLE_IO_CLASS
    assert opts[QUEUE_KEY] == "20000"
    assert opts["spark.sql.extensions"] == SQL_EXTENSION_CLASS
    assert opts["spark.sql.queryExecutionListeners"] == QUERY_LISTENER_CLASS
    assert "spark.jars.packages" not in opts
    assert opts[RETAINED_KEY] == "auto" and opts[RETAINED_CAP_KEY] == DEFAULT_RETAINED_CAP == "2g"
    assert (opts["spark.master"], opts["spark.app.name"]) == ("local[2]", "unit")  # untouched


def test_configure_is_exported_at_package_level(jar):
    assert region_recovery.configure is configure
    assert region_recovery.configure(builder())._options["spark.plugins"] == PLUGIN_CLASS


def test_configure_twice_adds_nothing_twice(jar):
    b = configure(configure(builder()))
    assert b._options["spark.plugins"] == PLUGIN_CLASS
    assert b._options["spark.jars"] == jar
    assert b._options["spark.driver.extraClassPath"] == jar


# ---- user settings are kept ------------------------------------------------------------------


def test_user_plugins_and_jars_are_kept_and_ours_appended(jar):
    b = (
        builder()
        .config("spark.plugins", "com.example.MetricsPlugin")
        .config("spark.jars", "/opt/libs/a.jar,/opt/libs/b.jar")
        .config("spark.driver.extraClassPath", "/opt/libs/a.jar")
        .config("spark.executor.extraClassPath", f"/opt/x.jar{os.pathsep}/opt/y.jar")
    )
    configure(b)
    opts = b._options
    assert opts["spark.plugins"] == f"com.example.MetricsPlugin,{PLUGIN_CLASS}"
    assert opts["spark.jars"] == f"/opt/libs/a.jar,/opt/libs/b.jar,{jar}"
    assert opts["spark.driver.extraClassPath"] == f"/opt/libs/a.jar{os.pathsep}{jar}"
    assert opts["spark.executor.extraClassPath"] == f"/opt/x.jar{os.pathsep}/opt/y.jar", "left alone"


def test_user_sql_extensions_and_listeners_are_kept_and_ours_appended(jar):
    b = configure(
        builder()
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.queryExecutionListeners", "com.example.Audit")
    )
    assert b._options["spark.sql.extensions"] == f"io.delta.sql.DeltaSparkSessionExtension,{SQL_EXTENSION_CLASS}"
    assert b._options["spark.sql.queryExecutionListeners"] == f"com.example.Audit,{QUERY_LISTENER_CLASS}"


def test_entries_already_present_are_not_duplicated(jar):
    b = (
        builder()
        .config("spark.plugins", f"com.example.MetricsPlugin, {PLUGIN_CLASS}")
        .config("spark.jars", f"{jar},/opt/libs/a.jar")
        .config("spark.driver.extraClassPath", jar)
    )
    configure(b)
    opts = b._options
    assert opts["spark.plugins"] == f"com.example.MetricsPlugin, {PLUGIN_CLASS}"
    assert opts["spark.jars"] == f"{jar},/opt/libs/a.jar"
    assert opts["spark.driver.extraClassPath"] == jar
    assert "spark.executor.extraClassPath" not in opts


def test_spark_settings_only_returns_what_changes(jar):
    existing = {
        "spark.plugins": PLUGIN_CLASS,
        "spark.jars": jar,
        "spark.driver.extraClassPath": jar,
        SHUFFLE_IO_KEY: SHUFFLE_IO_CLASS,
        QUEUE_KEY: "500",
        "spark.sql.extensions": SQL_EXTENSION_CLASS,
        "spark.sql.queryExecutionListeners": QUERY_LISTENER_CLASS,
        RETAINED_KEY: "false",
    }
    assert spark_settings(existing) == {}


@pytest.mark.parametrize("value", ["true", "false", "auto", "FALSE"])
def test_a_user_retention_setting_is_kept_and_no_cap_is_added(jar, value):
    opts = configure(builder().config(RETAINED_KEY, value))._options
    assert opts[RETAINED_KEY] == value and RETAINED_CAP_KEY not in opts


def test_a_user_cap_is_kept_with_the_auto_default(jar):
    opts = configure(builder().config(RETAINED_CAP_KEY, "512 MiB"))._options
    assert (opts[RETAINED_KEY], opts[RETAINED_CAP_KEY]) == ("auto", "512 MiB")


def test_without_our_shuffle_io_retention_is_not_turned_on(jar):
    opts = configure(builder(), shuffle_io=False)._options
    assert RETAINED_KEY not in opts and RETAINED_CAP_KEY not in opts


def test_empty_list_values_are_replaced_not_joined(jar):
    out = spark_settings({"spark.plugins": "", "spark.jars": " , "})
    assert out["spark.plugins"] == PLUGIN_CLASS
    assert out["spark.jars"] == jar


def test_user_queue_capacity_is_kept(jar):
    b = configure(builder().config(QUEUE_KEY, "5000"))
    assert b._options[QUEUE_KEY] == "5000"


def test_explicit_local_disk_shuffle_io_is_replaced_by_the_wrapper(jar):
    b = configure(builder().config(SHUFFLE_IO_KEY, LOCAL_DISK_SHUFFLE_IO))
    assert b._options[SHUFFLE_IO_KEY] == SHUFFLE_IO_CLASS


def test_user_shuffle_io_plugin_is_left_alone_with_a_warning(jar, caplog):
    custom = "org.apache.spark.shuffle.celeborn.CelebornShuffleDataIO"
    with caplog.at_level(logging.WARNING, logger="region_recovery"):
        b = configure(builder().config(SHUFFLE_IO_KEY, custom))
    assert b._options[SHUFFLE_IO_KEY] == custom
    warnings = [r for r in caplog.records if r.name == "region_recovery" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert custom in warnings[0].getMessage()
    assert "shuffle.sort.io.plugin.class" in warnings[0].getMessage()
    assert b._options["spark.plugins"] == PLUGIN_CLASS  # the rest is still configured


def test_our_shuffle_io_already_set_gives_no_warning(jar, caplog):
    with caplog.at_level(logging.WARNING, logger="region_recovery"):
        b = configure(builder().config(SHUFFLE_IO_KEY, SHUFFLE_IO_CLASS))
    assert b._options[SHUFFLE_IO_KEY] == SHUFFLE_IO_CLASS
    assert [r for r in caplog.records if r.name == "region_recovery"] == []


def test_shuffle_io_false_leaves_the_key_out(jar, caplog):
    with caplog.at_level(logging.WARNING, logger="region_recovery"):
        b = configure(builder().config(SHUFFLE_IO_KEY, "com.example.Custom"), shuffle_io=False)
    assert b._options[SHUFFLE_IO_KEY] == "com.example.Custom"
    assert caplog.records == []
    assert SHUFFLE_IO_KEY not in configure(builder(), shuffle_io=False)._options


# ---- Maven packages --------------------------------------------------------------------------


def test_use_packages_sets_the_coordinate_and_no_jar_path(package_dir):
    # No jar anywhere: resolving through --packages must not need one.
    b = configure(builder(), use_packages=True)
    opts = b._options
    assert opts["spark.jars.packages"] == MAVEN_COORDINATE
    assert MAVEN_COORDINATE == f"io.regionrecovery:region-recovery-spark_2.13:{__version__}"
    for key in ("spark.jars", "spark.driver.extraClassPath", "spark.executor.extraClassPath"):
        assert key not in opts
    assert opts["spark.plugins"] == PLUGIN_CLASS
    assert opts[SHUFFLE_IO_KEY] == SHUFFLE_IO_CLASS


def test_use_packages_appends_to_user_packages(package_dir):
    b = configure(builder().config("spark.jars.packages", "org.example:lib:1.0"), use_packages=True)
    assert b._options["spark.jars.packages"] == f"org.example:lib:1.0,{MAVEN_COORDINATE}"


# ---- where the jar is ------------------------------------------------------------------------


def test_env_jar_is_used_and_made_absolute(tmp_path, monkeypatch):
    (tmp_path / "my.jar").write_bytes(b"PK")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(JAR_ENV, "my.jar")
    assert jar_path() == str(tmp_path / "my.jar")


def test_env_jar_pointing_at_a_missing_file(tmp_path, monkeypatch):
    missing = str(tmp_path / "nope" / JAR_NAME)
    monkeypatch.setenv(JAR_ENV, missing)
    with pytest.raises(JarNotFoundError) as info:
        jar_path()
    assert JAR_ENV in str(info.value) and missing in str(info.value)
    with pytest.raises(JarNotFoundError):
        configure(builder())


def test_env_jar_pointing_at_a_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(JAR_ENV, str(tmp_path))
    with pytest.raises(JarNotFoundError):
        jar_path()


def test_bundled_jar_is_found_in_the_package(package_dir):
    jars = package_dir / "jars"
    jars.mkdir()
    (jars / JAR_NAME).write_bytes(b"PK")
    (jars / "region-recovery-spark_2.13-0.0.1.jar").write_bytes(b"PK")  # another version: ignored
    assert jar_path() == str(jars / JAR_NAME)
    assert configure(builder())._options["spark.jars"] == str(jars / JAR_NAME)


def test_missing_bundled_jar_names_the_build_script(package_dir):
    (package_dir / "jars").mkdir()
    (package_dir / "jars" / "region-recovery-spark_2.13-0.0.1.jar").write_bytes(b"PK")  # wrong version
    with pytest.raises(JarNotFoundError) as info:
        jar_path()
    message = str(info.value)
    assert "scripts/build-jar.sh" in message
    assert JAR_NAME in message
    assert str(package_dir / "jars") in message
    assert JAR_ENV in message
    with pytest.raises(JarNotFoundError):
        configure(builder())


def test_empty_env_var_falls_back_to_the_bundled_jar(package_dir, monkeypatch):
    monkeypatch.setenv(JAR_ENV, "")
    with pytest.raises(JarNotFoundError, match="scripts/build-jar.sh"):
        jar_path()


# ---- wrong builders --------------------------------------------------------------------------


@pytest.mark.parametrize("thing", [object(), "local[2]", {"spark.master": "local"}, None])
def test_configure_rejects_a_non_builder(thing, jar):
    with pytest.raises(TypeError, match="SparkSession.Builder"):
        configure(thing)


def test_configure_rejects_a_builder_class_instead_of_an_instance(jar):
    with pytest.raises(TypeError):
        configure(SparkSession.Builder)


def test_a_builder_for_a_running_connect_server_is_refused_and_pointed_at_the_server_flags(jar):
    b = SparkSession.Builder().remote("sc://localhost:15002")
    with pytest.raises(SparkConnectNotSupportedError) as info:
        configure(b)
    assert "submit-args --connect" in str(info.value) and "docs/connect.md" in str(info.value)
    assert "spark.plugins" not in b._options and "spark.jars" not in b._options  # nothing half-configured


def test_spark_remote_env_is_refused(jar, monkeypatch):
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost:15002")
    with pytest.raises(SparkConnectNotSupportedError):
        configure(SparkSession.Builder().appName("x"))


def test_a_local_connect_server_gets_the_plugin_where_pyspark_keeps_it_and_the_extension(jar):
    # pyspark replaces spark.plugins with Connect's own when it starts a local server: the plugin goes into
    # spark.plugins.defaultList, which Spark prepends, and the extension lets clients attach
    opts = configure(SparkSession.Builder().remote("local-cluster[2,1,1024]"))._options
    assert "spark.plugins" not in opts and opts[packaging.PLUGINS_DEFAULT_LIST] == PLUGIN_CLASS
    assert opts[packaging.CONNECT_EXTENSION_KEY] == packaging.CONNECT_EXTENSION_CLASS
    assert opts["spark.shuffle.sort.io.plugin.class"] == packaging.SHUFFLE_IO_CLASS
    assert opts[packaging.RETAINED_KEY] == "auto"


def test_connect_server_flags_append_to_extensions_already_set(jar):
    out = packaging.connect_settings({packaging.CONNECT_EXTENSION_KEY: "io.delta.connect.DeltaRelationPlugin"})
    assert out[packaging.CONNECT_EXTENSION_KEY] == (
        "io.delta.connect.DeltaRelationPlugin," + packaging.CONNECT_EXTENSION_CLASS
    )
    assert out["spark.plugins"] == PLUGIN_CLASS, "a server started by spark-submit keeps spark.plugins"
    again = packaging.connect_settings({packaging.CONNECT_EXTENSION_KEY: packaging.CONNECT_EXTENSION_CLASS})
    assert packaging.CONNECT_EXTENSION_KEY not in again


# ---- settings beneath the builder (spark-defaults.conf, spark-submit --conf) ----------------------


def test_cluster_wide_list_values_are_extended_not_replaced(jar, tmp_path, monkeypatch):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "# cluster-wide\n"
        "spark.sql.extensions   io.delta.sql.DeltaSparkSessionExtension\n"
        "spark.plugins=com.example.ClusterPlugin\n"
        "spark.driver.extraClassPath: /opt/cluster/lib/*\n"
        "spark.regionRecovery.retained.enabled false\n"
    )
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    opts = configure(builder())._options
    assert opts["spark.sql.extensions"] == f"io.delta.sql.DeltaSparkSessionExtension,{SQL_EXTENSION_CLASS}"
    assert opts["spark.plugins"] == f"com.example.ClusterPlugin,{PLUGIN_CLASS}"
    assert opts["spark.driver.extraClassPath"] == f"/opt/cluster/lib/*{os.pathsep}{jar}"
    assert RETAINED_KEY not in opts, "a cluster-wide choice is not overridden by configure()'s default"


def test_submit_args_conf_and_flags_are_merged_and_the_builder_wins(jar, tmp_path, monkeypatch):
    props = tmp_path / "job.properties"
    props.write_text("spark.sql.extensions=com.example.FromFile\n")
    monkeypatch.setenv(
        "PYSPARK_SUBMIT_ARGS",
        f"--properties-file {props} --conf spark.plugins=com.example.Submitted -c 'spark.jars=/a b.jar' "
        "--packages org.example:lib:1.0 pyspark-shell",
    )
    opts = configure(builder().config("spark.plugins", "com.example.OnBuilder"))._options
    assert opts["spark.sql.extensions"] == f"com.example.FromFile,{SQL_EXTENSION_CLASS}"
    assert opts["spark.plugins"] == f"com.example.OnBuilder,{PLUGIN_CLASS}", "the builder's value wins"
    assert opts["spark.jars"] == f"/a b.jar,{jar}"
    assert "spark.jars.packages" not in opts, "not ours to set without use_packages"


def test_a_shuffle_io_plugin_set_in_the_defaults_file_gets_the_warning(jar, tmp_path, monkeypatch, caplog):
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(f"{SHUFFLE_IO_KEY} com.example.RemoteShuffleDataIO\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    with caplog.at_level(logging.WARNING, logger="region_recovery"):
        opts = configure(builder())._options
    assert SHUFFLE_IO_KEY not in opts
    assert any("com.example.RemoteShuffleDataIO" in r.getMessage() for r in caplog.records)


def test_a_running_jvm_s_system_properties_are_merged(jar, monkeypatch):
    monkeypatch.setattr(inherited_conf, "_running_jvm_properties", lambda: {"spark.plugins": "com.example.P"})
    assert configure(builder())._options["spark.plugins"] == f"com.example.P,{PLUGIN_CLASS}"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a 1\nb=2\nc:3\n", {"a": "1", "b": "2", "c": "3"}),
        ("# comment\n! also\n\n  k   =  v w  \n", {"k": "v w"}),
        ("k first \\\n   second\n", {"k": "first second"}),
        ("key\n", {"key": ""}),
    ],
)
def test_properties_are_read_as_java_reads_them(text, expected):
    assert inherited_conf.parse_properties(text) == expected


def test_a_defaults_path_that_is_no_file_is_skipped_bad_submit_args_warn(jar, tmp_path, monkeypatch, caplog):
    conf_dir = tmp_path / "conf"
    (conf_dir / "spark-defaults.conf").mkdir(parents=True)  # a directory where the file should be
    monkeypatch.setenv("SPARK_CONF_DIR", str(conf_dir))
    assert configure(builder())._options["spark.plugins"] == PLUGIN_CLASS
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf 'unterminated")
    with caplog.at_level(logging.WARNING, logger="region_recovery"):
        configure(builder())
    assert any("PYSPARK_SUBMIT_ARGS cannot be split" in r.getMessage() for r in caplog.records)


# ---- the README's spark-submit block ---------------------------------------------------------


def test_readme_spark_submit_block_is_what_submit_args_prints(package_dir):
    """Copying the README's block enables exactly what configure() enables (retention included)."""
    from pathlib import Path

    from region_recovery.cli.submit_args import flags

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme[readme.index("### On a cluster (spark-submit)") :]
    start = section.index("```bash\n") + len("```bash\n")
    block = section[start : section.index("\n```", start)]
    lines = [line.strip().removesuffix("\\").strip() for line in block.splitlines()]
    assert lines[0] == "spark-submit" and lines[-1] == "your_job.py", block
    assert lines[1:-1] == flags(use_packages=True)
    assert "--conf spark.regionRecovery.retained.enabled=auto" in lines


def test_submit_args_send_no_path_of_this_machine_to_executors(jar):
    from region_recovery.cli.submit_args import flags

    bundled = flags(use_packages=False)
    assert f"--conf spark.jars={jar}" in bundled and f"--conf spark.driver.extraClassPath={jar}" in bundled
    assert not any("spark.executor.extraClassPath" in f for f in bundled)


def test_submit_args_formats_have_no_shell_continuations_and_say_the_same(jar, capsys):
    """`spark-submit $(region-recovery submit-args) app.py` gets the flags as words; conf and json say the same."""
    import json
    import shlex

    from region_recovery.cli import main
    from region_recovery.cli.submit_args import settings

    def printed(*args: str) -> str:
        assert main(["submit-args", *args]) == 0
        return capsys.readouterr().out

    expected = settings(use_packages=False)
    words = shlex.split(printed())
    assert "\\" not in words and len(words) == 2 * len(expected)
    assert (
        dict(w.split("=", 1) for flag, w in zip(words[::2], words[1::2], strict=True) if flag == "--conf") == expected
    )
    conf = dict(line.split(" ", 1) for line in printed("--format", "conf").splitlines())
    assert conf == expected
    assert json.loads(printed("--format", "json")) == expected
    assert json.loads(printed("--format", "json", "--packages"))["spark.jars.packages"].startswith("io.")
    assert shlex.split(printed("--packages"))[0] == "--packages"
