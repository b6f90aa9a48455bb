"""Collect the PROBLEMS of every problem module in this package (posteriordb.py is optional)."""

from __future__ import annotations

import importlib
import sys

from .base import Problem

MODULES = ("posteriordb", "pima", "epilepsy", "gpfa", "varying_intercepts")


def problems() -> list[Problem]:
    """Every problem, in MODULES order; a module that is missing or fails to import is skipped
    with a message on stderr, so one broken problem file does not stop the benchmark."""
    out: list[Problem] = []
    for name in MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{name}":
                print(f"peer problems: {name}: {e}", file=sys.stderr)
            continue
        except Exception as e:  # noqa: BLE001 - a broken module must not stop the others
            print(f"peer problems: {name} failed to import: {type(e).__name__}: {e}",
                  file=sys.stderr)  # fmt: skip
            continue
        out.extend(getattr(module, "PROBLEMS", []))
    return out
