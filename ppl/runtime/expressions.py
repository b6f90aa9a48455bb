"""The expression compiler: each expression becomes, once, a closure `f(ev) -> value` kept on its
AST node, with its types, operators, library functions and distributions resolved up front."""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp

from ppl.ir.marks import compiled_of
from ppl.language import ast
from ppl.language.checker import split_dist_call
from ppl.language.types import align, align_batch, fast_ndim, fast_shape
from ppl.library.distributions import get_distribution
from ppl.library.distributions.base import where
from ppl.library.functions import CONSTANTS, lookup
from ppl.library.ode import SOLVERS
from ppl.runtime import user_calls
from ppl.runtime.densities import call_site_density
from ppl.runtime.fused import compile_fused, fusable
from ppl.runtime.ode_calls import compile_ode_call
from ppl.runtime.operators import binop_fn
from ppl.runtime.signals import Devectorise, NeedsPerSample, Rejected, describe
from ppl.runtime.values import ElementList, raw, stack_items


def expr_fn(e: ast.Expr):
    compiled = compiled_of(e)
    if compiled.value is None:
        compiled.value = compile_expr(e)
    return compiled.value


def compile_expr(e: ast.Expr):
    names = e.marks.constant if e.marks is not None else None  # ppl.ir.passes.constant_folding
    if names is not None:
        return _compile_constant(_compile_value(e), names)
    return _compile_value(e)


def _compile_constant(compute, names: tuple[str, ...]):
    """A data-only expression: computed once, again only when one of its names holds another
    array (a streamed chunk, a minibatch)."""
    held: list = []  # [the arrays it was computed from, its value]

    def constant(ev):
        env = ev.env
        arrays = [env.get(n) for n in names]
        if held and all(a is b for a, b in zip(held[0], arrays, strict=True)):
            return held[1]
        value = compute(ev)
        held[:] = [arrays, value]
        return value

    return constant


def _compile_value(e: ast.Expr):
    if isinstance(e, ast.Num):
        value = e.value
        return lambda ev: value
    if isinstance(e, ast.Var):
        name = e.name

        def var(ev):
            try:
                v = ev.env[name]
            except KeyError:
                if name in CONSTANTS:
                    return CONSTANTS[name]
                raise ev.error(e, f"'{name}' has no value here") from None
            if v.__class__ is ElementList:
                v = v.materialise()
                ev.env[name] = v
            return v

        return var
    if fusable(e):
        fused = compile_fused(e, expr_fn)
        if fused is not None:
            return fused
    if isinstance(e, ast.BinOp):
        if e.op in ("&&", "||"):
            return lambda ev: ev.logical(e)
        fa, fb = expr_fn(e.left), expr_fn(e.right)
        op_fn = binop_fn(e.op, e.left.type, e.right.type, e)
        return lambda ev: op_fn(ev, fa(ev), fb(ev))
    if isinstance(e, ast.UnOp):
        return _compile_unop(e)
    if isinstance(e, ast.Ternary):
        return _compile_ternary(e)
    if isinstance(e, ast.Index):
        return _compile_index(e)
    if isinstance(e, ast.ArrayExpr | ast.RowVectorExpr):
        fns = [expr_fn(i) for i in e.items]

        def array_expr(ev):
            vals = [f(ev) for f in fns]
            k = e.items[0].type.ndim
            vals = align_batch(vals, [k] * len(vals))
            nb = fast_ndim(vals[0]) - k
            batch = onp.broadcast_shapes(*[fast_shape(v)[:nb] for v in vals])
            vals = [
                v if fast_shape(v)[:nb] == batch else v * onp.ones(batch + (1,) * k) for v in vals
            ]
            return stack_items(vals, nb)

        return array_expr
    if isinstance(e, ast.Call):
        return _compile_call(e)

    def unknown(ev):
        raise ev.error(e, f"cannot evaluate {type(e).__name__}")

    return unknown


def _compile_unop(e: ast.UnOp):
    f = expr_fn(e.operand)
    if e.op == "neg":
        return lambda ev: -f(ev)
    if e.op == "not":

        def not_(ev):
            v = f(ev)
            if isinstance(v, int | float):
                return int(not v)
            return np.where(v, 0, 1)

        return not_

    def transpose(ev):
        v = f(ev)
        t = e.operand.type
        if t.is_scalar:
            return v
        if t.kind == "matrix":
            return np.swapaxes(v, -1, -2)
        return v

    return transpose


def _compile_ternary(e: ast.Ternary):
    fc, ft, ff = expr_fn(e.cond), expr_fn(e.if_true), expr_fn(e.if_false)

    def ternary(ev):
        c = fc(ev)
        if onp.size(raw(c)) == 1:
            return ft(ev) if bool(onp.asarray(raw(c)).reshape(())) else ff(ev)
        a, b = ft(ev), ff(ev)
        c, a, b = align([c, a, b], [0, e.if_true.type.ndim, e.if_false.type.ndim])
        return where(c, a, b)

    return ternary


def _compile_index(e: ast.Index):
    base = e.base
    base_fn = expr_fn(base)
    base_name = base.name if isinstance(base, ast.Var) else None
    list_fast = base_name is not None and e.items[0].kind == "single"
    single = len(e.items) == 1
    first_fn = expr_fn(e.items[0].lo) if e.items[0].kind == "single" else None
    t = base.type
    suffix = f" for '{base_name}'" if base_name is not None else ""
    plan = []
    for item in e.items:
        if item.kind == "single":
            plan.append((item, expr_fn(item.lo), item.lo.type.is_scalar))
        else:
            plan.append((item, None, False))

    def index(ev):
        if list_fast:
            lst = ev.env.get(base_name)
            if lst.__class__ is ElementList:
                idx = first_fn(ev)
                if isinstance(idx, int):
                    items = lst.items
                    if not 1 <= idx <= len(items):
                        raise ev.error(
                            e, f"index {idx} out of range 1..{len(items)} for '{base_name}'"
                        )
                    v = items[idx - 1]
                    if v is None:
                        v = lst.unwritten()
                    if single:
                        return v
                    # x[t, ...] on an array being filled: index the element, not the whole array
                    # (materialising it here made a recurrence over x quadratic in its length)
                    return rest(ev, v, 1, t.ndim - 1)
        return rest(ev, base_fn(ev), 0, t.ndim)

    def rest(ev, value, start: int, ndim_left: int):
        axis = 0  # current type axis
        for item, lo_fn, scalar_index in plan[start:]:
            try:
                nd = value.ndim
                shape = value.shape
            except AttributeError:
                nd = onp.ndim(value)
                shape = onp.shape(value)
            b = nd - ndim_left
            n = shape[b + axis]
            if lo_fn is not None:
                idx = lo_fn(ev)
                if idx.__class__ is int or isinstance(idx, int) or onp.ndim(raw(idx)) == 0:
                    i = int(raw(idx))
                    if not 1 <= i <= n:
                        raise ev.error(item.lo, f"index {i} out of range 1..{n}" + suffix)
                    value = value[(slice(None),) * (b + axis) + (i - 1,)]
                    ndim_left -= 1
                    continue
                arr = onp.asarray(raw(idx))
                if arr.size and (arr.min() < 1 or arr.max() > n):
                    raise ev.error(item.lo, f"index out of range 1..{n}")
                if scalar_index:  # batched scalar index (vectorised loop)
                    value = _gather(value, b, axis, arr - 1)
                    ndim_left -= 1
                    continue
                if onp.ndim(arr) != 1:
                    if ev.in_vector_loop:
                        raise Devectorise(ev._current_loop)
                    raise NeedsPerSample()
                value = value[(slice(None),) * (b + axis) + (arr - 1,)]
                axis += 1
                continue
            lo, hi = ev.slice_bounds(item, n)
            value = value[(slice(None),) * (b + axis) + (slice(lo - 1, max(hi, lo - 1)),)]
            axis += 1
        return value

    return index


def _compile_call(e: ast.Call):
    name = e.name
    arg_fns = [expr_fn(a) for a in e.args]
    sig = getattr(e, "user_function", None)
    if sig is not None:
        if name in SOLVERS:
            return compile_ode_call(e, arg_fns)
        return user_calls.compile_call(e, sig.definition, arg_fns)
    fn = lookup(name)
    if fn is None:
        if name in CONSTANTS and not e.args:
            value = CONSTANTS[name]
            return lambda ev: value
        split = split_dist_call(name)
        dist = get_distribution(split[0]) if split is not None else None
        if dist is None or split[1] == "_rng":
            return lambda ev: ev.call(e)
        types = [a.type for a in e.args]
        cache = []

        def lpdf(ev):
            args = [f(ev) for f in arg_fns]
            if not cache:
                cache.append(
                    call_site_density(dist, [t.ndim for t in types],
                             [dist.value_ndim] + list(dist.param_ndims),
                             e.marks is not None and e.marks.sufficient_statistics)
                )  # fmt: skip
            return cache[0](args)

        return lpdf
    impl = fn.impl
    types = [a.type for a in e.args]

    def failed(ev, err):
        if isinstance(err, Devectorise | NeedsPerSample):
            raise err
        if ev.in_vector_loop:
            raise Devectorise(ev._current_loop) from None
        if ev.draws_may_fail and isinstance(err, onp.linalg.LinAlgError):
            raise Rejected(f"{ev.error(e, f'{name}: {describe(err)}')}") from None  # the draw
        raise ev.error(e, f"{name}: {describe(err)}") from None

    if len(arg_fns) == 1:
        f0 = arg_fns[0]

        def call1(ev):
            args = [f0(ev)]
            try:
                return impl(args, types)
            except Exception as err:  # noqa: BLE001 - numerical library errors become user errors
                failed(ev, err)

        return call1

    def call(ev):
        args = [f(ev) for f in arg_fns]
        try:
            return impl(args, types)
        except Exception as err:  # noqa: BLE001 - numerical library errors become user errors
            failed(ev, err)

    return call


def _gather(value, b: int, axis: int, idx):
    """value[..., idx, ...] on type axis `axis` where idx carries batch axes of its own.

    The value's b batch axes are indexed by aranges shaped to broadcast with idx's axes (batch
    axes line up from the left), so the value itself is not reshaped: one autograd node."""
    bi = idx.ndim
    nb = max(b, bi)
    shape = fast_shape(value)
    if bi < nb:
        idx = idx.reshape(idx.shape + (1,) * (nb - bi))
    index = []
    for j in range(b):
        size = shape[j]
        ar = onp.arange(size) if size > 1 else onp.zeros(1, dtype=int)
        index.append(ar.reshape((1,) * j + (-1,) + (1,) * (nb - j - 1)))
    index.extend([slice(None)] * axis)
    index.append(idx)
    return value[tuple(index)]
