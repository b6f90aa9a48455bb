"""Stan's print() statement: its arguments formatted as Stan does and written to stderr.

The checker allows print() in transformed data only (run once, on data); elsewhere ppl evaluates
statements on batches of draws at every optimisation step. stdout stays free for the summary.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from ppl.language import ast


def format_value(value) -> str:
    """Numbers as Stan prints them (6 significant digits), containers as nested [a,b,...]."""
    arr = np.asarray(getattr(value, "_value", value))
    if arr.ndim == 0:
        v = arr.item()
        return str(v) if isinstance(v, int | np.integer) else f"{v:g}"
    return "[" + ",".join(format_value(x) for x in arr) + "]"


def print_statement(s: ast.Print, expr_fn: Callable, devectorise: Callable) -> Callable:
    """The closure that runs `print(...)`: ``expr_fn(e)(ev)`` evaluates an argument, and
    ``devectorise(ev)`` is called inside a vectorised loop (print runs once per iteration)."""
    parts = [a.value if isinstance(a, ast.Str) else expr_fn(a) for a in s.args]

    def run(ev) -> None:
        if ev.in_vector_loop:
            devectorise(ev)
        text = "".join(p if isinstance(p, str) else format_value(p(ev)) for p in parts)
        print(text, file=sys.stderr)

    return run
