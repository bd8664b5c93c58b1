"""docs/kubernetes.md and docs/deployment.md name only settings that exist: Spark's in Spark 4.3.0, ours in
region_recovery.config.

Spark's settings are read from the pyspark jars, not from a copied list: the string literals of every class
in the spark-*_2.13-4.3.0.jar files, taken from the class files' constant pools (parsed below; about 4 s,
once per test process). A plain key must be one of those strings. A key Spark builds at run time is valid
when its fixed parts are: a volume key (`spark.kubernetes.executor.volumes.<type>.<name>.<suffix>`) when its
prefix, its type and its suffix are constants; a key of an open namespace (`spark.executorEnv.<NAME>`, pod
labels) when its prefix is; a key built by string interpolation (`s"$prefix.$name.capacity"`, compiled to a
StringConcatFactory recipe such as "\\u0001.\\u0001.capacity") when each argument is a constant key or
prefix (it has a dot), or a dot-free name between two dots.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from region_recovery import config

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/kubernetes.md", "docs/deployment.md")
SPARK_VERSION = "4.3.0"
OURS = config.PREFIX  # spark.regionRecovery.

# A setting as the docs write it: `spark.` then dotted parts, a part may be a placeholder such as <name>.
# Not preceded by a word character, a dot, $, / or -: class names (org.apache.spark.shuffle.X) and paths
# (/opt/spark/jars) are not settings.
TOKEN = re.compile(r"(?<![\w.$/-])spark(?:\.(?:[\w-]+|<[\w-]+>))+\.?")
INLINE_CODE = re.compile(r"`([^`\n]+)`")
PLACEHOLDER = re.compile(r"<[\w-]+>")

VOLUME_PREFIXES = ("spark.kubernetes.driver.volumes.", "spark.kubernetes.executor.volumes.")
VOLUME_TYPES = ("hostPath", "emptyDir", "nfs", "persistentVolumeClaim")
VOLUME_NAME = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")  # a Kubernetes volume name (a DNS label)
# Namespaces whose last part the user names (environment variables, labels, annotations, secrets, Hadoop keys)
OPEN_PREFIXES = (
    "spark.executorEnv.",
    "spark.kubernetes.driverEnv.",
    "spark.hadoop.",
    "spark.kubernetes.driver.label.",
    "spark.kubernetes.executor.label.",
    "spark.kubernetes.driver.annotation.",
    "spark.kubernetes.executor.annotation.",
    "spark.kubernetes.driver.secrets.",
    "spark.kubernetes.executor.secrets.",
    "spark.sql.catalog.",
)
RECIPE_ARG = "\x01"  # StringConcatFactory's placeholder for an argument
RECIPE_SHAPE = re.compile(r"[\x01\w.-]*\.[\x01\w.-]*")  # recipes that can build a key (no spaces: not messages)
FREE_NAME = re.compile(r"[\w-]+")


# ---- class files ------------------------------------------------------------------------------------------
# Bytes after the tag of each constant pool entry other than CONSTANT_Utf8 (JVMS 4.4). Long (5) and Double (6)
# take two entries of the pool.
ENTRY_SIZE = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
UTF8, STRING = 1, 8


def class_strings(data: bytes) -> list[str]:
    """The string literals (CONSTANT_String entries) of one class file, in pool order."""
    if len(data) < 10 or data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file (magic)")
    count = int.from_bytes(data[8:10], "big")  # after magic, minor and major version
    utf8: dict[int, bytes] = {}
    strings: list[int] = []
    pos, index = 10, 1  # the pool is indexed from 1
    while index < count:
        if pos >= len(data):
            raise ValueError(f"class file ends inside its constant pool (entry {index} of {count - 1})")
        tag = data[pos]
        if tag == UTF8:
            length = int.from_bytes(data[pos + 1 : pos + 3], "big")
            utf8[index] = data[pos + 3 : pos + 3 + length]
            pos += 3 + length
        elif tag in ENTRY_SIZE:
            if tag == STRING:
                strings.append(int.from_bytes(data[pos + 1 : pos + 3], "big"))
            pos += 1 + ENTRY_SIZE[tag]
            if tag in (5, 6):
                index += 1
        else:
            raise ValueError(f"unknown constant pool tag {tag} at entry {index}")
        index += 1
    if pos > len(data):
        raise ValueError("class file ends inside its constant pool")
    return [_modified_utf8(utf8[i]) for i in strings]


def _modified_utf8(raw: bytes) -> str:
    """Java's modified UTF-8: NUL is C0 80, characters beyond the BMP are two encoded surrogates."""
    return raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")


# ---- what Spark 4.3.0 knows --------------------------------------------------------------------------------
@dataclass(frozen=True)
class SparkStrings:
    constants: frozenset[str]
    recipes: tuple[str, ...]  # interpolations that can build a key, e.g. "\x01.\x01.capacity"

    def has_prefix(self, prefix: str) -> bool:
        return any(c.startswith(prefix) for c in self.constants)


def spark_jars() -> list[Path]:
    spec = importlib.util.find_spec("pyspark")
    assert spec and spec.origin, "pyspark is not installed (.venv: scripts/setup.sh)"
    jars = sorted((Path(spec.origin).parent / "jars").glob(f"spark-*_2.13-{SPARK_VERSION}.jar"))
    assert jars, f"no spark-*_2.13-{SPARK_VERSION}.jar in {Path(spec.origin).parent / 'jars'}"
    return jars


@functools.cache
def spark_strings() -> SparkStrings:
    """Every string literal of every class of Spark's jars (module-level cache: read once per process)."""
    constants: set[str] = set()
    recipes: set[str] = set()
    for jar in spark_jars():
        with zipfile.ZipFile(jar) as z:
            for info in z.infolist():
                if info.filename.endswith(".class"):
                    for s in class_strings(z.read(info)):
                        if RECIPE_ARG not in s:
                            constants.add(s)
                        elif RECIPE_SHAPE.fullmatch(s):
                            recipes.add(s)
    return SparkStrings(frozenset(constants), tuple(sorted(recipes)))


def spark_key_problem(key: str, known: SparkStrings) -> str | None:
    """Why `key` is not a Spark setting, or None when it is. Placeholders such as <name> stand for any name."""
    key = PLACEHOLDER.sub("x", key)
    if key in known.constants:
        return None
    if key.endswith("."):  # a prefix, named in prose
        return None if known.has_prefix(key) else "no Spark setting starts with it"
    for prefix in VOLUME_PREFIXES:
        if key.startswith(prefix):
            return _volume_problem(prefix, key[len(prefix) :], known.constants)
    for prefix in OPEN_PREFIXES:
        if key.startswith(prefix) and len(key) > len(prefix) and prefix in known.constants:
            return None
    if any(_recipe_builds(recipe, key, known.constants) for recipe in known.recipes):
        return None
    return f"not a Spark {SPARK_VERSION} setting"


def _volume_problem(prefix: str, rest: str, constants: frozenset[str]) -> str | None:
    """`<type>.<name>.<suffix>` after spark.kubernetes.{driver,executor}.volumes. (KubernetesVolumeUtils)."""
    if prefix not in constants:
        return f"{prefix} is not a Spark {SPARK_VERSION} prefix"
    kind, _, tail = rest.partition(".")
    name, _, suffix = tail.partition(".")
    if kind not in VOLUME_TYPES or kind not in constants:
        return f"volume type {kind!r} is not one of {', '.join(VOLUME_TYPES)}"
    if not VOLUME_NAME.fullmatch(name):
        return f"volume name {name!r} is not a Kubernetes volume name"
    if suffix in constants:
        return None
    for open_suffix in ("label.", "annotation."):  # PVC labels and annotations: the user names the rest
        if suffix.startswith(open_suffix) and len(suffix) > len(open_suffix) and open_suffix in constants:
            return None
    return f"volume option {suffix!r} is not a Spark {SPARK_VERSION} volume option"


def _recipe_builds(recipe: str, key: str, constants: frozenset[str]) -> bool:
    """Whether the interpolation `recipe` builds `key`: each argument a constant that is a key or a key's prefix
    (it has a dot: a bare word such as "foo" is a constant somewhere too), or a dot-free name that sits between
    two dots of the recipe (a queue name, as in "\\x01.\\x01.capacity")."""
    parts = recipe.split(RECIPE_ARG)  # the literals around the arguments
    if not (key.startswith(parts[0]) and key.endswith(parts[-1]) and len(key) >= len(parts[0]) + len(parts[-1])):
        return False

    def rest_matches(arg: int, pos: int) -> bool:
        if arg == len(parts) - 1:
            return pos == len(key)
        before, after = parts[arg], parts[arg + 1]
        free = before.endswith(".") and after.startswith(".")
        for end in range(pos + 1, len(key) + 1):
            if not key.startswith(after, end):
                continue
            value = key[pos:end]
            allowed = ("." in value and value in constants) or (free and FREE_NAME.fullmatch(value))
            if allowed and rest_matches(arg + 1, end + len(after)):
                return True
        return False

    return rest_matches(0, len(parts[0]))


# ---- the docs -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Named:
    key: str
    line: int


def named_settings(text: str) -> list[Named]:
    """Every `spark.` token in the code blocks and inline code of a markdown text, with its line."""
    out: list[Named] = []
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        code = [line] if fenced else INLINE_CODE.findall(line)
        out += [Named(m.group(0), number) for piece in code for m in TOKEN.finditer(piece)]
    return out


def spark_problems(text: str, path: str, known: SparkStrings) -> list[str]:
    """`path:line: key: why` for each Spark setting of the text that Spark does not know."""
    problems = []
    for named in named_settings(text):
        if named.key.startswith(OURS):
            continue
        why = spark_key_problem(named.key, known)
        if why:
            problems.append(f"{path}:{named.line}: {named.key}: {why}")
    return problems


def our_key_problems(text: str, path: str) -> list[str]:
    """`path:line: key: why` for each spark.regionRecovery.* key that region_recovery.config does not declare."""
    known = {n for k in config.registered_keys() for n in (k.name, *k.deprecated_names)}
    problems = []
    for named in named_settings(text):
        key = named.key
        if not key.startswith(OURS):
            continue
        ok = any(k.startswith(key) for k in known) if key.endswith(".") else key in known
        if not ok:
            problems.append(f"{path}:{named.line}: {key}: not declared in region_recovery.config")
    return problems


def _doc(path: str) -> str:
    return (ROOT / path).read_text(encoding="utf-8")


# ---- tests ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", DOCS)
def test_every_spark_setting_the_doc_names_exists_in_spark(path):
    problems = spark_problems(_doc(path), path, spark_strings())
    assert problems == [], "settings Spark 4.3.0 does not know:\n" + "\n".join(problems)


@pytest.mark.parametrize("path", DOCS)
def test_every_region_recovery_key_the_doc_names_is_declared(path):
    problems = our_key_problems(_doc(path), path)
    assert problems == [], "keys region_recovery.config does not declare:\n" + "\n".join(problems)


def test_the_docs_name_the_settings_they_are_about():
    """The extraction finds the settings (an empty list would pass the two tests above)."""
    keys = {n.key for path in DOCS for n in named_settings(_doc(path))}
    for key in (
        "spark.kubernetes.driver.reusePersistentVolumeClaim",
        "spark.kubernetes.executor.volumes.hostPath.spark-local-dir-1.mount.path",
        "spark.kubernetes.executor.volumes.persistentVolumeClaim.spark-local-dir-1.options.claimName",
        "spark.shuffle.service.enabled",
        "spark.regionRecovery.retained.dir",
    ):
        assert key in keys, key


def test_a_misspelled_key_fails_naming_it_and_its_file():
    text = "\n".join(
        [
            "Set `spark.kubernetes.driver.reusePersistantVolumeClaim=true` and",
            "```bash",
            "  --conf spark.kubernetes.executor.volumes.persistentVolumeClaim.<name>.options.claimName=OnDemand \\",
            "  --conf spark.regionRecovery.retained.dirr=/x \\",
            "  --conf org.apache.spark.shuffle.KubernetesLocalDiskShuffleDataIO",
            "```",
        ]
    )
    assert spark_problems(text, "docs/example.md", spark_strings()) == [
        f"docs/example.md:1: spark.kubernetes.driver.reusePersistantVolumeClaim: not a Spark {SPARK_VERSION} setting"
    ]
    assert our_key_problems(text, "docs/example.md") == [
        "docs/example.md:4: spark.regionRecovery.retained.dirr: not declared in region_recovery.config"
    ]


@pytest.mark.parametrize(
    "key",
    [
        "spark.kubernetes.driver.reusePersistentVolumeClaim",
        "spark.kubernetes.executor.volumes.persistentVolumeClaim.<name>.options.claimName",
        "spark.kubernetes.executor.volumes.hostPath.spark-local-dir-1.options.type",
        "spark.kubernetes.driver.volumes.persistentVolumeClaim.data.label.team",
        "spark.executorEnv.SPARK_EXECUTOR_ATTRIBUTE_NODE_NAME",
        "spark.kubernetes.executor.label.team",
        "spark.scheduler.listenerbus.eventqueue.regionRecovery.capacity",  # "\x01.\x01.capacity"
        "spark.kubernetes.authenticate.driver.serviceAccountName",  # "\x01.serviceAccountName"
        "spark.kubernetes.executor.volumes.",
    ],
)
def test_the_checker_accepts_keys_spark_builds(key):
    assert spark_key_problem(key, spark_strings()) is None


@pytest.mark.parametrize(
    "key, why",
    [
        ("spark.kubernetes.driver.reusePersistantVolumeClaim", "not a Spark"),
        ("spark.kubernetes.executor.volumes.hostpath.x.mount.path", "volume type 'hostpath'"),
        ("spark.kubernetes.executor.volumes.hostPath.x.mount.paths", "volume option 'mount.paths'"),
        ("spark.kubernetes.executor.volumes.hostPath.Spark_Dir.mount.path", "volume name 'Spark_Dir'"),
        ("spark.scheduler.listenerbus.eventqueue.regionRecovery.capacityy", "not a Spark"),
        ("spark.kubernetes.authenticate.driverr.serviceAccountName", "not a Spark"),
        ("spark.shufle.", "no Spark setting starts with it"),
    ],
)
def test_the_checker_refuses_near_misses(key, why):
    problem = spark_key_problem(key, spark_strings())
    assert problem is not None and why in problem, (key, problem)


def _pool(*entries: bytes) -> bytes:
    """A class file with this constant pool (count = entries + 1, plus one for each long or double)."""
    slots = 1 + sum(2 if e[0] in (5, 6) else 1 for e in entries)
    header = b"\xca\xfe\xba\xbe" + (0).to_bytes(2, "big") + (61).to_bytes(2, "big")  # magic, minor, major (Java 17)
    return header + slots.to_bytes(2, "big") + b"".join(entries)


def _utf8(s: bytes) -> bytes:
    return bytes([1]) + len(s).to_bytes(2, "big") + s


def _ref(tag: int, *indexes: int) -> bytes:
    return bytes([tag]) + b"".join(i.to_bytes(2, "big") for i in indexes)


def test_the_class_file_reader_walks_every_kind_of_constant():
    data = _pool(
        _utf8(b"spark.a.b"),  # 1
        _ref(STRING, 1),  # 2
        bytes([3]) + b"\0\0\0\1",  # 3 Integer
        bytes([4]) + b"\0\0\0\0",  # 4 Float
        bytes([5]) + b"\0" * 8,  # 5-6 Long
        bytes([6]) + b"\0" * 8,  # 7-8 Double
        _utf8(b"\x01.\x01.capacity"),  # 9
        _ref(STRING, 9),  # 10
        _ref(7, 1),  # 11 Class
        _ref(12, 1, 1),  # 12 NameAndType
        _ref(9, 11, 12),  # 13 Fieldref
        _ref(10, 11, 12),  # 14 Methodref
        _ref(11, 11, 12),  # 15 InterfaceMethodref
        bytes([15, 6]) + (14).to_bytes(2, "big"),  # 16 MethodHandle
        _ref(16, 1),  # 17 MethodType
        _ref(17, 0, 12),  # 18 Dynamic
        _ref(18, 0, 12),  # 19 InvokeDynamic
        _ref(19, 1),  # 20 Module
        _ref(20, 1),  # 21 Package
        _utf8(b"nul\xc0\x80 and \xe2\x82\xac"),  # 22: modified UTF-8
        _ref(STRING, 22),  # 23
    )
    assert class_strings(data) == ["spark.a.b", "\x01.\x01.capacity", "nul\x00 and \u20ac"]


def test_the_class_file_reader_refuses_what_is_not_a_class_file():
    with pytest.raises(ValueError, match="magic"):
        class_strings(b"PK\x03\x04" + b"\0" * 20)
    with pytest.raises(ValueError, match="tag 2"):
        class_strings(_pool(bytes([2]) + b"\0\0"))
    with pytest.raises(ValueError, match="ends inside"):
        class_strings(_pool(_utf8(b"x"))[:-1])  # a Utf8 entry cut short
