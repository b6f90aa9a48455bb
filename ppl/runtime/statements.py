"""The statement compiler: each statement becomes, once, a closure `f(ev) -> None` kept on its AST
node, wrapped in the error handling that turns numerical failures into located model errors."""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp

from ppl.errors import ModelError
from ppl.ir.marks import compiled_of
from ppl.ir.passes.loop_vectorisation import reduction_increment
from ppl.language import ast
from ppl.language.types import fast_shape
from ppl.library.printing import format_value, print_statement
from ppl.runtime import user_calls
from ppl.runtime.branches import compile_if
from ppl.runtime.expressions import expr_fn
from ppl.runtime.loops import compile_for, run_foreach, run_while
from ppl.runtime.operators import binop_fn
from ppl.runtime.signals import (
    Devectorise,
    LoopBreak,
    LoopContinue,
    NeedsPerSample,
    Rejected,
    describe,
)
from ppl.runtime.target_terms import compile_target, compile_tilde
from ppl.runtime.values import ElementList, decl_stype, raw, trim

#: what a statement's closure lets through untouched: the signals that steer the run
_PASS_THROUGH = (
    Devectorise,
    NeedsPerSample,
    Rejected,
    LoopBreak,
    LoopContinue,
    ModelError,
    user_calls.FunctionReturn,
)
_NUMERIC_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError, onp.linalg.LinAlgError)
_COMPOUND = (ast.For, ast.ForEach, ast.While, ast.If, ast.Block)


def _devectorise(ev) -> None:
    raise Devectorise(ev._current_loop)


def stmt_fn(s: ast.Stmt):
    """The compiled statement, with the error handling of `Evaluator.stmt`."""
    compiled = compiled_of(s)
    if compiled.run is not None:
        return compiled.run
    body = stmt_body(s)
    compound = isinstance(s, _COMPOUND)

    def run(ev):
        try:
            body(ev)
        except _PASS_THROUGH:
            raise
        except _NUMERIC_ERRORS as e:
            if ev.in_vector_loop:
                raise Devectorise(ev._current_loop) from None
            if compound:
                raise
            if ev.draws_may_fail and isinstance(e, onp.linalg.LinAlgError):
                # a draw's matrix is singular or not positive definite: Stan rejects the draw,
                # it does not end the fit (ppl.runtime.compiler retries the batch a draw at a time)
                raise Rejected(f"{ev.error(s, describe(e))}") from None
            raise ev.error(s, f"cannot evaluate this statement: {describe(e)}") from None

    compiled.run = run
    return run


def stmt_body(s: ast.Stmt):
    compiled = compiled_of(s)
    if compiled.body is None:
        compiled.body = _compile_stmt(s)
    return compiled.body


def _compile_stmt(s: ast.Stmt):
    if isinstance(s, ast.Decl):
        return _compile_decl(s)
    if isinstance(s, ast.Assign):
        return _compile_assign(s)
    if isinstance(s, ast.Tilde):
        return compile_tilde(s)
    if isinstance(s, ast.TargetInc):
        return compile_target(s)
    if isinstance(s, ast.For):
        return compile_for(s, stmt_fn)
    if isinstance(s, ast.ForEach):
        return lambda ev: run_foreach(ev, s)
    if isinstance(s, ast.While):
        return lambda ev: run_while(ev, s)
    if isinstance(s, ast.If):
        return compile_if(s, stmt_fn)
    if isinstance(s, ast.Block):
        fns = [stmt_fn(inner) for inner in s.stmts]

        def block(ev):
            env = ev.env
            n = len(env)
            for f in fns:
                f(ev)
            if len(env) != n:
                trim(env, n)

        return block
    if isinstance(s, ast.Print):
        return print_statement(s, expr_fn, _devectorise)
    if isinstance(s, ast.Reject):
        parts = [(a.value, None) if isinstance(a, ast.Str) else (expr_fn(a), a) for a in s.args]

        def reject(ev):
            raise Rejected("".join(p if a is None else _reject_value(p(ev), a) for p, a in parts))

        return reject
    if isinstance(s, ast.Break):

        def brk(ev):
            raise LoopBreak()

        return brk
    if isinstance(s, ast.Continue):

        def cont(ev):
            raise LoopContinue()

        return cont
    if isinstance(s, ast.Return):
        return user_calls.compile_return(s, expr_fn)
    if isinstance(s, ast.CallStmt):
        f = expr_fn(s.call)

        def call_stmt(ev):
            f(ev)

        return call_stmt
    return lambda ev: None


def _reject_value(value, e: ast.Expr) -> str:
    """A reject() argument as Stan prints it; of a batch of draws, the first draw's value."""
    rank = getattr(getattr(e, "type", None), "ndim", None)
    value = onp.asarray(raw(value))
    if rank is not None and value.ndim > rank:
        value = value.reshape((-1,) + value.shape[value.ndim - rank :])[0]
    return format_value(value)


def _compile_decl(d: ast.Decl):
    decl_stype(d)  # resolve the static type once
    return lambda ev: ev.declare(d)


def _compile_assign(s: ast.Assign):
    plain = _compile_plain_assign(s)
    increment = reduction_increment(s)
    if increment is None:
        return plain
    increment_fn = expr_fn(increment)
    plus = binop_fn("+", s.lhs.type, increment.type, s)
    k = increment.type.ndim

    def assign(ev):
        if ev.in_vector_loop and any(s in frame for frame in ev._reduction_frames):
            value, level = _sum_over_rows(ev, s, increment_fn(ev), k)
            # the target lives at the level of the loops not summed over: store it there
            saved = ev.in_vector_loop, ev._loop_axis, ev._loop_rows
            if level < ev._loop_axis:
                ev.in_vector_loop = level > 0
                ev._loop_axis = level
                ev._loop_rows = ev._outer_rows[level - 1] if level else None
            try:
                ev.store(s, plus(ev, ev.expr(s.lhs), value), s.lhs.type)
            finally:
                ev.in_vector_loop, ev._loop_axis, ev._loop_rows = saved
            return
        plain(ev)

    return assign


def _sum_over_rows(ev, s: ast.Assign, value, type_ndim: int):
    """An accumulating assignment's increment summed over the rows of the vectorised loops it
    accumulates over (loop_vectorisation.reductions), and the loop depth its target lives at; an
    increment the same for every row counts once per row, as in the sequential loop."""
    counts = ev._outer_counts + (len(ev._loop_rows),)
    shape = fast_shape(value)
    batch = len(shape) - type_ndim
    levels = [d for d, frame in enumerate(ev._reduction_frames, 1) if s in frame]
    if levels != list(range(levels[0], len(counts) + 1)):  # only the innermost loops can be summed
        raise Devectorise(ev._current_loop)
    axes = [axis for axis in levels if axis < batch]  # a size-1 axis is summed away too
    factor = 1
    for axis in levels:
        if axis >= batch or shape[axis] == 1:
            factor *= counts[axis - 1]
    if axes:
        value = np.sum(value, axis=tuple(axes))
    return (value if factor == 1 else value * factor), levels[0] - 1


def _compile_plain_assign(s: ast.Assign):
    lhs = s.lhs
    if s.op != "=":
        return lambda ev: ev.assign(s)
    rhs_fn = expr_fn(s.rhs)
    if isinstance(lhs, ast.Var):
        name = lhs.name
        ltype = lhs.type
        real = ltype.base == "real"
        if ltype.ndim:
            return lambda ev: ev.assign(s)  # keeps the size check of container assignment

        def assign_scalar(ev):
            v = rhs_fn(ev)
            if real and isinstance(v, int | bool):
                v = float(v)
            ev.env[name] = v

        return assign_scalar
    if not (
        isinstance(lhs, ast.Index)
        and isinstance(lhs.base, ast.Var)
        and len(lhs.items) == 1
        and lhs.items[0].kind == "single"
    ):
        return lambda ev: ev.assign(s)
    name = lhs.base.name
    vtype = lhs.base.type
    item = lhs.items[0]
    idx_fn = expr_fn(item.lo)
    items = [item]
    rtype = s.rhs.type
    elem_real = vtype.element().base == "real" if vtype.ndim else False

    def assign_element(ev):
        rhs = rhs_fn(ev)
        env = ev.env
        current = env[name]
        idx = idx_fn(ev)
        if idx.__class__ is int:
            if current.__class__ is not ElementList:
                current = ElementList.from_array(current, vtype)
            lst = current.items
            if not 1 <= idx <= len(lst):
                raise ev.error(s, f"index {idx} out of range 1..{len(lst)}")
            if elem_real and isinstance(rhs, int | bool):
                rhs = float(rhs)
            lst[idx - 1] = rhs
            env[name] = current
            return
        env[name] = ev.set_items(current, vtype, items, rhs, rtype, s)

    return assign_element
