"""Fixtures for integration tests (helpers live in sparkcluster.py)."""

from __future__ import annotations

import pytest

from sparkcluster import MASTER, Cluster


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture
def cluster(request, plugin_jar):
    """Factory: cluster(**conf) starts a fresh application (cluster(master=..., **conf) on another
    master); stopped at the end of the test."""
    made: list[Cluster] = []

    def make(master: str = MASTER, **conf) -> Cluster:
        c = Cluster(request.node.name[:60], conf, master)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
