"""The package layout: every import path of the flat layout still works and names the same module."""

import importlib

import pytest

import region_recovery
from region_recovery._aliases import MOVED


@pytest.mark.parametrize("old, home", sorted(MOVED.items()))
def test_old_import_path_is_the_module_at_its_new_home(old, home):
    assert importlib.import_module(old) is importlib.import_module(home)


def test_from_package_import_of_an_old_module_name():
    from region_recovery import controller, restart  # noqa: F401 (the import is the test)

    assert (
        restart.create_restart_strategy
        is importlib.import_module("region_recovery.planner.restart").create_restart_strategy
    )
    assert controller.Controller.__module__ == "region_recovery.control.job_restarts"


def test_public_names_are_exported():
    for name in region_recovery.__all__:
        assert getattr(region_recovery, name) is not None
    assert region_recovery.RegionRecovery.__module__ == "region_recovery.application"


def test_an_unknown_submodule_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("region_recovery.no_such_module")


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_names_are_attributes_of_the_package_without_an_import(old):
    name = old.rsplit(".", 1)[1]
    assert getattr(region_recovery, name) is importlib.import_module(MOVED[old])


def test_an_unknown_attribute_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_thing"):
        region_recovery.no_such_thing  # noqa: B018
