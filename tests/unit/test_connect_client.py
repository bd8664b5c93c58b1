"""The Spark Connect client's side of the extension, without a server: what a request looks like on the wire, the
names it shares with the plugin, and how a run's reuse scope becomes an operation tag. The server's side is
ConnectRequestSuite (JVM); both together run in tests/integration/test_connect.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from region_recovery.jvm import connect, packaging

pytest.importorskip("grpc", reason="Spark Connect client libraries (pyspark[connect]) not installed")

SCALA = Path(__file__).resolve().parents[2] / "jvm" / "src" / "main" / "scala" / "io" / "regionrecovery" / "spark"


def _scala_string(path: Path, name: str) -> str:
    (value,) = re.findall(rf'val {name}(?:: String)? = "([^"]*)"', path.read_text())
    return value


def test_the_request_is_an_any_of_our_type_holding_the_json_in_field_one():
    from google.protobuf.wrappers_pb2 import StringValue

    payload = json.dumps({"id": "r1", "op": "drain", "args": {"client": "c"}})
    rel = connect._plan(payload).plan(None)
    assert rel.extension.type_url == connect.TYPE_URL
    assert StringValue.FromString(rel.extension.value).value == payload
    assert not rel.HasField("common"), "no plan id: the server's plan cache never keeps a request"


def test_the_client_and_the_plugin_name_the_same_things():
    assert connect.TYPE_URL == _scala_string(SCALA / "connect" / "ConnectRequest.scala", "TypeUrl")
    assert connect.SCOPE_TAG_PREFIX == _scala_string(SCALA / "sql" / "ExchangeReuse.scala", "ConnectTagPrefix")
    assert connect.SCOPE_PROPERTY == _scala_string(SCALA / "sql" / "ExchangeReuse.scala", "ScopeProperty")
    plugin = SCALA / "connect" / "RegionRecoveryRelationPlugin.scala"
    assert plugin.is_file() and packaging.CONNECT_EXTENSION_CLASS.endswith(".RegionRecoveryRelationPlugin")
    assert connect.EXTENSION_CLASS == packaging.CONNECT_EXTENSION_CLASS


class _Tags:
    """The tag calls of a Spark Connect session (thread-local there; one thread here)."""

    def __init__(self) -> None:
        self.tags: set[str] = {"users-own"}

    def getTags(self) -> set[str]:
        return set(self.tags)

    def addTag(self, tag: str) -> None:
        self.tags.add(tag)

    def removeTag(self, tag: str) -> None:
        self.tags.discard(tag)


def test_a_reuse_scope_is_set_and_cleared_as_an_operation_tag_leaving_the_user_s_tags():
    session = _Tags()
    sc = connect.ConnectContext(session, call=None, app_id="app-1", conf={})  # type: ignore[arg-type]
    assert sc.getLocalProperty(connect.SCOPE_PROPERTY) is None
    sc.setLocalProperty(connect.SCOPE_PROPERTY, "reuse-scope-7")
    assert session.tags == {"users-own", "region-recovery-reuse-scope-7"}
    assert sc.getLocalProperty(connect.SCOPE_PROPERTY) == "reuse-scope-7"
    sc.setLocalProperty(connect.SCOPE_PROPERTY, "reuse-scope-8")  # a nested run: one scope at a time
    assert session.tags == {"users-own", "region-recovery-reuse-scope-8"}
    sc.setLocalProperty(connect.SCOPE_PROPERTY, None)
    assert session.tags == {"users-own"}
    with pytest.raises(connect.SparkConnectNotSupportedError, match="spark.job.description"):
        sc.setLocalProperty("spark.job.description", "x")
