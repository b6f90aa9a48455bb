"""A small, fixed fuzzing budget for CI (issue 23): mutated example models, data and options from
benchmarks/fuzz.py's generator, run in-process; every run ends in exit 0 or a user error (exit 2),
never an internal error or a traceback. benchmarks/fuzz.py runs the long version in forked
children with time and memory limits (docs/robustness.md)."""

from __future__ import annotations

import random
import runpy
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.test_cli import run_main

FUZZ = runpy.run_path(str(Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"))


def _run(seed: int, commands: tuple[str, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        argv = FUZZ["make_case"](random.Random(seed), Path(tmp), 0, commands)
        rc, out, err = run_main(argv)
    assert rc in (0, 2), f"exit {rc} for {argv}:\n{err[-2000:]}"
    assert "Traceback" not in err and "internal error" not in err, f"{argv}:\n{err[-2000:]}"


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.integers(0, 2**32))
def test_mutated_models_and_data_check_without_internal_errors(seed):
    _run(seed, ("check", "ir"))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(st.integers(0, 2**32))
def test_mutated_fits_end_in_a_result_or_a_user_error(seed):
    _run(seed, ("fit",))
