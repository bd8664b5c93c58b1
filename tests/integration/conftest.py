"""Fixtures for integration tests (helpers live in sparkcluster.py)."""

from __future__ import annotations

import pytest

from sparkcluster import MASTER, Cluster, executors_of


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


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory) -> str:
    """A retained root for the module's shared applications (part of their configuration, so the same for all)."""
    return str(tmp_path_factory.mktemp("retained"))


@pytest.fixture(scope="module")
def shared_cluster(request, plugin_jar):
    """Factory: shared_cluster(**conf) gives the module's application with that configuration, shared by the
    tests that ask for the same one (an application start costs more than most tests' work). Before each test it
    is repaired: executors a test froze are killed, and the master's replacements for killed ones are waited for.
    Asking for another configuration stops the current application (one SparkContext per process)."""
    current: dict[tuple, Cluster] = {}

    def get(master: str = MASTER, **conf) -> Cluster:
        key = (master, tuple(sorted(conf.items())))
        if key not in current:
            for c in current.values():
                c.close()
            current.clear()
            current[key] = Cluster(request.module.__name__.rsplit(".", 1)[-1][:60], conf, master)
        c = current[key]
        c.repair(executors_of(master))
        return c

    yield get
    for c in current.values():
        c.close()
