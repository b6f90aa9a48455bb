"""The `slow` tier: `pytest -m "not slow"` is the quick run, plain `pytest` runs every test.
A misspelt or unregistered marker must fail collection rather than silently select nothing."""

from __future__ import annotations

import pytest


def test_slow_marker_is_registered_and_markers_are_strict(pytestconfig: pytest.Config) -> None:
    markers = [line.split(":", 1)[0].strip() for line in pytestconfig.getini("markers")]
    assert "slow" in markers
    assert pytestconfig.getoption("strict_markers")


def test_the_default_run_deselects_nothing(pytestconfig: pytest.Config) -> None:
    assert "-m" not in pytestconfig.getini("addopts")
