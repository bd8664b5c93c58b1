"""attach() refuses what it cannot work with, with messages that say what to do. No JVM here."""

import pytest

from region_recovery import RegionRecovery
from region_recovery.errors import SparkConnectNotSupportedError, SparkNotStartedError
from region_recovery.jvm.gateway import spark_context


def test_what_needs_py4j_refuses_a_spark_connect_session_with_a_clear_reason():
    pytest.importorskip("grpc", reason="Spark Connect client libraries (pyspark[connect]) not installed")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    # A real Connect session object; its client connects lazily, so no server is needed to build it.
    session = ConnectSession.builder.remote("sc://127.0.0.1:1").getOrCreate()
    try:
        # attach() goes through the server's extension instead (tests/integration/test_connect.py)
        with pytest.raises(SparkConnectNotSupportedError, match="Spark Connect.*py4j.*docs/connect.md"):
            spark_context(session)
    finally:
        # Close the client, or its exit hook retries cleanup RPCs against the absent server for minutes.
        session.client.close()
        ConnectSession._active_session = None  # type: ignore[attr-defined]


def test_no_session_is_refused():
    with pytest.raises(SparkNotStartedError, match="no Spark session"):
        RegionRecovery.attach(None)
