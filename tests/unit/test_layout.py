"""The package's public names: everything ``region_recovery.__all__`` lists is importable from the package."""

import importlib

import pytest

import region_recovery


def test_public_names_are_exported():
    for name in region_recovery.__all__:
        assert getattr(region_recovery, name) is not None
    assert region_recovery.RegionRecovery.__module__ == "region_recovery.application"


@pytest.mark.parametrize("old", ["region_recovery.restart", "region_recovery.controller", "region_recovery.bridge"])
def test_the_flat_layout_import_paths_are_gone(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
