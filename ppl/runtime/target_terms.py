"""`~` statements and `target +=`: the terms of the log density, added to the evaluator's target
(or recorded one by one for BBVI's Markov blankets)."""

from __future__ import annotations

from ppl.language import ast
from ppl.language.types import fast_shape, sum_to_batch0
from ppl.runtime.densities import aligned_density, call_site_density
from ppl.runtime.expressions import expr_fn


def compile_tilde(s: ast.Tilde):
    """A `~` on a built-in density, as lowered (ppl.ir.lowering): its density, its arguments."""
    marks = s.marks
    dist, arg_exprs = marks.density, marks.density_args
    lhs_fn = expr_fn(s.lhs)
    arg_fns = [expr_fn(a) for a in arg_exprs]
    vtype = s.lhs.type
    types = [a.type for a in arg_exprs]
    cache = []
    ndims = [vtype.ndim] + [t.ndim for t in types]
    events = [dist.value_ndim] + list(dist.param_ndims)
    sufficient = marks.sufficient_statistics

    def tilde(ev):
        value = lhs_fn(ev)
        args = [f(ev) for f in arg_fns]
        if not cache:  # built at the first run, so that a bad call fails where it did before
            cache.append(call_site_density(dist, ndims, events, sufficient))
            cache.append(aligned_density(dist, ndims, events, elementwise=True))
        if ev.terms is not None:
            lp = cache[1]([value] + args)
            ev.terms.append((s, lp))
        else:
            lp = cache[0]([value] + args)
        if ev.in_vector_loop:
            lp = _every_row(ev, lp, 0)
        lp = sum_to_batch0(lp)
        ev.add_lp(lp)
        if ev.on_statement is not None:
            ev.on_statement(s, lp)

    return tilde


def _every_row(ev, lp, type_ndim: int):
    """A log density computed once in a vectorised loop but the same for every row (it does not
    involve the loop index) counts once per row, as in the sequential loop."""
    shape = fast_shape(lp)
    batch = len(shape) - type_ndim
    factor = 1
    for axis, count in enumerate(ev._outer_counts + (len(ev._loop_rows),), start=1):
        if batch <= axis or shape[axis] == 1:
            factor *= count
    return lp if factor == 1 else lp * factor


def compile_target(s: ast.TargetInc):
    f = expr_fn(s.expr)
    k = s.expr.type.ndim

    def target(ev):
        lp = f(ev)
        if ev.in_vector_loop:
            lp = _every_row(ev, lp, k)
        if ev.terms is not None:
            ev.terms.append((s, lp))
        lp = sum_to_batch0(lp)
        ev.add_lp(lp)
        if ev.on_statement is not None:
            ev.on_statement(s, lp)

    return target
