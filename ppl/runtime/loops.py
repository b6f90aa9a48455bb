"""`for`, `foreach` and `while` loops: a `for` loop whose iterations are independent runs once with
its index as a batch axis (vectorised), otherwise one index at a time with its loop-invariant
values kept (ppl.runtime.loop_memos)."""

from __future__ import annotations

import math

import numpy as onp

from ppl.ir.marks import compiled_of
from ppl.ir.passes.loop_invariants import marked as marked_invariants
from ppl.ir.passes.loop_vectorisation import private_variables, reductions
from ppl.language import ast
from ppl.language.types import SType, fast_ndim, fast_shape
from ppl.limits import over_budget
from ppl.runtime.expressions import expr_fn
from ppl.runtime.fused import fusable
from ppl.runtime.loop_memos import memoised
from ppl.runtime.signals import Devectorise, LoopBreak, LoopContinue, NeedsPerSample
from ppl.runtime.values import ElementList, decl_stype, raw, trim, type_shape

#: vectorised loops nest this deep (the loop index of depth d is batch axis d; axis 0: the draws)
_MAX_LOOP_AXES = 2


#: The evaluator's state of the vectorised loop under way, saved and restored around a nested one.
_LOOP_STATE = ("in_vector_loop", "_current_loop", "_loop_rows", "_loop_start", "_loop_types",
               "_loop_axis", "_outer_counts", "_outer_rows", "_reduction_frames")  # fmt: skip


def compile_for(s: ast.For, stmt_fn):
    """The loop's closure; `stmt_fn` compiles its body (ppl.runtime.statements)."""
    lo_fn, hi_fn = expr_fn(s.lo), expr_fn(s.hi)
    # before the body is compiled, so that its closures call the memoised ones
    invariants = marked_invariants(s)  # ppl.ir.passes.loop_invariants
    for e, inner, mapped in invariants:
        if mapped and fusable(e):
            continue  # a scalar kernel computes it within the one node of its recurrence step
        compiled = compiled_of(e)
        if compiled.value is None:
            compiled.memo_loop = True
            compiled.value = memoised(e, s, inner, mapped)
    body = stmt_fn(s.body)
    var = s.var
    jumps = _has_jump(s.body)
    local_types = _local_type_ndims(s.body)
    vectorise = s.marks is not None and s.marks.vectorise  # ppl.ir.passes.loop_vectorisation

    def run(ev):
        lo = ev.int_value(lo_fn(ev), s.lo)
        hi = ev.int_value(hi_fn(ev), s.hi)
        if hi < lo:
            return
        ev.charge_loop(s, (hi - lo + 1) * math.prod(ev._outer_counts or (1,)))
        env = ev.env
        if (
            ev.vectorise
            and ev._loop_axis < _MAX_LOOP_AXES
            and s not in ev.devectorised
            and hi - lo >= 1
            and vectorise
        ):
            over = over_budget(f"the {hi - lo + 1} row indexes of this loop", hi - lo + 1)
            if over:
                raise ev.error(s, over)
            _run_vectorised(ev, s, body, np_rows=onp.arange(lo, hi + 1), types=local_types)
            return
        env[var] = lo
        n = len(env)
        if invariants and hi > lo:
            ev._memos[s] = {"range": (lo, hi)}
            try:
                _run_sequential(ev, s, body, lo, hi, jumps, n)
            finally:
                ev._memos.pop(s, None)
            return
        _run_sequential(ev, s, body, lo, hi, jumps, n)

    return run


def _run_sequential(ev, s: ast.For, body, lo: int, hi: int, jumps: bool, n: int) -> None:
    """The loop one index at a time (its index already in env, `n` names in env)."""
    env = ev.env
    var = s.var
    if jumps:
        for i in range(lo, hi + 1):
            env[var] = i
            try:
                body(ev)
            except LoopBreak:
                break
            except LoopContinue:
                pass
            finally:
                if len(env) != n:
                    trim(env, n)
    else:
        for i in range(lo, hi + 1):
            env[var] = i
            body(ev)
            if len(env) != n:
                trim(env, n)
    env.pop(var, None)


def _run_vectorised(ev, s: ast.For, body, np_rows, types) -> None:
    """The loop's body once, its index a batch axis: axis 1, or axis 2 inside another vectorised
    loop (the forward algorithm's `for (k) { for (j) acc[j] = ...; gamma[t, k] = ...; }`)."""
    env = ev.env
    var = s.var
    private = private_variables(s)
    if any(name not in env for name in private):
        raise Devectorise(s)
    outer = [getattr(ev, name) for name in _LOOP_STATE]
    axis = ev._loop_axis + 1
    if axis > 1:
        ev._outer_counts = ev._outer_counts + (len(ev._loop_rows),)
        ev._outer_rows = ev._outer_rows + (ev._loop_rows,)
    ev._reduction_frames = ev._reduction_frames + (reductions(s),)
    ev._current_loop = s
    ev.in_vector_loop = True
    ev._loop_axis = axis
    env.pop(var, None)
    ev._loop_start = len(env)  # the loop index and the body's locals follow in env
    env[var] = np_rows.reshape((1,) * axis + (-1,))
    ev._loop_rows = np_rows
    ev._loop_types = types
    try:
        for name, stype in private.items():
            env[name] = _private_copy(ev, env[name], stype, s)
        n = len(env)
        body(ev)
        if len(env) != n:
            trim(env, n)
        for name, stype in private.items():
            env[name] = _last_row(env[name], stype, s, axis)
    finally:
        for name, value in zip(_LOOP_STATE, outer, strict=True):
            setattr(ev, name, value)
        env.pop(var, None)


def run_foreach(ev, s: ast.ForEach) -> None:
    seq = ev.expr(s.iterable)
    t = s.iterable.type
    b = fast_ndim(seq) - t.ndim
    if b and onp.shape(raw(seq))[0] > 1:
        raise NeedsPerSample()
    n = fast_shape(seq)[b]
    ev.charge_loop(s, n)
    for i in range(n):
        ev.env[s.var] = seq[(slice(None),) * b + (i,)]
        if ev._loop_body(s.body):
            break


def run_while(ev, s: ast.While) -> None:
    while ev.truth(ev.expr(s.cond), s.cond):
        ev.charge_loop(s, 1)
        if ev._loop_body(s.body):
            break


def _private_copy(ev, value, stype: SType, loop: ast.For):
    """A fresh, unwritten copy of a loop's private variable (see loop_vectorisation.plan)."""
    if not stype.ndim:
        return value
    if value.__class__ is ElementList:
        n, elem_shape = len(value.items), value.elem_shape
    elif value is not None:
        shape = type_shape(value, stype)
        n, elem_shape = shape[0], shape[1:]
    else:
        raise Devectorise(loop)
    return ElementList([None] * n, stype.element(), elem_shape, stype.base, strict=loop)


def _last_row(value, stype: SType, loop: ast.For, axis: int):
    """What the sequential loop leaves in a private variable: the last iteration's value."""
    if value.__class__ is ElementList:
        value = value.materialise()  # raises Devectorise if an element was never written
    shape = fast_shape(value)
    b = len(shape) - stype.ndim
    if b <= axis:
        return value
    if b > axis + 1:
        raise Devectorise(loop)
    return value[(slice(None),) * axis + (-1,)]


def _local_type_ndims(body: ast.Stmt) -> dict[str, int]:
    """Type ranks of the variables declared in a loop body (loop indices are int scalars)."""
    out: dict[str, int] = {}
    stack = [body]
    while stack:
        st = stack.pop()
        if isinstance(st, ast.Decl):
            out[st.name] = decl_stype(st).ndim
        elif isinstance(st, ast.Block):
            stack.extend(st.stmts)
        elif isinstance(st, ast.For | ast.ForEach | ast.While):
            stack.append(st.body)
        elif isinstance(st, ast.If):
            stack.append(st.then)
            if st.otherwise is not None:
                stack.append(st.otherwise)
    return out


def _has_jump(s: ast.Stmt) -> bool:
    """Whether `break` / `continue` can reach this loop body (not counting nested loops')."""
    if isinstance(s, ast.Break | ast.Continue):
        return True
    if isinstance(s, ast.Block):
        return any(_has_jump(inner) for inner in s.stmts)
    if isinstance(s, ast.If):
        return _has_jump(s.then) or (s.otherwise is not None and _has_jump(s.otherwise))
    return False
