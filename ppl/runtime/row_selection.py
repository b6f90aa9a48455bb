"""Branches inside vectorised loops, run as row selection.

A vectorised loop runs its body once for all L rows, the loop index being batch axis 1 of every
value that varies per row (axis 0 holds the Monte Carlo draws). An `if` whose condition depends on
data and loop indices only splits the rows: each branch runs once, on the rows that take it, with
every per-row local narrowed to those rows (`take_rows`); afterwards each local the branch changed
is put back at those rows (`put_rows`). Iterations are independent (ppl.ir.passes.loop_vectorisation
checks that), so running the rows in two groups instead of in order gives the same values;
`target +=` sums.

The same holds across draws: an `if` outside vectorised loops whose condition depends on a
parameter (the Viterbi recursion's `if (logp > best)`) runs each branch once on the draws taking
it (`take_draws`, `put_draws`, axis 0) instead of once per draw.

The functions here work on arrays only (autograd boxes included), so they know nothing of the
language: the evaluator decides when to use them and what to fall back to.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as onp

from ppl.language.types import fast_ndim, fast_shape


class NotPerRow(Exception):
    """A value's batch axes are not (draws, rows): the caller falls back to the ordinary loop."""


def branch_rows(condition, n_rows: int) -> tuple[onp.ndarray, onp.ndarray] | None:
    """The row positions (0-based) taking the `then` and the `else` branch, or None when the
    condition varies with the draws (it depends on a parameter) and rows cannot be selected."""
    raw = onp.asarray(getattr(condition, "_value", condition))
    if raw.ndim != 2 or raw.shape[0] != 1 or raw.shape[1] != n_rows:
        return None
    mask = raw[0] != 0
    return onp.flatnonzero(mask), onp.flatnonzero(~mask)


def take_rows(value, type_ndim: int, sel: onp.ndarray, n_rows: int):
    """The rows `sel` of a per-row value; a value the same for every row is returned as is."""
    b = fast_ndim(value) - type_ndim
    if b < 2:
        return value
    if b > 2:
        raise NotPerRow()
    size = fast_shape(value)[1]
    if size == 1 and n_rows != 1:
        return value
    if size != n_rows:
        raise NotPerRow()
    return value[:, sel]


def _per_row(value, type_ndim: int, n_rows: int):
    """`value` with batch axes (draws, rows), its row axis of size n_rows or 1."""
    shape = fast_shape(value)
    b = len(shape) - type_ndim
    if b == 2:
        return value
    if b > 2:
        raise NotPerRow()
    lead = (shape[0],) if b == 1 else (1,)
    return anp.reshape(value, lead + (1,) + shape[b:])


def broadcast(value, shape: tuple[int, ...]):
    """`value` broadcast to `shape`, differentiably; plain (data) arrays keep their dtype."""
    if fast_shape(value) == shape:
        return value
    if getattr(value, "_value", None) is None:
        return onp.broadcast_to(value, shape)
    return value * onp.ones(shape)


def put_rows(full, type_ndim: int, sel: onp.ndarray, part, n_rows: int):
    """`full` with rows `sel` replaced by `part` (both per-row values or row-invariant)."""
    full = _per_row(full, type_ndim, n_rows)
    part = _per_row(part, type_ndim, len(sel))
    fs, ps = fast_shape(full), fast_shape(part)
    draws = max(fs[0], ps[0])
    tail = onp.broadcast_shapes(fs[2:], ps[2:])
    full = broadcast(full, (draws, n_rows) + tail)
    part = broadcast(part, (draws, len(sel)) + tail)
    return scatter_axis(full, 1, sel, part)


def scatter_axis(current, axis: int, positions: onp.ndarray, values):
    """`current` with the entries at `positions` of `axis` replaced by `values` (same other axes):
    one concatenation and one gather, both differentiable."""
    n = fast_shape(current)[axis]
    order = onp.arange(n)
    order[positions] = n + onp.arange(len(positions))
    combined = anp.concatenate([current, values], axis=axis)
    return combined[(slice(None),) * axis + (order,)]


def draw_split(condition) -> tuple[onp.ndarray, onp.ndarray] | None:
    """The draw positions taking the `then` and the `else` branch of a condition with one value
    per draw, or None when it has other batch axes too."""
    raw = onp.asarray(getattr(condition, "_value", condition))
    if raw.ndim != 1:
        return None
    mask = raw != 0
    return onp.flatnonzero(mask), onp.flatnonzero(~mask)


def take_draws(value, type_ndim: int, sel: onp.ndarray, n_draws: int):
    """The draws `sel` of a value; one without a draws axis (data, constants) is returned as is."""
    shape = fast_shape(value)
    if len(shape) - type_ndim < 1 or shape[0] == 1:
        return value
    if shape[0] != n_draws:
        raise NotPerRow()
    return value[sel]


def put_draws(full, type_ndim: int, sel: onp.ndarray, part, n_draws: int):
    """`full` with draws `sel` replaced by `part`."""
    full = _with_draws_axis(full, type_ndim)
    part = _with_draws_axis(part, type_ndim)
    fs, ps = fast_shape(full), fast_shape(part)
    tail = onp.broadcast_shapes(fs[1:], ps[1:])
    full = broadcast(full, (n_draws,) + tail)
    part = broadcast(part, (len(sel),) + tail)
    return scatter_axis(full, 0, sel, part)


def _with_draws_axis(value, type_ndim: int):
    shape = fast_shape(value)
    if len(shape) - type_ndim >= 1:
        return value
    return anp.reshape(value, (1,) + shape)
