"""Runs checked statements on arrays with leading batch axes: the engine behind the log joint.

Every latent carries a leading axis of S Monte Carlo samples, so one run evaluates S draws.
`for` loops whose iterations are independent (the common `y[n] ~ normal(mu[n], sigma)` shape) run
once with the loop index as an extra batch axis instead of once per iteration.
"""

from __future__ import annotations

import math
import operator

import autograd.numpy as np
import numpy as onp
from autograd.extend import defvjp_argnum, defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast

from ppl.errors import ModelError
from ppl.ir.marks import compiled_of
from ppl.ir.passes.loop_invariants import marked as marked_invariants
from ppl.ir.passes.loop_vectorisation import private_variables, reduction_increment, reductions
from ppl.ir.queries import declared_ranks
from ppl.language import ast
from ppl.language.checker import split_dist_call
from ppl.language.parser import format_location
from ppl.language.types import (
    SType,
    align,
    align_batch,
    fast_ndim,
    fast_shape,
    sum_to_batch0,
    to_array,
)
from ppl.library.distributions import get_distribution
from ppl.library.distributions.base import where
from ppl.library.functions import CONSTANTS, lookup, matmul
from ppl.library.ode import SOLVERS
from ppl.library.printing import format_value, print_statement
from ppl.limits import LIMITS, elements, over_budget
from ppl.runtime import user_calls
from ppl.runtime.ode_calls import compile_ode_call
from ppl.runtime.row_selection import (
    NotPerRow,
    branch_rows,
    broadcast,
    draw_split,
    put_draws,
    put_rows,
    scatter_axis,
    take_draws,
    take_rows,
)


class Devectorise(Exception):
    """A loop run with a batched index met something it cannot do; rerun it one index at a time."""

    def __init__(self, loop: ast.For):
        super().__init__("devectorise")
        self.loop = loop


def _devectorise(ev) -> None:
    raise Devectorise(ev._current_loop)


class NeedsPerSample(Exception):
    """Control flow depends on a latent value: evaluate each Monte Carlo sample on its own."""


class Rejected(Exception):
    """`reject(...)` was reached: the current draw has zero density."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


def _raw(x):
    return getattr(x, "_value", x)


@primitive
def _stack(axis, *items):
    return onp.stack(items, axis=axis)


def _stack_vjp(argnum, ans, args, kwargs):
    index = (slice(None),) * args[0] + (argnum - 1,)
    return lambda g: g[index]


defvjp_argnum(_stack, _stack_vjp)


def stack_items(items: list, axis: int):
    """`np.stack` of same-shape arrays as one autograd node (autograd's own stack makes three
    nodes per item: an array conversion, an expand_dims and a slice of the concatenation)."""
    return _stack(axis, *items)


class ElementList:
    """An array being filled element by element (`x[t] = ...` in a loop): O(1) per assignment."""

    def __init__(
        self,
        items: list,
        elem_type: SType,
        elem_shape: tuple[int, ...],
        base: str,
        strict: ast.For | None = None,
    ):
        self.items = items
        self.elem_type = elem_type
        self.elem_shape = elem_shape
        self.base = base
        # a vectorised loop's private copy: reading an element no row has written yet would read
        # the previous iteration's value in the sequential loop, so that loop runs instead
        self.strict = strict

    def unwritten(self):
        """An element not assigned yet: NaN (or 0) as declared, or a fallback for a private copy."""
        if self.strict is not None:
            raise Devectorise(self.strict)
        return onp.full(self.elem_shape, onp.nan if self.base == "real" else 0)

    @classmethod
    def from_array(cls, arr, stype: SType) -> ElementList:
        arr = to_array(arr)
        b = fast_ndim(arr) - stype.ndim
        shape = fast_shape(arr)
        n = shape[b]
        items = [arr[(slice(None),) * b + (i,)] for i in range(n)]
        return cls(items, stype.element(), tuple(shape[b + 1 :]), stype.base)

    def materialise(self):
        k = self.elem_type.ndim
        items = [self.unwritten() if v is None else to_array(v) for v in self.items]
        if not items:
            return onp.zeros((0,) + self.elem_shape)
        first = fast_shape(items[0])
        if all(fast_shape(v) == first for v in items):
            return stack_items(items, len(first) - k)
        items = align_batch(items, [k] * len(items))
        nb = fast_ndim(items[0]) - k
        batch = onp.broadcast_shapes(*[fast_shape(v)[:nb] for v in items])
        items = [broadcast(v, batch + fast_shape(v)[nb:]) for v in items]
        return stack_items(items, nb)


class Evaluator:
    """Executes statements; `env` maps names to arrays (or ElementLists being filled).

    Each statement and expression is compiled once, on first use, into a Python closure
    (`_stmt_fn`, `_expr_fn`) that holds everything static about it (types, operators, library
    functions, distributions), so running the model does no AST dispatch.
    """

    def __init__(
        self,
        program: ast.Program,
        env: dict,
        rng=None,
        vectorise: bool = True,
        devectorised: set | None = None,
    ):
        self.program = program
        self.env = env
        self.target = 0.0
        self.rng = rng
        self.vectorise = vectorise
        self.devectorised = devectorised if devectorised is not None else set()
        self.in_vector_loop = False
        self._loop_axis = 0  # batch axis of the innermost vectorised loop's index (0: none)
        self._outer_counts: tuple[int, ...] = ()  # row counts of the enclosing vectorised loops
        self._reduction_frames: tuple = ()  # each active vectorised loop's accumulating statements
        self._outer_rows: tuple = ()  # the row indexes of the enclosing vectorised loops
        self._current_loop = self._loop_rows = self._loop_start = self._loop_types = None
        self._memos: dict = {}  # sequential loop -> its loop-invariant values (ppl.ir.passes)
        self.call_depth = 0  # nesting of user-defined function calls (ppl.runtime.user_calls)
        self.rejected: str | None = None  # the last reject() message of draws rejected in a batch
        self.draws_may_fail = False  # parameters in play: a LinAlgError rejects the draw
        self.on_statement = None  # optional callback(stmt) after each model statement (ppl check)
        # when a list: (statement, elementwise log density) for every ~ / target += run, and
        # (declaration, elementwise log-Jacobian) for every latent (BBVI's Markov blankets)
        self.terms: list | None = None
        self.loop_budget = LIMITS.max_loop_iterations  # element-iterations left (ppl.limits)

    # ---- errors
    def error(self, node, message: str) -> ModelError:
        pos = getattr(node, "pos", None) or ast.Pos(0, 0)
        return ModelError(
            format_location(self.program.filename, self.program.source, pos.line, pos.col, message)
        )

    # ---- statements
    def run(self, stmts: list[ast.Stmt]) -> None:
        for s in stmts:
            _stmt_fn(s)(self)

    def stmt(self, s: ast.Stmt) -> None:
        _stmt_fn(s)(self)

    def scoped(self, s: ast.Stmt) -> None:
        env = self.env
        n = len(env)
        _stmt_fn(s)(self)
        if len(env) != n:
            _trim(env, n)

    def _loop_body(self, body: ast.Stmt) -> bool:
        """Runs one iteration; True if it hit `break`."""
        try:
            self.scoped(body)
        except _Break:
            return True
        except _Continue:
            return False
        return False

    def truth(self, value, node) -> bool:
        if value.__class__ is int:
            return bool(value)
        arr = onp.asarray(_raw(value))
        if arr.size == 1:
            return bool(arr.reshape(()))
        if self.in_vector_loop:
            raise Devectorise(self._current_loop)
        raise NeedsPerSample()

    def int_value(self, v, node) -> int:
        if v.__class__ is int:
            return v
        arr = onp.asarray(_raw(v))
        if arr.size != 1:
            if self.in_vector_loop:
                raise Devectorise(self._current_loop)
            raise self.error(node, "expected a single integer here")
        return int(arr.reshape(()))

    # ---- declarations and assignment
    def charge_loop(self, s: ast.Stmt, iterations: int) -> None:
        """Count a loop's element-iterations against --max-loop-iterations, before running them."""
        self.loop_budget -= iterations
        if self.loop_budget < 0:
            raise self.error(
                s,
                f"this loop goes past the limit of {LIMITS.max_loop_iterations:,} loop "
                "iterations in one run of the block; raise it with --max-loop-iterations N if "
                "the loop is meant to run this long",
            )

    def shape_of(self, spec: ast.TypeSpec, name: str = "") -> tuple[int, ...]:
        dims = [self.int_value(self.expr(e), e) for e in spec.array_sizes]
        sizes = [self.int_value(self.expr(e), e) for e in spec.sizes]
        if spec.kind in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
            spec.kind == "cholesky_factor_cov" and len(sizes) == 1
        ):
            sizes = sizes * 2
        for e, n in zip(spec.array_sizes + spec.sizes, dims + sizes, strict=False):
            if n < 0:
                raise self.error(e, f"a size must not be negative, got {n}")
        if spec.kind in _NONEMPTY_KINDS and sizes and sizes[0] < 1:
            message = f"a {spec.kind} needs at least 1 element, got {sizes[0]}"
            raise self.error(spec.sizes[0], message)
        over = over_budget(f"'{name}' of size {dims + sizes}" if name else f"size {dims + sizes}",
                           elements(dims + sizes))  # fmt: skip
        if over:
            raise self.error((spec.array_sizes + spec.sizes)[0], over)
        return tuple(dims + sizes)

    def declare(self, d: ast.Decl) -> None:
        shape = self.shape_of(d.spec, d.name)
        stype = _decl_stype(d)
        if d.init is not None:
            value = self.expr(d.init)
            self.check_shape(d, d.name, value, d.init.type, shape)
            self.env[d.name] = self.promote(value, stype)
        elif shape:
            fill = onp.nan if stype.base == "real" else 0
            if stype.ndim and shape[0] > 0:
                elem_shape = shape[1:]
                self.env[d.name] = ElementList(
                    [None] * shape[0], stype.element(), elem_shape, stype.base
                )
            else:
                self.env[d.name] = onp.full(shape, fill)
        else:
            self.env[d.name] = onp.nan if stype.base == "real" else 0

    def promote(self, value, stype: SType):
        if stype.base == "real" and isinstance(value, int | bool):
            return float(value)
        return value

    def check_shape(self, node, name, value, vtype: SType, shape: tuple[int, ...]) -> None:
        vshape = tuple(fast_shape(value))[fast_ndim(value) - vtype.ndim :] if vtype.ndim else ()
        if vshape != tuple(shape):
            raise self.error(
                node,
                f"size mismatch: '{name}' is declared with dimensions "
                f"{list(shape)} but the value has {list(vshape)}",
            )

    def assign(self, s: ast.Assign) -> None:
        lhs = s.lhs
        rhs = self.expr(s.rhs)
        if s.op != "=":
            current = self.expr(lhs)
            rhs = self.binop(s.op[:-1], current, lhs.type, rhs, s.rhs.type, s)
            rtype = lhs.type
        else:
            rtype = s.rhs.type
        self.store(s, rhs, rtype)

    def store(self, s: ast.Assign, rhs, rtype: SType) -> None:
        """Assign an evaluated right-hand side to the statement's target."""
        lhs = s.lhs
        if isinstance(lhs, ast.Var):
            old = self.env.get(lhs.name)
            if old is not None and not isinstance(old, int | float) and lhs.type.ndim:
                if isinstance(old, ElementList):
                    old_shape = (len(old.items),) + old.elem_shape
                else:
                    old_shape = _type_shape(old, lhs.type)
                self.check_shape(s, lhs.name, rhs, rtype, old_shape)
            self.env[lhs.name] = self.promote(rhs, lhs.type)
            return
        # indexed assignment: collect the chain of index lists down to the variable
        chain = []
        node = lhs
        while isinstance(node, ast.Index):
            chain.append(node.items)
            node = node.base
        items = [it for group in reversed(chain) for it in group]
        name = node.name
        vtype = node.type
        current = self.env[name]
        self.env[name] = self.set_items(current, vtype, items, rhs, rtype, s)

    def set_items(self, current, vtype: SType, items, value, value_type: SType, node):
        """Functional update of `current[items] = value`; ElementLists make x[i] = v cheap."""
        first, rest = items[0], items[1:]
        if first.kind == "single":
            idx = self.expr(first.lo)
            if isinstance(idx, int | onp.integer) or (onp.ndim(_raw(idx)) == 0):
                i = int(_raw(idx))
                if not isinstance(current, ElementList):
                    current = ElementList.from_array(current, vtype)
                n = len(current.items)
                if not 1 <= i <= n:
                    raise self.error(node, f"index {i} out of range 1..{n}")
                if rest:
                    elem = current.items[i - 1]
                    if elem is None:
                        elem = current.unwritten()
                    elem = self.set_items(elem, vtype.element(), rest, value, value_type, node)
                    if isinstance(elem, ElementList):
                        elem = elem.materialise()
                    current.items[i - 1] = elem
                else:
                    current.items[i - 1] = self.promote(value, vtype.element())
                return current
            if self.in_vector_loop and not rest and first.lo.type.is_scalar:
                return self.scatter_loop(current, vtype, idx, value, node)
            # multi-index assignment
            positions = [int(k) for k in onp.asarray(_raw(idx)).ravel()]
            return self._set_positions(current, vtype, positions, rest, value, value_type, node)
        # slices
        n = (
            len(current.items)
            if isinstance(current, ElementList)
            else _type_shape(current, vtype)[0]
        )
        lo, hi = self.slice_bounds(first, n)
        positions = list(range(lo, hi + 1))
        return self._set_positions(current, vtype, positions, rest, value, value_type, node)

    def _set_positions(self, current, vtype, positions, rest, value, value_type, node):
        if not isinstance(current, ElementList):
            current = ElementList.from_array(current, vtype)
        n = len(current.items)
        vb = fast_ndim(value) - value_type.ndim
        for j, i in enumerate(positions):
            if not 1 <= i <= n:
                raise self.error(node, f"index {i} out of range 1..{n}")
            part = value[(slice(None),) * vb + (j,)]
            if rest:
                elem = current.items[i - 1]
                if elem is None:  # a declared, not yet assigned row (as in the single-index case)
                    elem = current.unwritten()
                elem = self.set_items(elem, vtype.element(), rest, part, value_type.element(), node)
                if isinstance(elem, ElementList):
                    elem = elem.materialise()
                current.items[i - 1] = elem
            else:
                current.items[i - 1] = part
        return current

    def scatter_loop(self, current, vtype: SType, idx, value, node):
        """`x[i] = v` inside a vectorised loop: v's loop axis becomes x's first type axis.

        The rows may be any subset of the loop's (inside a branch, ppl.runtime.row_selection); the
        positions they write must be distinct, or the order of the writes would matter."""
        rows = self._loop_rows
        arr = onp.asarray(_raw(idx)).reshape(-1)
        count = len(rows)
        if arr.size != count:
            raise Devectorise(self._current_loop)
        increasing = count < 2 or bool(onp.all(arr[1:] > arr[:-1]))
        if not increasing and onp.unique(arr).size != count:
            raise Devectorise(self._current_loop)
        elem_nd = vtype.ndim - 1
        axis = self._loop_axis
        value = to_array(value)
        vb = fast_ndim(value) - elem_nd
        if vb > axis + 1:
            raise Devectorise(self._current_loop)
        shape = fast_shape(value)
        if vb < axis + 1 or shape[axis] != count:  # the value does not vary with this index
            value = np.reshape(value, shape[:vb] + (1,) * (axis + 1 - vb) + shape[vb:])
            shape = fast_shape(value)
            value = broadcast(value, shape[:axis] + (count,) + shape[axis + 1 :])
        # (..., L, elem) -> (..., L as type axis, elem); nothing to move for scalar elements
        moved = np.moveaxis(value, axis, -(elem_nd + 1)) if elem_nd else value
        if isinstance(current, ElementList):
            n = len(current.items)
        else:
            n = _type_shape(current, vtype)[0]
        if arr.min() < 1 or arr.max() > n:
            raise self.error(node, f"index out of range 1..{n}")
        if increasing and count == n and arr[0] == 1:
            return moved  # every element written: the old value is not needed
        if isinstance(current, ElementList):
            current = current.materialise()
        parts = align_batch([current, moved], [vtype.ndim] * 2)
        nb = fast_ndim(parts[1]) - vtype.ndim
        batch = onp.broadcast_shapes(*[fast_shape(p)[:nb] for p in parts])
        parts = [broadcast(p, batch + fast_shape(p)[nb:]) for p in parts]
        return scatter_axis(parts[0], nb, arr - 1, parts[1])

    # ---- model statements
    def add_lp(self, lp) -> None:
        """target += lp; the first float term replaces the initial 0.0 (no `0.0 + lp` node)."""
        t = self.target
        if t.__class__ is float and t == 0.0 and _is_float_array(lp):
            self.target = lp
        else:
            self.target = t + lp

    def tilde(self, s: ast.Tilde) -> None:
        _stmt_body(s)(self)

    def log_density(self, dist, value, vtype: SType, args, types):
        """Elementwise log density summed over the vectorised (type) axes, batch axes kept."""
        ndims = [vtype.ndim] + [t.ndim for t in types]
        events = [dist.value_ndim] + list(dist.param_ndims)
        return _density(dist, ndims, events, False)([value] + list(args))

    # ---- expressions
    def expr(self, e: ast.Expr):
        return _expr_fn(e)(self)

    def logical(self, e: ast.BinOp):
        a = self.expr(e.left)
        if onp.size(_raw(a)) == 1:
            av = bool(onp.asarray(_raw(a)).reshape(()))
            if e.op == "&&" and not av:
                return 0
            if e.op == "||" and av:
                return 1
            b = self.expr(e.right)
            if onp.size(_raw(b)) == 1:
                return int(bool(onp.asarray(_raw(b)).reshape(())))
            return np.where(b, 1, 0)
        b = self.expr(e.right)
        a, b = align([a, b], [0, 0])
        return (np.logical_and(a, b) if e.op == "&&" else np.logical_or(a, b)).astype(int)

    def binop(self, op: str, a, ta: SType, b, tb: SType, node):
        return _binop_fn(op, ta, tb, node)(self, a, b)

    def slice_bounds(self, item: ast.IndexItem, n: int) -> tuple[int, int]:
        lo = 1 if item.lo is None else self.int_value(self.expr(item.lo), item.lo)
        hi = n if item.hi is None else self.int_value(self.expr(item.hi), item.hi)
        if item.kind == "all":
            lo, hi = 1, n
        if hi >= lo and (lo < 1 or hi > n):
            raise self.error(item.lo or item.hi, f"slice {lo}:{hi} out of range 1..{n}")
        return lo, hi

    def index(self, e: ast.Index):
        return _expr_fn(e)(self)

    def call(self, e: ast.Call):
        """The generic (uncompiled) call path: library functions, constants, distributions."""
        name = e.name
        args = [self.expr(a) for a in e.args]
        types = [a.type for a in e.args]
        fn = lookup(name)
        if fn is not None:
            try:
                return fn.impl(args, types)
            except (Devectorise, NeedsPerSample):
                raise
            except Exception as err:  # noqa: BLE001 - numerical library errors become user errors
                if self.in_vector_loop:
                    raise Devectorise(self._current_loop) from None
                raise self.error(e, f"{name}: {_describe(err)}") from None
        if name in CONSTANTS and not args:
            return CONSTANTS[name]
        base, suffix = split_dist_call(name)
        dist = get_distribution(base)
        if suffix == "_rng":
            return self.draw(dist, args, types, e)
        lp = self.log_density(dist, args[0], types[0], args[1:], types[1:])
        return lp

    def draw(self, dist, args, types, node):
        if self.rng is None:
            raise self.error(
                node,
                "random number generators are only available in generated "
                "quantities and transformed data",
            )
        ndims = [t.ndim for t in types]
        events = list(dist.param_ndims)
        vec = max([k - ev for k, ev in zip(ndims, events, strict=True)] + [0])
        arrs = [onp.asarray(_raw(to_array(a)), dtype=float) for a in args]
        batches = [a.ndim - k for a, k in zip(arrs, ndims, strict=True)]
        nb = max(batches + [0])
        shaped = []
        for a, b, k, ev in zip(arrs, batches, ndims, events, strict=True):
            shape = a.shape
            shaped.append(
                a.reshape(shape[:b] + (1,) * (nb - b) + (1,) * (vec - (k - ev)) + shape[b:])
            )
        lead = onp.broadcast_shapes(
            *[a.shape[: a.ndim - ev] for a, ev in zip(shaped, events, strict=True)]
        )
        shaped = [
            onp.broadcast_to(a, lead + a.shape[a.ndim - ev :])
            for a, ev in zip(shaped, events, strict=True)
        ]
        out = dist.sample(self.rng, *shaped, size=lead)
        return onp.asarray(out)


# ---- compilation of statements and expressions into closures ------------------------------------
#
# `_expr_fn(e)` returns `f(ev) -> value` and `_stmt_fn(s)` returns `f(ev) -> None`, built once per
# AST node and kept on it. They do exactly what the generic methods of `Evaluator` do, with the
# static parts (types, operators, functions, distributions) resolved at compile time.

_PASS_THROUGH = (
    Devectorise,
    NeedsPerSample,
    Rejected,
    _Break,
    _Continue,
    ModelError,
    user_calls.FunctionReturn,
)
_NUMERIC_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError, onp.linalg.LinAlgError)
_COMPOUND = (ast.For, ast.ForEach, ast.While, ast.If, ast.Block)


def _trim(env: dict, n: int) -> None:
    """Drop the names declared since `env` had `n` entries (dicts keep insertion order; the checker
    forbids shadowing, so names that existed before a scope are never removed inside it)."""
    for name in list(env)[n:]:
        del env[name]


def _is_float_array(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype.kind == "f" and getattr(x, "ndim", 0) >= 1


def _stmt_fn(s: ast.Stmt):
    """The compiled statement, with the error handling of `Evaluator.stmt`."""
    compiled = compiled_of(s)
    if compiled.run is not None:
        return compiled.run
    body = _stmt_body(s)
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
                raise Rejected(f"{ev.error(s, _describe(e))}") from None
            raise ev.error(s, f"cannot evaluate this statement: {_describe(e)}") from None

    compiled.run = run
    return run


def _stmt_body(s: ast.Stmt):
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
        return _compile_tilde(s)
    if isinstance(s, ast.TargetInc):
        return _compile_target(s)
    if isinstance(s, ast.For):
        return _compile_for(s)
    if isinstance(s, ast.ForEach):
        return lambda ev: _run_foreach(ev, s)
    if isinstance(s, ast.While):
        return lambda ev: _run_while(ev, s)
    if isinstance(s, ast.If):
        return _compile_if(s)
    if isinstance(s, ast.Block):
        fns = [_stmt_fn(inner) for inner in s.stmts]

        def block(ev):
            env = ev.env
            n = len(env)
            for f in fns:
                f(ev)
            if len(env) != n:
                _trim(env, n)

        return block
    if isinstance(s, ast.Print):
        return print_statement(s, _expr_fn, _devectorise)
    if isinstance(s, ast.Reject):
        parts = [(a.value, None) if isinstance(a, ast.Str) else (_expr_fn(a), a) for a in s.args]

        def reject(ev):
            raise Rejected("".join(p if a is None else _reject_value(p(ev), a) for p, a in parts))

        return reject
    if isinstance(s, ast.Break):

        def brk(ev):
            raise _Break()

        return brk
    if isinstance(s, ast.Continue):

        def cont(ev):
            raise _Continue()

        return cont
    if isinstance(s, ast.Return):
        return user_calls.compile_return(s, _expr_fn)
    if isinstance(s, ast.CallStmt):
        f = _expr_fn(s.call)

        def call_stmt(ev):
            f(ev)

        return call_stmt
    return lambda ev: None


def _run_foreach(ev, s: ast.ForEach) -> None:
    seq = ev.expr(s.iterable)
    t = s.iterable.type
    b = fast_ndim(seq) - t.ndim
    if b and onp.shape(_raw(seq))[0] > 1:
        raise NeedsPerSample()
    n = fast_shape(seq)[b]
    ev.charge_loop(s, n)
    for i in range(n):
        ev.env[s.var] = seq[(slice(None),) * b + (i,)]
        if ev._loop_body(s.body):
            break


def _run_while(ev, s: ast.While) -> None:
    while ev.truth(ev.expr(s.cond), s.cond):
        ev.charge_loop(s, 1)
        if ev._loop_body(s.body):
            break


def _compile_if(s: ast.If):
    cond = _expr_fn(s.cond)
    then = _stmt_fn(s.then)
    other = _stmt_fn(s.otherwise) if s.otherwise is not None else None

    def run(ev):
        env = ev.env
        n = len(env)
        c = cond(ev)
        if c.__class__ is not int and onp.size(_raw(c)) > 1:
            if ev.in_vector_loop:
                _run_selected(ev, c, then, other)
            else:
                _run_draw_selected(ev, c, then, other)
            return
        if ev.truth(c, s.cond):
            then(ev)
        elif other is not None:
            other(ev)
        else:
            return
        if len(env) != n:
            _trim(env, n)

    return run


def _run_selected(ev, condition, then, other) -> None:
    """An `if` in a vectorised loop whose condition differs between rows: each branch runs once on
    the rows taking it (ppl.runtime.row_selection); a condition on parameters falls back to the
    ordinary
    loop, and so do BBVI's per-element terms, which expect one term per statement and row."""
    rows = ev._loop_rows
    n_rows = len(rows)
    split = branch_rows(condition, n_rows)
    if split is None or ev.terms is not None or ev._loop_axis != 1:
        raise Devectorise(ev._current_loop)
    env = ev.env
    n = len(env)
    types = ev._loop_types
    saved = {}
    for name in list(env)[ev._loop_start :]:
        value = env[name]
        saved[name] = value.materialise() if value.__class__ is ElementList else value
    outcomes = []
    try:
        for branch, sel in zip((then, other), split, strict=True):
            if branch is None or sel.size == 0:
                continue
            narrowed = {k: take_rows(v, types.get(k, 0), sel, n_rows) for k, v in saved.items()}
            env.update(narrowed)
            ev._loop_rows = rows[sel]
            try:
                branch(ev)
            finally:
                ev._loop_rows = rows
            if len(env) != n:
                _trim(env, n)
            outcomes.append((sel, narrowed, {k: env[k] for k in saved}))
        for name, value in saved.items():
            for sel, before, after in outcomes:
                new = after[name]
                if new is before[name]:
                    continue
                if new.__class__ is ElementList:
                    new = new.materialise()
                value = put_rows(value, types.get(name, 0), sel, new, n_rows)
            env[name] = value
    except NotPerRow:
        raise Devectorise(ev._current_loop) from None


def _reject_value(value, e: ast.Expr) -> str:
    """A reject() argument as Stan prints it; of a batch of draws, the first draw's value."""
    rank = getattr(getattr(e, "type", None), "ndim", None)
    value = onp.asarray(_raw(value))
    if rank is not None and value.ndim > rank:
        value = value.reshape((-1,) + value.shape[value.ndim - rank :])[0]
    return format_value(value)


def _run_draw_selected(ev, condition, then, other) -> None:
    """An `if` whose condition differs between draws (it involves a parameter): each branch runs
    once on the draws taking it, every variable narrowed to those draws, and what it changed is put
    back at them. Falls back to one draw at a time (NeedsPerSample) when a variable's type rank is
    unknown or the caller records per-statement terms."""
    split = draw_split(condition)
    if split is None or ev.terms is not None or ev.on_statement is not None or ev.call_depth:
        raise NeedsPerSample()  # (in a function body a branch may return)
    n_draws = len(onp.asarray(_raw(condition)))
    branches = [(b, sel) for b, sel in zip((then, other), split, strict=True) if sel.size]
    if len(branches) == 1:  # every draw takes the same branch
        if branches[0][0] is not None:
            branches[0][0](ev)
        return
    ranks = _program_ranks(ev.program)
    env = ev.env
    n = len(env)
    saved = dict(env)
    if any(ranks.get(name) is None for name in saved):
        raise NeedsPerSample()
    target = ev.target
    outcomes = []
    memos, ev._memos = ev._memos, {}  # values kept for all draws do not fit the narrowed ones
    try:
        for branch, sel in branches:
            if branch is None:
                continue
            narrowed = {k: _take_draws(v, ranks[k], sel, n_draws) for k, v in saved.items()}
            env.update(narrowed)
            # element assignment changes an ElementList in place: keep what its items were
            before = {k: _snapshot(v) for k, v in narrowed.items()}
            ev.target = 0.0
            try:
                branch(ev)
            except Rejected as r:
                # reject() on the draws taking this branch: their density is zero, the others'
                # evaluation goes on (Stan rejects the one draw)
                ev.rejected = str(r)
                ev.target = onp.full(len(sel), -onp.inf)
            if len(env) != n:
                _trim(env, n)
            outcomes.append((sel, before, dict(env), ev.target))
        for name, value in saved.items():
            for sel, before, after, _ in outcomes:
                value = _merge_draws(value, before[name], after[name], ranks[name], sel, n_draws)
            env[name] = value
    except NotPerRow:
        raise NeedsPerSample() from None
    finally:
        ev._memos = memos
    for sel, _, _, lp in outcomes:
        if not (lp.__class__ is float and lp == 0.0):
            target = target + put_draws(onp.zeros(n_draws), 0, sel, sum_to_batch0(lp), n_draws)
    ev.target = target


def _take_draws(value, rank: int, sel, n_draws: int):
    """take_draws on an array, or on each written element of an ElementList (a new list)."""
    if value.__class__ is ElementList:
        items = [None if v is None else take_draws(v, rank - 1, sel, n_draws) for v in value.items]
        return ElementList(items, value.elem_type, value.elem_shape, value.base, value.strict)
    return take_draws(value, rank, sel, n_draws)


def _snapshot(value):
    """(the value, its items when it is an ElementList): what _merge_draws compares against."""
    return value, tuple(value.items) if value.__class__ is ElementList else None


def _merge_draws(full, before, after, rank: int, sel, n_draws: int):
    """`full` with what a branch run on draws `sel` changed (`before` -> `after`) put back."""
    obj, items_before = before
    if after is obj and (items_before is None or all(
        a is b for a, b in zip(after.items, items_before, strict=True)
    )):  # fmt: skip
        return full
    if (
        after.__class__ is ElementList
        and items_before is not None
        and full.__class__ is ElementList
    ):
        items = list(full.items)
        k = rank - 1
        for i, (b, a) in enumerate(zip(items_before, after.items, strict=True)):
            if a is not b:
                base = items[i] if items[i] is not None else full.unwritten()
                items[i] = put_draws(base, k, sel, a, n_draws)
        return ElementList(items, full.elem_type, full.elem_shape, full.base, full.strict)
    if full.__class__ is ElementList:
        full = full.materialise()
    if after.__class__ is ElementList:
        after = after.materialise()
    return put_draws(full, rank, sel, after, n_draws)


def _program_ranks(program: ast.Program) -> dict[str, int | None]:
    """ppl.ir.queries.declared_ranks, kept with the program: built once."""
    compiled = compiled_of(program)
    if compiled.ranks is None:
        compiled.ranks = declared_ranks(program)
    return compiled.ranks


def _private_copy(ev, value, stype: SType, loop: ast.For):
    """A fresh, unwritten copy of a loop's private variable (see loop_vectorisation.plan)."""
    if not stype.ndim:
        return value
    if value.__class__ is ElementList:
        n, elem_shape = len(value.items), value.elem_shape
    elif value is not None:
        shape = _type_shape(value, stype)
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
            out[st.name] = _decl_stype(st).ndim
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


def _memoised(e: ast.Expr, loop: ast.For, inner: tuple[str, ...], mapped: bool):
    """e's closure, its value kept while `loop` runs one index at a time (passes.loop_invariants),
    keyed by the values of the inner-loop indexes it reads. A `mapped` expression (it depends on
    the loop's index) is computed for every index at once and read per iteration."""
    compute = _compile_expr(e)
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


def _compile_for(s: ast.For):
    lo_fn, hi_fn = _expr_fn(s.lo), _expr_fn(s.hi)
    # before the body is compiled, so that its closures call the memoised ones
    invariants = marked_invariants(s)  # ppl.ir.passes.loop_invariants
    for e, inner, mapped in invariants:
        if mapped and _fusable_op(e):
            continue  # a scalar kernel computes it within the one node of its recurrence step
        compiled = compiled_of(e)
        if compiled.value is None:
            compiled.memo_loop = True
            compiled.value = _memoised(e, s, inner, mapped)
    body = _stmt_fn(s.body)
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
            except _Break:
                break
            except _Continue:
                pass
            finally:
                if len(env) != n:
                    _trim(env, n)
    else:
        for i in range(lo, hi + 1):
            env[var] = i
            body(ev)
            if len(env) != n:
                _trim(env, n)
    env.pop(var, None)


#: types with no value of size 0 (Stan's check_simplex, check_unit_vector)
_NONEMPTY_KINDS = ("simplex", "unit_vector")

#: vectorised loops nest this deep (the loop index of depth d is batch axis d; axis 0: the draws)
_MAX_LOOP_AXES = 2


#: The evaluator's state of the vectorised loop under way, saved and restored around a nested one.
_LOOP_STATE = ("in_vector_loop", "_current_loop", "_loop_rows", "_loop_start", "_loop_types",
               "_loop_axis", "_outer_counts", "_outer_rows", "_reduction_frames")  # fmt: skip


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
            _trim(env, n)
        for name, stype in private.items():
            env[name] = _last_row(env[name], stype, s, axis)
    finally:
        for name, value in zip(_LOOP_STATE, outer, strict=True):
            setattr(ev, name, value)
        env.pop(var, None)


def _compile_decl(d: ast.Decl):
    _decl_stype(d)  # resolve the static type once
    return lambda ev: ev.declare(d)


def _compile_assign(s: ast.Assign):
    plain = _compile_plain_assign(s)
    increment = reduction_increment(s)
    if increment is None:
        return plain
    increment_fn = _expr_fn(increment)
    plus = _binop_fn("+", s.lhs.type, increment.type, s)
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
    rhs_fn = _expr_fn(s.rhs)
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
    idx_fn = _expr_fn(item.lo)
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


def _iid_gaussian_rows(dist, general):
    """`y ~ multi_normal(mu, Sigma)` over data rows sharing mu and Sigma, via sufficient statistics.

    sum_n log N(y_n | mu, Sigma) = -N/2 (D log 2 pi + log|Sigma|) - tr(Sigma^-1 S_mu) / 2 with
    S_mu = Y'Y - N (ybar mu' + mu ybar') + N mu mu': once Y'Y and ybar are known, a call costs
    O(D^3) whatever the number of rows N (the GPFA scaling of Knowles 2015).
    """
    cholesky_form = dist.name == "multi_normal_cholesky"
    stats: dict = {}

    def density(values):
        y, mu, cov = values
        if fast_ndim(y) < 2 or getattr(y, "_value", None) is not None:
            return general(values)  # y carries gradients or batch axes: no shared statistics
        if stats.get("y") is not y:
            rows = onp.asarray(y, dtype=float).reshape(-1, onp.shape(y)[-1])
            stats.update(y=y, n=rows.shape[0], ybar=rows.mean(axis=0), yty=rows.T @ rows)
        n, ybar, yty = stats["n"], stats["ybar"], stats["yty"]
        dim = yty.shape[0]
        mu = to_array(mu)
        if cholesky_form:
            cov = np.matmul(cov, np.swapaxes(cov, -1, -2))
        outer_mu = mu[..., :, None] * mu[..., None, :]
        cross = ybar[:, None] * mu[..., None, :]
        scatter = yty - n * (cross + np.swapaxes(cross, -1, -2)) + n * outer_mu
        try:
            sign, logdet = np.linalg.slogdet(cov)
            quad = np.sum(np.linalg.solve(cov, scatter) * onp.eye(dim), axis=(-2, -1))
        except onp.linalg.LinAlgError:
            return general(values)
        lp = -0.5 * (n * (dim * _LOG_2PI + logdet) + quad)
        return where(sign > 0, lp, -onp.inf)

    return density


_LOG_2PI = float(onp.log(2 * onp.pi))


def _density(dist, ndims, events, sufficient: bool):
    """`values -> log density` for one call site: the alignment of value and parameters, through
    sufficient statistics where ppl.ir.passes.sufficient_statistics marked the site."""
    general = _aligned_density(dist, ndims, events)
    return _iid_gaussian_rows(dist, general) if sufficient else general


def _aligned_density(dist, ndims, events, elementwise: bool = False):
    ndims = list(ndims)
    vec = max(k - e for k, e in zip(ndims, events, strict=True))
    axes = tuple(range(-vec, 0)) if vec and not elementwise else None
    pads = [vec - (k - e) for k, e in zip(ndims, events, strict=True)]
    log_prob = dist.log_prob

    def density(values):
        arrs = [to_array(v) for v in values]
        batches = [fast_ndim(a) - k for a, k in zip(arrs, ndims, strict=True)]
        nb = max(batches)
        shaped = []
        for a, b, p in zip(arrs, batches, pads, strict=True):
            if nb == b and not p:
                shaped.append(a)
                continue
            shape = fast_shape(a)
            shaped.append(np.reshape(a, shape[:b] + (1,) * (nb - b + p) + shape[b:]))
        lp = log_prob(*shaped)
        if axes is not None:
            lp = np.sum(lp, axis=axes)
        return lp

    return density


def _compile_tilde(s: ast.Tilde):
    """A `~` on a built-in density, as lowered (ppl.ir.lowering): its density, its arguments."""
    marks = s.marks
    dist, arg_exprs = marks.density, marks.density_args
    lhs_fn = _expr_fn(s.lhs)
    arg_fns = [_expr_fn(a) for a in arg_exprs]
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
            cache.append(_density(dist, ndims, events, sufficient))
            cache.append(_aligned_density(dist, ndims, events, elementwise=True))
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


def _compile_target(s: ast.TargetInc):
    f = _expr_fn(s.expr)
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


def _expr_fn(e: ast.Expr):
    compiled = compiled_of(e)
    if compiled.value is None:
        compiled.value = _compile_expr(e)
    return compiled.value


def _compile_expr(e: ast.Expr):
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
    if _fusable_op(e):
        fused = _compile_fused(e)
        if fused is not None:
            return fused
    if isinstance(e, ast.BinOp):
        if e.op in ("&&", "||"):
            return lambda ev: ev.logical(e)
        fa, fb = _expr_fn(e.left), _expr_fn(e.right)
        op_fn = _binop_fn(e.op, e.left.type, e.right.type, e)
        return lambda ev: op_fn(ev, fa(ev), fb(ev))
    if isinstance(e, ast.UnOp):
        return _compile_unop(e)
    if isinstance(e, ast.Ternary):
        return _compile_ternary(e)
    if isinstance(e, ast.Index):
        return _compile_index(e)
    if isinstance(e, ast.ArrayExpr | ast.RowVectorExpr):
        fns = [_expr_fn(i) for i in e.items]

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
    f = _expr_fn(e.operand)
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
    fc, ft, ff = _expr_fn(e.cond), _expr_fn(e.if_true), _expr_fn(e.if_false)

    def ternary(ev):
        c = fc(ev)
        if onp.size(_raw(c)) == 1:
            return ft(ev) if bool(onp.asarray(_raw(c)).reshape(())) else ff(ev)
        a, b = ft(ev), ff(ev)
        c, a, b = align([c, a, b], [0, e.if_true.type.ndim, e.if_false.type.ndim])
        return where(c, a, b)

    return ternary


_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    ".*": operator.mul,
    "./": operator.truediv,
    "/": operator.truediv,
    "^": operator.pow,
    ".^": operator.pow,
}
_CMP = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}


def _align2(a, b, ka: int, kb: int):
    """`align([a, b], [ka, kb])` with its no-op case decided without building lists."""
    try:
        na = a.ndim
    except AttributeError:
        na = onp.ndim(a)
    try:
        nb = b.ndim
    except AttributeError:
        nb = onp.ndim(b)
    if (ka == kb and na <= ka + 1 and nb <= kb + 1) or na == 0 or nb == 0:
        return a, b
    return align([a, b], [ka, kb])


def _binop_fn(op: str, ta: SType, tb: SType, node):
    """`f(ev, a, b)`: Stan's binary operator `op` for static operand types ta, tb."""
    ka, kb = ta.ndim, tb.ndim
    both_int = ta.is_int and tb.is_int

    def int_path(ev, a, b):
        return _int_binop(op, a, b, ev, node)

    if op == "*":
        if ta.is_scalar or tb.is_scalar:

            def mul(ev, a, b):
                if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                    return _int_binop(op, a, b, ev, node)
                x, y = _align2(a, b, ka, kb)
                return x * y

            return mul

        def mat(ev, a, b):
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                return _int_binop(op, a, b, ev, node)
            return matmul(a, ta, b, tb)

        return mat
    if op in ("/", "%/%", "%") and both_int:

        def int_div(ev, a, b):
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                return _int_binop(op, a, b, ev, node)
            if onp.any(onp.asarray(_raw(b)) == 0):
                raise ev.error(node, f"integer {'modulus' if op == '%' else 'division'} by zero")
            x, y = align([a, b], [ka, kb])
            if op == "%":
                return np.fmod(x, y)
            return np.trunc(x / y).astype(int)

        return int_div
    if op in _ARITH:
        fn = _ARITH[op]

        def arith(ev, a, b):
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                return _int_binop(op, a, b, ev, node)
            x, y = _align2(a, b, ka, kb)
            return fn(x, y)

        return arith
    if op == "%":

        def fmod(ev, a, b):
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                return _int_binop(op, a, b, ev, node)
            x, y = align([a, b], [ka, kb])
            return np.fmod(x, y)

        return fmod
    if op == "%/%":

        def idiv(ev, a, b):
            if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
                return _int_binop(op, a, b, ev, node)
            x, y = align([a, b], [ka, kb])
            return np.trunc(x / y).astype(int)

        return idiv

    def compare(ev, a, b):
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
            return _int_binop(op, a, b, ev, node)
        x, y = align([a, b], [ka, kb])
        result = _CMP[op](x, y)
        return result.astype(int) if hasattr(result, "astype") else int(result)

    del int_path
    return compare


def _compile_index(e: ast.Index):
    base = e.base
    base_fn = _expr_fn(base)
    base_name = base.name if isinstance(base, ast.Var) else None
    list_fast = base_name is not None and e.items[0].kind == "single"
    single = len(e.items) == 1
    first_fn = _expr_fn(e.items[0].lo) if e.items[0].kind == "single" else None
    t = base.type
    suffix = f" for '{base_name}'" if base_name is not None else ""
    plan = []
    for item in e.items:
        if item.kind == "single":
            plan.append((item, _expr_fn(item.lo), item.lo.type.is_scalar))
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
                if idx.__class__ is int or isinstance(idx, int) or onp.ndim(_raw(idx)) == 0:
                    i = int(_raw(idx))
                    if not 1 <= i <= n:
                        raise ev.error(item.lo, f"index {i} out of range 1..{n}" + suffix)
                    value = value[(slice(None),) * (b + axis) + (i - 1,)]
                    ndim_left -= 1
                    continue
                arr = onp.asarray(_raw(idx))
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
    arg_fns = [_expr_fn(a) for a in e.args]
    sig = getattr(e, "user_function", None)
    if sig is not None:
        errors = (Devectorise, NeedsPerSample)
        if name in SOLVERS:
            return compile_ode_call(e, arg_fns, _stmt_fn, errors)
        return user_calls.compile_call(e, sig.definition, arg_fns, _stmt_fn, errors)
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
                    _density(dist, [t.ndim for t in types],
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
            raise Rejected(f"{ev.error(e, f'{name}: {_describe(err)}')}") from None  # the draw
        raise ev.error(e, f"{name}: {_describe(err)}") from None

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


def _int_binop(op, a, b, ev, node):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%/%"):
        if b == 0:
            raise ev.error(node, "integer division by zero")
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    if op == "%":
        if b == 0:
            raise ev.error(node, "integer modulus by zero")
        return int(onp.fmod(a, b))
    if op in ("^", ".^"):
        return float(a) ** b
    if op == "./":
        if b == 0:
            raise ev.error(node, "integer division by zero")
        return a / b
    # operators evaluated lazily: a dict of every result would compute a / b for `k == 0`
    return int(
        {
            "==": operator.eq,
            "!=": operator.ne,
            "<": operator.lt,
            "<=": operator.le,
            ">": operator.gt,
            ">=": operator.ge,
            ".*": operator.mul,
        }[op](a, b)
    )


def _type_shape(value, t: SType) -> tuple[int, ...]:
    shape = tuple(fast_shape(value))
    return shape[len(shape) - t.ndim :] if t.ndim else ()


def _decl_stype(d: ast.Decl) -> SType:
    compiled = compiled_of(d)
    if compiled.stype is None:
        from ppl.language.checker import decl_type

        compiled.stype = decl_type(d.spec)
    return compiled.stype


def _describe(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    if "broadcast" in text or "shapes" in text or "mismatch" in text:
        return f"sizes do not match ({text})"
    return text


# ---- fused scalar kernels ------------------------------------------------------------------------
#
# A tree of elementwise operations on scalars (`sqrt(a0 + a1 * square(y[t - 1] - mu) + ...)`) runs
# as a single autograd node whose VJP is the hand-written reverse pass over the tree: one node per
# statement instead of one per operation, which is what sequential loops (recurrences) pay for.
# The forward pass applies the very same numpy operations in the same order, so values are
# unchanged; when an operand has more than one batch axis (vectorised loops, which would need
# alignment) the ordinary per-operation path runs instead.

_FUSED_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
_FUSED_CALLS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "square": np.square}
_RAW = {np.exp: onp.exp, np.log: onp.log, np.sqrt: onp.sqrt, np.square: onp.square}


def _fusable_op(e) -> bool:
    if (e.compiled is not None and e.compiled.memo_loop) or (
        e.marks is not None and e.marks.constant is not None
    ):
        return False  # a loop invariant: a leaf computed once, not an operation redone per run
    t = getattr(e, "type", None)
    if t is None or t.base != "real" or t.ndim:
        return False
    if isinstance(e, ast.BinOp):
        return e.op in _FUSED_BINOPS and e.left.type.ndim == 0 and e.right.type.ndim == 0
    if isinstance(e, ast.UnOp):
        return e.op == "neg" and e.operand.type.ndim == 0
    if isinstance(e, ast.Call):
        fn = lookup(e.name)
        return (
            e.name in _FUSED_CALLS
            and len(e.args) == 1
            and fn is not None
            and fn.impl.__name__ == "<lambda>"  # the registered unary wrapper `fn(args[0])`
            and e.args[0].type.ndim == 0
        )
    return False


class _Kernel:
    """Straight-line program: slots 0..L-1 are the leaves, each instruction appends one slot."""

    def __init__(self):
        self.leaves: list = []  # compiled leaf expressions
        self.instrs: list = []  # (kind, fn, a, b, generic); generic(ev, a, b) is the slow path
        self.last = None  # (result, slot values) of the latest forward run

    def forward(self, leaves, raw: bool = False):
        vals = list(leaves)
        for kind, fn, a, b, _ in self.instrs:
            if kind == "bin":
                vals.append(fn(vals[a], vals[b]))
            else:
                vals.append((_RAW.get(fn, fn) if raw else fn)(vals[a]))
        return vals

    def backward(self, leaves, g, vals=None):
        if vals is None:
            vals = self.forward(leaves)
        grads: list = [None] * len(vals)
        grads[-1] = g
        n = len(leaves)
        for k in range(len(self.instrs) - 1, -1, -1):
            gk = grads[n + k]
            if gk is None:
                continue
            kind, fn, a, b, _ = self.instrs[k]
            if kind == "bin":
                x, y = vals[a], vals[b]
                if fn is operator.add:
                    ga, gb = gk, gk
                elif fn is operator.sub:
                    ga, gb = gk, -gk
                elif fn is operator.mul:
                    ga, gb = gk * y, gk * x
                else:
                    ga, gb = gk / y, -gk * x / y**2
                grads[a] = ga if grads[a] is None else grads[a] + ga
                grads[b] = gb if grads[b] is None else grads[b] + gb
                continue
            x = vals[a]
            if fn is operator.neg:
                ga = -gk
            elif fn is np.exp:
                ga = gk * vals[n + k]
            elif fn is np.log:
                ga = gk / x
            elif fn is np.sqrt:
                ga = gk * 0.5 * x**-0.5
            else:  # square
                ga = gk * 2 * x
            grads[a] = ga if grads[a] is None else grads[a] + ga
        return grads[:n]


@primitive
def _fused(kernel, *leaves):
    vals = kernel.forward(leaves, raw=True)
    ans = vals[-1]
    kernel.last = (ans, vals)  # read back by _fused_vjp, which autograd calls right after
    return ans


def _fused_vjp(argnums, ans, args, kwargs):
    kernel, leaves = args[0], args[1:]
    last = kernel.last
    kernel.last = None
    vals = last[1] if last is not None and last[0] is ans else None
    metas = [np.metadata(leaves[i - 1]) for i in argnums]

    def vjp(g):
        grads = kernel.backward(leaves, g, vals)
        out = []
        for i, meta in zip(argnums, metas, strict=True):
            gr = grads[i - 1]
            if gr is None:
                out.append(onp.zeros(meta[0]))
            elif fast_shape(gr) == meta[0]:
                out.append(gr)
            else:
                out.append(unbroadcast(gr, meta))
        return out

    return vjp


defvjp_argnums(_fused, _fused_vjp)


def _compile_fused(e):
    """A fused closure for the scalar tree rooted at `e`, or None if it has fewer than 2 ops."""
    kernel = _Kernel()

    # slots: leaves first, then one per instruction, in evaluation order; build() records the
    # instructions with provisional operand numbers, renumbered below
    order: list = []

    def number(node):
        if not _fusable_op(node):
            order.append(("leaf", node))
            return ("leaf", len([o for o in order if o[0] == "leaf"]) - 1)
        if isinstance(node, ast.BinOp):
            a, b = number(node.left), number(node.right)
            order.append(("op", node, a, b))
        elif isinstance(node, ast.UnOp):
            order.append(("op", node, number(node.operand), None))
        else:
            order.append(("op", node, number(node.args[0]), None))
        return ("op", len([o for o in order if o[0] == "op"]) - 1)

    number(e)
    ops = [o for o in order if o[0] == "op"]
    if len(ops) < 2:
        return None
    leaves = [o[1] for o in order if o[0] == "leaf"]
    kernel.leaves = [_expr_fn(leaf) for leaf in leaves]
    n = len(leaves)

    def slot(ref):
        return ref[1] if ref[0] == "leaf" else n + ref[1]

    for _, node, a, b in ops:
        if isinstance(node, ast.BinOp):
            generic = _binop_fn(node.op, node.left.type, node.right.type, node)
            kernel.instrs.append(("bin", _FUSED_BINOPS[node.op], slot(a), slot(b), generic))
        elif isinstance(node, ast.UnOp):
            kernel.instrs.append(("un", operator.neg, slot(a), None, _neg_generic))
        else:
            kernel.instrs.append(
                ("un", _FUSED_CALLS[node.name], slot(a), None, _call_generic(node))
            )
    leaf_fns = kernel.leaves
    instrs = kernel.instrs

    def fused(ev):
        vals = [f(ev) for f in leaf_fns]
        for v in vals:
            try:
                if v.ndim > 1:
                    break
            except AttributeError:
                if v.__class__ not in (float, int):
                    break
        else:
            return _fused(kernel, *vals)
        for _kind, _, a, b, generic in instrs:  # the per-operation path, with alignment
            vals.append(generic(ev, vals[a], vals[b] if b is not None else None))
        return vals[-1]

    return fused


def _neg_generic(ev, x, _):
    return -x


def _call_generic(node: ast.Call):
    impl = lookup(node.name).impl
    types = [a.type for a in node.args]
    name = node.name

    def generic(ev, x, _):
        try:
            return impl([x], types)
        except Exception as err:  # noqa: BLE001 - numerical library errors become user errors
            if isinstance(err, Devectorise | NeedsPerSample):
                raise
            if ev.in_vector_loop:
                raise Devectorise(ev._current_loop) from None
            raise ev.error(node, f"{name}: {_describe(err)}") from None

    return generic
