"""Python and Scala declare every spark.regionRecovery.* key once each; this proves they agree.

Runs the plugin's ``io.regionrecovery.spark.config.ConfigContract`` main from the real jar (a JVM
with only Scala's library on the class path, about a second) and compares, key by key: type,
default, accepted values, choices, minimum, deprecated names and which side reads it; then feeds
both parsers the same raw values (valid and invalid forms of every type) and compares the results.
A change to one side alone fails here.
"""

from __future__ import annotations

import glob
import json
import math
import os
import shutil
import subprocess

import pytest

from region_recovery import config, jar_path

MAIN = "io.regionrecovery.spark.config.ConfigContract"

# raw values tried on every key of a type; each side must accept or reject each one alike (no line breaks:
# the parse mode reads one key<TAB>value per line)
PROBES = {
    "boolean": ["true", "false", "TRUE", " False ", "yes", "1", "", "truee", "\u00a0true", "\ttrue\x00"],
    "int": [
        *["0", "1", "-1", "+7", "100000", " 42 ", "1.5", "ten", "", "2147483647", "2147483648", "-2147483648"],
        *["-2147483649", "9" * 30, "+" + "0" * 5000 + "3", "\u0663", "1\u0660", "\u00a05", "\t5\x0b"],
    ],
    "duration": [
        "0",
        "1",
        "500",
        "500ms",
        "10 s",
        "10s",
        "1 min",
        "1min",
        "2m",
        "1 h",
        "1d",
        "3 days",
        "120s",
        "999 ms",
        "1000",
        "-5 s",
        "1.5s",
        "10 parsecs",
        "",
        "s",
        "10 S",
        "7 Milliseconds",
        "10\u0663s",
        "\uff11 s",
        "\u00a010 s",
        "10\u2003s",
        "\x0010 s\x1f",
        "9223372036854775807",
        "9223372036854775808",
        "106751991167 d",
        "106751991168 d",
        "1" + "0" * 40 + " ms",
        "0" * 5000 + "12 s",
    ],
    "bytes": [
        *["0", "1024", "64m", "64 MiB", "1g", "2GB", "1 t", "1p", "512 kib", "-1", "1.5g", "10 x", "", "b"],
        *["512 MiB", "512MiB", "1 KiB", "2 kb", "3 Mb", "4 GiB", "1 TiB", "1 tb", "1 PiB", "1 PB", "2 bytes"],
        *["8191 p", "8192 p", "9223372036854775807", "9223372036854775808", "1 \u212ab", "\u0665m", "5 MeB"],
    ],
    "double": [
        *["1.5", "2", "1", "0", "0.5", "1e3", "1E-2", ".5", "5.", "-0.1", "1.01", "nan", "inf", "x", ""],
        *["1.\u0665", "\u0662", "\u00a02", "\t2\x0b"],
    ],
    "choice": [],  # filled per key from its aliases, plus the probes below
    "int-or-unlimited": [
        *["1", "4", "0", "-3", "infinite", "unlimited", "Infinite", "UNLIMITED", "many", "", "2147483648"],
        *["\u0663", "\u00a0unlimited", "\x01infinite"],
    ],
    "path": ["/tmp/x", " /data/spark ", "relative/dir", "./x", "", "/", "\u00a0/tmp", "\x1f/tmp\x00"],
    "job-id": ["nightly-etl", " a.b_c-1 ", "", ".", "..", "a/b", "x" * 128, "x" * 129, "é", "job id"],
    "setting-names": [
        *["", " ", "spark.files", " spark.files , spark.myjob.* ", "spark.a,spark.b", "spark.a,", ",", "a b"],
        *["spark.*", "*", "spark.x*y", "spark.é", "spark.a;rm", "\u00a0spark.a", "\x1fspark.a\x00"],
    ],
    "env-name": ["NODE_NAME", " _X1 ", "", "1NODE", "NODE-NAME", "a.b", "x" * 128, "x" * 129, "é", "\u00a0NODE"],
    "uri": ["/tmp/jobs", "hdfs://nn:8020/jobs", "file:/tmp/x", "s3a://bucket/p", "", "relative", "1x://y", "hdfs:"],
}
CHOICE_EXTRA = ["", "nonsense", "REGION", "Fixed-Delay", "JOB-END", "\u00a0full", "\tfull\x00"]


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not candidate:
        pytest.fail("no java on PATH: the contract test runs the plugin's ConfigContract")
    return candidate


def _classpath() -> str:
    import pyspark

    scala = glob.glob(os.path.join(os.path.dirname(pyspark.__file__), "jars", "scala-library-*.jar"))
    assert scala, "pyspark's jars/ has no scala-library jar"
    return os.pathsep.join([jar_path(), *scala])


def _run(mode: str, stdin: str = "") -> str:
    proc = subprocess.run(
        [_java(), "-cp", _classpath(), MAIN, mode], input=stdin, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"ConfigContract {mode} failed:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def scala_declarations() -> dict:
    return {d["key"]: d for d in json.loads(_run("declarations"))}


def test_both_sides_declare_the_same_keys(scala_declarations):
    python_keys = {k.name for k in config.registered_keys()}
    assert sorted(python_keys - set(scala_declarations)) == [], "declared in Python only"
    assert sorted(set(scala_declarations) - python_keys) == [], "declared in Scala only"


@pytest.mark.parametrize("key", sorted(k.name for k in config.registered_keys()))
def test_declarations_agree(scala_declarations, key):
    python = next(k for k in config.registered_keys() if k.name == key).describe()
    scala = scala_declarations.get(key)
    assert scala is not None, f"{key} is not declared in Scala"
    for field in ("type", "default", "choices", "minimum", "accepted", "deprecated_names", "read_by"):
        assert scala[field] == python[field], (
            f"{key}: {field} differs (Scala {scala[field]!r}, Python {python[field]!r})"
        )
    assert scala["doc"].strip(), f"{key} has no documentation in Scala"


def _python_parse(key: config.ConfigKey, raw: str) -> dict:
    try:
        return {"value": key.read({key.name: raw})}
    except config.ConfigError as e:
        return {"error": str(e)}


def _probes(key: config.ConfigKey) -> list[str]:
    if key.type == "choice":
        return sorted(key.choices) + [c.upper() for c in key.choices] + CHOICE_EXTRA
    return PROBES[key.type]


def test_both_parsers_accept_and_reject_the_same_values_alike():
    keys = sorted(config.registered_keys(), key=lambda k: k.name)
    cases = [(k, raw) for k in keys for raw in _probes(k)]
    lines = "".join(f"{k.name}\t{raw}\n" for k, raw in cases)
    answers = [json.loads(line) for line in _run("parse", lines).splitlines() if line.strip()]
    assert len(answers) == len(cases)
    mismatches = []
    for (key, raw), scala in zip(cases, answers):
        assert (scala["key"], scala["raw"]) == (key.name, raw)
        python = _python_parse(key, raw)
        if ("error" in python) != ("error" in scala):
            mismatches.append(f"{key.name}={raw!r}: Python {python}, Scala {scala}")
        elif "value" in python and not _same(python["value"], scala["value"]):
            mismatches.append(f"{key.name}={raw!r}: Python {python['value']!r}, Scala {scala['value']!r}")
        elif "error" in scala:
            assert key.name in scala["error"] and raw[:80] in scala["error"], (  # long values are cut
                f"Scala's error must name key and value: {scala}"
            )
    assert mismatches == []


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(float(a), float(b))
    return a == b


def _typos(name: str) -> list[str]:
    """Misspellings of a key: a letter dropped, two swapped, the first part misspelt, a lower-case key."""
    short = name.removeprefix(config.PREFIX)
    middle = len(short) // 2
    first, _, rest = short.partition(".")
    typos = [
        short[:middle] + short[middle + 1 :],
        short[:middle] + short[middle + 1] + short[middle] + short[middle + 2 :],
        f"{first}s.{rest}" if rest else first + "s",
        short.lower(),
        rest or "x" + short,
    ]
    return [config.PREFIX + t for t in typos if config.PREFIX + t not in KNOWN]


KNOWN = {n for k in config.registered_keys() for n in (k.name, *k.deprecated_names)}


def test_both_sides_warn_alike_about_unknown_keys():
    """The plugin's warning (ConfigKeys.unknownKeyWarning, its port of difflib) is Python's, word for word."""
    typos = sorted({t for name in KNOWN for t in _typos(name)}) + [config.PREFIX + "ui.colour", "spark.x"]
    answers = [json.loads(line) for line in _run("parse", "".join(f"{t}\tv1\n" for t in typos)).splitlines()]
    assert len(answers) == len(typos) > 100
    differ = [(t, a["error"]) for t, a in zip(typos, answers) if a["error"] != config.unknown_key_warning(t, "v1")]
    assert differ == []
    assert sum("Did you mean" in a["error"] for a in answers) > len(typos) // 2
