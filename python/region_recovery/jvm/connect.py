"""A Spark Connect session's way to the driver: the plugin's Connect extension instead of py4j.

A classic session calls the plugin's bridge and its DriverState in the driver JVM over py4j. A Spark Connect
client holds no JVM: each call becomes a relation that the plugin's extension on the server
(``io.regionrecovery.spark.connect.RegionRecoveryRelationPlugin``) answers with one row, ``(json, data)``. The
classes here offer the calls the controllers make, under the py4j names, so that the drain, the live model and
the controllers run unchanged on either kind of session:

- ``ConnectBridge``: RegionRecoveryBridge's calls (reuse scopes, retention, job recovery, the UI);
- ``ConnectState``: the attached client's event buffer on the server (each client has its own), and the status;
- ``ConnectContext``: the little of a SparkContext the controllers use. A reuse scope travels as an operation tag
  (``spark.addTag``, which holds for the calling thread), which the server maps to the scope of this session only.

What needs the driver JVM in this process (reading a streaming checkpoint) raises SparkConnectNotSupportedError.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import NotEnabledError, SparkConnectNotSupportedError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("region_recovery")

TYPE_URL = "type.googleapis.com/io.regionrecovery.connect.Request"
EXTENSION_CLASS = "io.regionrecovery.spark.connect.RegionRecoveryRelationPlugin"
EXTENSION_KEY = "spark.connect.extensions.relation.classes"
# the tag a client adds to a reuse scope's operations: the server's ExchangeReuse.ConnectTagPrefix, then the id
SCOPE_TAG_PREFIX = "region-recovery-"
# the classic session's local property for the reuse scope (ExchangeReuse.ScopeProperty)
SCOPE_PROPERTY = "regionRecovery.reuseScope"
# the server waits at most this long for a client's first event (ConnectOps caps it at 5 s)
DRAIN_WAIT_MS = 1000


def _plan(payload: str) -> Any:
    """A Spark Connect relation carrying one request (a LogicalPlan of the client, never cached by the server)."""
    from google.protobuf.wrappers_pb2 import StringValue  # type: ignore[import-untyped]
    from pyspark.sql.connect import proto
    from pyspark.sql.connect.plan import LogicalPlan

    class RegionRecoveryRequest(LogicalPlan):
        def __init__(self) -> None:
            super().__init__(None)

        def plan(self, session: Any) -> Any:
            rel = proto.Relation()  # no plan id: the server's plan cache keeps only relations that have one
            rel.extension.type_url = TYPE_URL
            rel.extension.value = StringValue(value=payload).SerializeToString()
            return rel

    return RegionRecoveryRequest()


class ConnectCall:
    """Sends one request to the plugin's extension on the Connect server; returns (json, data)."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark

    def __call__(self, op: str, **args: Any) -> tuple[str, bytes]:
        from pyspark.sql.connect.dataframe import DataFrame

        payload = json.dumps(
            {
                "id": uuid.uuid4().hex,
                "op": op,
                "args": {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()},
            }
        )
        try:
            rows = DataFrame(_plan(payload), session=self._spark).collect()  # type: ignore[arg-type]
        except Exception as e:
            text = str(e)
            if "extension" in text.lower() and ("no handler" in text.lower() or "not supported" in text.lower()):
                raise NotEnabledError(
                    "the Spark Connect server has no region-recovery extension: start it with the flags of "
                    f"`region-recovery submit-args --connect` ({EXTENSION_KEY}={EXTENSION_CLASS}, the plugin and "
                    f"its jar); the server said: {text.strip().splitlines()[0]}"
                ) from e
            raise
        (row,) = rows
        return str(row["json"]), bytes(row["data"])

    def json(self, op: str, **args: Any) -> Any:
        return json.loads(self(op, **args)[0])

    def raw(self, op: str, **args: Any) -> str | None:
        """The reply's JSON text as the py4j call returns it: None for JSON null."""
        text = self(op, **args)[0]
        return None if text == "null" else text


class ConnectBridge:
    """RegionRecoveryBridge's calls, over the extension."""

    def __init__(self, call: ConnectCall) -> None:
        self._call = call

    def reuseScopeProperty(self) -> str:
        return SCOPE_PROPERTY

    def beginReuseScope(self) -> str:
        return str(self._call.json("begin-scope"))

    def endReuseScope(self, scope: str) -> bool:
        return bool(self._call.json("end-scope", scope=scope))

    def reuseScopeJson(self, scope: str) -> str:
        return self._call("reuse-scope", scope=scope)[0]

    def reuseStatusJson(self) -> str:
        return self._call("reuse-status")[0]

    def retentionJson(self) -> str | None:
        return self._call.raw("retention")

    def retainedLedgerJson(self) -> str | None:
        return self._call.raw("ledger")

    def retentionPolicyJson(self) -> str | None:
        return self._call.raw("policy")

    def setAvoidedHosts(self, csv: str) -> str:
        return self._call("set-policy", part="avoided-hosts", value=csv)[0]

    def setPreferredExecutors(self, csv: str) -> str:
        return self._call("set-policy", part="preferred-executors", value=csv)[0]

    def setAvoidedExecutors(self, csv: str) -> str:
        return self._call("set-policy", part="avoided-executors", value=csv)[0]

    def setReleasePolicy(self, name: str) -> str:
        return self._call("set-policy", part="release", value=name)[0]

    def setMaxBytesPerHost(self, value: int) -> str:
        return self._call("set-policy", part="max-bytes-per-host", value=str(value))[0]

    def setRetentionExcluded(self, shuffle_id: int, excluded: bool) -> str:
        return self._call("set-retention-excluded", shuffle_id=str(shuffle_id), excluded=str(excluded).lower())[0]

    def jobRecoveryJson(self) -> str:
        return self._call("job-recovery")[0]

    def unregisterShuffle(self, shuffle_id: int) -> bool:
        return bool(self._call.json("unregister-shuffle", shuffle_id=str(shuffle_id)))

    def mapOutputRowChecksum(self, shuffle_id: int, map_index: int, map_id: int) -> int:
        return int(
            self._call.json("row-checksum", shuffle_id=str(shuffle_id), map_index=str(map_index), map_id=str(map_id))
        )

    def waitForListeners(self, _sc: Any, timeout_ms: int) -> None:
        self._call("wait-listeners", timeout_ms=str(timeout_ms))

    def postUiEvent(self, _sc: Any, kind: str, record: str) -> None:
        self._call("post-ui", kind=kind, json=record)


class _Accepted:
    def __init__(self, call: ConnectCall, client: str) -> None:
        self._call, self._client = call, client

    def acceptedCount(self) -> int:
        return int(self._call.json("accepted", client=self._client))


class ConnectState:
    """The attached client's event buffer on the server (DriverState's calls the drain and status make)."""

    def __init__(self, call: ConnectCall, client: str, status: dict[str, Any]) -> None:
        self._call = call
        self.client = client
        self._capacity = int(status.get("capacity", 0))
        self._stopped = False

    def drain(self, max_events: int, wait_ms: int) -> bytes:
        reply, data = self._call("drain", client=self.client, max_events=str(max_events), timeout_ms=str(wait_ms))
        self._stopped = bool(json.loads(reply).get("stopped"))
        return data

    def statusJson(self) -> str:
        return self._call("status")[0]

    def stopped(self) -> bool:
        return self._stopped

    def capacity(self) -> int:
        return self._capacity

    def buffer(self) -> _Accepted:
        return _Accepted(self._call, self.client)

    def detach(self) -> None:
        try:
            self._call("detach", client=self.client)
        except Exception as e:  # the server may be gone; its idle clients are dropped anyway
            log.debug("detaching from the Connect server failed: %s", e)


class _Conf:
    def __init__(self, conf: dict[str, str]) -> None:
        self._conf = conf

    def getAll(self) -> list[tuple[str, str]]:
        return list(self._conf.items())


class _Jobs:
    """What the bridge's calls take as the JVM SparkContext (``sc._jsc.sc()``): over Connect, the server's own."""

    def __init__(self, call: ConnectCall) -> None:
        self._call = call

    def sc(self) -> _Jobs:
        return self


class ConnectContext:
    """The little of a SparkContext the controllers use, for the server's application."""

    def __init__(self, spark: SparkSession, call: ConnectCall, app_id: str, conf: dict[str, str]) -> None:
        self._spark = spark
        self.applicationId = app_id
        self._conf = _Conf(conf)
        self._jsc = _Jobs(call)

    def getConf(self) -> _Conf:
        return self._conf

    def getLocalProperty(self, key: str) -> str | None:
        self._only_scope(key)
        tags = [t for t in self._spark.getTags() if t.startswith(SCOPE_TAG_PREFIX)]
        return tags[0][len(SCOPE_TAG_PREFIX) :] if tags else None

    def setLocalProperty(self, key: str, value: str | None) -> None:
        """The reuse scope of this thread's operations, as an operation tag (Spark Connect's tags are per thread)."""
        self._only_scope(key)
        for tag in self._spark.getTags():
            if tag.startswith(SCOPE_TAG_PREFIX):
                self._spark.removeTag(tag)
        if value is not None:
            self._spark.addTag(SCOPE_TAG_PREFIX + value)

    @staticmethod
    def _only_scope(key: str) -> None:
        if key != SCOPE_PROPERTY:
            raise SparkConnectNotSupportedError(f"a Spark Connect client cannot set the local property {key!r}")


def attach(spark: SparkSession) -> tuple[ConnectContext, ConnectBridge, ConnectState]:
    """Attaches this client to the plugin on the Connect server: a buffer of its own, fed from now on."""
    call = ConnectCall(spark)
    reply = call.json("attach")
    status = json.loads(reply["status"]) if isinstance(reply["status"], str) else reply["status"]
    conf = reply["conf"]
    return (
        ConnectContext(spark, call, str(reply["app_id"]), conf),
        ConnectBridge(call),
        ConnectState(call, str(reply["client"]), status),
    )
