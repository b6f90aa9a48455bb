"""`for`, `foreach` and `while` loops: a `for` loop whose iterations are independent runs once with
its index as a batch axis (vectorised), otherwise one index at a time with its loop-invariant
values kept (ppl.runtime.loop_memos)."""

from __future__ import annotations

import math
import operator
import time

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
    nested = _nested_loops(s.body, _assigned_names(s.body) | {s.var})

    def run(ev):
        lo = ev.int_value(lo_fn(ev), s.lo)
        hi = ev.int_value(hi_fn(ev), s.hi)
        if hi < lo:
            return
        # the rows of the enclosing vectorised loops: each of their rows runs this loop
        around = math.prod(ev._outer_counts or (1,)) * (
            len(ev._loop_rows) if ev.in_vector_loop and ev._loop_rows is not None else 1
        )
        if nested:  # the loops inside, counted before any runs (`for i ... for j ...`)
            inner = _count(nested, ev.env)
            if inner:
                ev.check_loop_work(s, (hi - lo + 1) * around * inner)
        ev.charge_loop(s, (hi - lo + 1) * around)
        env = ev.env
        if (
            ev.vectorise
            and ev._loop_axis < _MAX_LOOP_AXES
            and s not in ev.devectorised
            and hi - lo >= 1
            and vectorise
            # the batch a vectorised run allocates: its rows times those around it; over the
            # memory budget, the loop runs one index at a time instead
            and not over_budget("rows", (hi - lo + 1) * around * ev.draws_hint)
        ):
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
    start = time.monotonic()
    if jumps:
        for i in range(lo, hi + 1):
            env[var] = i
            if not i & 255:
                ev.check_time(s, start)
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
            if not i & 255:  # every 256 iterations: the time budget, a Ctrl-C (ppl.limits)
                ev.check_time(s, start)
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
    start = time.monotonic()
    for i in range(n):
        if i and not i & 255:
            ev.check_time(s, start)
        ev.env[s.var] = seq[(slice(None),) * b + (i,)]
        if ev._loop_body(s.body):
            break


def run_while(ev, s: ast.While) -> None:
    start = time.monotonic()
    k = 0
    while ev.truth(ev.expr(s.cond), s.cond):
        ev.charge_loop(s, 1)
        k += 1
        if not k & 255:
            ev.check_time(s, start)
        if ev._loop_body(s.body):
            break


_ARITHMETIC = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _assigned_names(body: ast.Stmt) -> set[str]:
    """Names a loop body declares or assigns (its loop indexes too): a bound naming one of them
    is not known before the body runs."""
    names: set[str] = set()
    stack = [body]
    while stack:
        st = stack.pop()
        if isinstance(st, ast.Decl):
            names.add(st.name)
        elif isinstance(st, ast.Assign):
            lhs = st.lhs
            while isinstance(lhs, ast.Index):
                lhs = lhs.base
            names.add(getattr(lhs, "name", ""))
        elif isinstance(st, ast.For | ast.ForEach):
            names.add(st.var)
            stack.append(st.body)
        elif isinstance(st, ast.Block):
            stack.extend(st.stmts)
        elif isinstance(st, ast.While):
            stack.append(st.body)
        elif isinstance(st, ast.If):
            stack.extend(x for x in (st.then, st.otherwise) if x is not None)
    return names


def _nested_loops(body: ast.Stmt, assigned: set[str]) -> list:
    """The `for` loops a body runs on every iteration (not under an `if`) whose bounds are known
    before it runs: [(lo, hi, their nested loops)]."""
    stmts = body.stmts if isinstance(body, ast.Block) else [body]
    out = []
    for st in stmts:
        if isinstance(st, ast.Block):
            out += _nested_loops(st, assigned)
        elif isinstance(st, ast.For) and _static(st.lo, assigned) and _static(st.hi, assigned):
            out.append((st.lo, st.hi, _nested_loops(st.body, assigned)))
    return out


def _static(e, assigned: set[str]) -> bool:
    if isinstance(e, ast.Num):
        return isinstance(e.value, int)
    if isinstance(e, ast.Var):
        return e.name not in assigned
    if isinstance(e, ast.BinOp) and e.op in _ARITHMETIC:
        return _static(e.left, assigned) and _static(e.right, assigned)
    return False


def _int_of(e, env: dict) -> int | None:
    if isinstance(e, ast.Num):
        return e.value
    if isinstance(e, ast.Var):
        v = env.get(e.name)
        if isinstance(v, bool):
            return None
        if isinstance(v, int | onp.integer) or (
            isinstance(v, onp.ndarray) and v.shape == () and v.dtype.kind in "iu"
        ):
            return int(v)
        return None
    a, b = _int_of(e.left, env), _int_of(e.right, env)
    return None if a is None or b is None else _ARITHMETIC[e.op](a, b)


def _count(loops: list, env: dict) -> int:
    """The element-iterations of these nested loops, as far as their bounds are known."""
    total = 0
    for lo, hi, inner in loops:
        a, b = _int_of(lo, env), _int_of(hi, env)
        if a is not None and b is not None and b >= a:
            total += (b - a + 1) * max(1, _count(inner, env))
    return total


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
