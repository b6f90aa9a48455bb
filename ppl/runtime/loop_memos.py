"""Loop-invariant values kept while a loop runs one index at a time (marked by
ppl.ir.passes.loop_invariants): computed once per loop run, or once for every index at once."""

from __future__ import annotations

import numpy as onp

from ppl.language import ast
from ppl.language.types import fast_shape
from ppl.runtime.expressions import compile_expr


def memoised(e: ast.Expr, loop: ast.For, inner: tuple[str, ...], mapped: bool):
    """e's closure, its value kept while `loop` runs one index at a time (passes.loop_invariants),
    keyed by the values of the inner-loop indexes it reads. A `mapped` expression (it depends on
    the loop's index) is computed for every index at once and read per iteration."""
    compute = compile_expr(e)
    var = loop.var
    k = e.type.ndim if e.type is not None else 0

    def memo(ev):
        table = ev._memos.get(loop)
        if table is None:
            return compute(ev)
        env = ev.env
        key = (id(e),) + tuple(_memo_key(env.get(name)) for name in inner)
        try:
            kept = table[key]
        except KeyError:
            kept = _map_over_index(ev, compute, var, table, k) if mapped else compute(ev)
            table[key] = kept
        if not mapped:
            return kept
        if kept is None:
            return compute(ev)
        values, axis, lo = kept
        return values[(slice(None),) * axis + (env[var] - lo,)]

    return memo


def _map_over_index(ev, compute, var: str, table: dict, type_ndim: int):
    """(values for every index of the loop, their index axis, the first index), or None when the
    expression cannot be computed that way (it then runs per iteration)."""
    lo, hi = table["range"]
    env = ev.env
    axis = ev._loop_axis + 1  # a new batch axis after those of enclosing vectorised loops
    current = env[var]
    env[var] = onp.arange(lo, hi + 1).reshape((1,) * axis + (-1,))
    try:
        values = compute(ev)
    except Exception:  # noqa: BLE001 - anything this cannot do runs per iteration as before
        return None
    finally:
        env[var] = current
    shape = fast_shape(values)
    if len(shape) - type_ndim != axis + 1 or shape[axis] != hi - lo + 1:
        return None
    return values, axis, lo


def _memo_key(value):
    if value.__class__ is int:
        return value
    arr = onp.asarray(value)
    return arr.shape, arr.tobytes()
