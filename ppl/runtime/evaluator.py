"""Runs checked statements on arrays with leading batch axes: the engine behind the log joint.

Every latent carries a leading axis of S Monte Carlo samples, so one run evaluates S draws.
`for` loops whose iterations are independent (the common `y[n] ~ normal(mu[n], sigma)` shape) run
once with the loop index as an extra batch axis instead of once per iteration.

The Evaluator holds the state of a run (environment, target, loop state); the closures it runs are
compiled in ppl.runtime.statements (with loops, branches and target_terms) and
ppl.runtime.expressions (with operators, densities and fused kernels).
"""

from __future__ import annotations

import time

import autograd.numpy as np
import numpy as onp

from ppl.errors import ModelError
from ppl.language import ast
from ppl.language.checker import CHOLESKY_ROWS, split_dist_call
from ppl.language.parser import format_location
from ppl.language.types import SType, align, align_batch, fast_ndim, fast_shape, to_array
from ppl.library.distributions import get_distribution
from ppl.library.functions import CONSTANTS, lookup
from ppl.limits import (
    ITERATIONS_PER_SECOND,
    LIMITS,
    elements,
    loop_seconds,
    over_budget,
    poll_interrupt,
)
from ppl.runtime.densities import call_site_density
from ppl.runtime.expressions import expr_fn
from ppl.runtime.operators import binop_fn
from ppl.runtime.row_selection import broadcast, scatter_axis
from ppl.runtime.signals import Devectorise, LoopBreak, LoopContinue, NeedsPerSample, describe
from ppl.runtime.statements import stmt_body, stmt_fn
from ppl.runtime.values import ElementList, decl_stype, raw, trim, type_shape

#: types with no value of size 0 (Stan's check_simplex, check_unit_vector)
_NONEMPTY_KINDS = ("simplex", "unit_vector")


class Evaluator:
    """Executes statements; `env` maps names to arrays (or ElementLists being filled).

    Each statement and expression is compiled once, on first use, into a Python closure
    (`stmt_fn`, `expr_fn`) that holds everything static about it (types, operators, library
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
        #: the draws a run evaluates at once, as far as known (a vectorised loop's batch is its
        #: rows times these: ppl.runtime.loops checks that against the memory budget)
        self.draws_hint = 1

    # ---- errors
    def error(self, node, message: str) -> ModelError:
        pos = getattr(node, "pos", None) or ast.Pos(0, 0)
        return ModelError(
            format_location(self.program.filename, self.program.source, pos.line, pos.col, message)
        )

    # ---- statements
    def run(self, stmts: list[ast.Stmt]) -> None:
        poll_interrupt()  # a Ctrl-C that autograd swallowed ends the fit here (ppl.limits)
        for s in stmts:
            stmt_fn(s)(self)

    def compiled(self, s: ast.Stmt):
        """The statement's closure, compiled on first use (what a user function's body runs)."""
        return stmt_fn(s)

    def stmt(self, s: ast.Stmt) -> None:
        stmt_fn(s)(self)

    def scoped(self, s: ast.Stmt) -> None:
        env = self.env
        n = len(env)
        stmt_fn(s)(self)
        if len(env) != n:
            trim(env, n)

    def _loop_body(self, body: ast.Stmt) -> bool:
        """Runs one iteration; True if it hit `break`."""
        try:
            self.scoped(body)
        except LoopBreak:
            return True
        except LoopContinue:
            return False
        return False

    def truth(self, value, node) -> bool:
        if value.__class__ is int:
            return bool(value)
        arr = onp.asarray(raw(value))
        if arr.size == 1:
            return bool(arr.reshape(()))
        if self.in_vector_loop:
            raise Devectorise(self._current_loop)
        raise NeedsPerSample()

    def int_value(self, v, node) -> int:
        if v.__class__ is int:
            return v
        arr = onp.asarray(raw(v))
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

    def check_loop_work(self, s: ast.Stmt, iterations: int) -> None:
        """Refuse a loop whose nested loops would go past --max-loop-iterations, before any of
        them runs (the budget is charged as each runs)."""
        if iterations > self.loop_budget:
            raise self.error(
                s,
                f"this loop and the loops in it would run {iterations:,} iterations, past the "
                f"limit of {LIMITS.max_loop_iterations:,} loop iterations in one run of the "
                "block; raise it with --max-loop-iterations N if the loops are meant to run this "
                "long",
            )

    def check_time(self, s: ast.Stmt, start: float) -> None:
        """A loop running since `start` past the time budget of --max-loop-iterations is refused
        (`while (1)` in seconds, not minutes); a Ctrl-C noted meanwhile ends the run."""
        poll_interrupt()
        seconds = time.monotonic() - start
        if seconds > loop_seconds():
            raise self.error(
                s,
                f"this loop has run for {seconds:.1f} s, past the time budget of "
                f"{loop_seconds():.3g} s that goes with the limit of "
                f"{LIMITS.max_loop_iterations:,} loop iterations (one second per "
                f"{ITERATIONS_PER_SECOND:,}); raise it with --max-loop-iterations N if the loop "
                "is meant to run this long",
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
        if spec.kind == "cholesky_factor_cov" and len(sizes) == 2 and sizes[0] < sizes[1]:
            raise self.error(spec.sizes[0], CHOLESKY_ROWS.format(*sizes))
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
        stype = decl_stype(d)
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
                    old_shape = type_shape(old, lhs.type)
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
        updated = self.assign_plain(current, vtype, items, rhs, rtype, s)
        if updated is None:
            updated = self.set_items(current, vtype, items, rhs, rtype, s)
        self.env[name] = updated

    def assign_plain(self, current, vtype: SType, items, value, value_type: SType, node):
        """`current[items] = value` as one numpy assignment into a copy, where nothing carries a
        gradient (data, transformed data), the first index is a slice and every other one a single
        integer or a slice; None otherwise (set_items then: an ElementList makes `x[i] = v` in a
        loop O(1), where a copy would be O(size)). spike_slab's `Xs[:, k] = ...` (506 x 13) took
        2 s through set_items, an ElementList per row per column."""
        if not isinstance(current, onp.ndarray) or not isinstance(value, onp.ndarray | int | float):
            return None
        if not items or items[0].kind == "single":
            return None
        value = onp.asarray(value)
        b, vb = current.ndim - vtype.ndim, value.ndim - value_type.ndim
        if b < 0 or vb < 0 or vb > b or len(items) > vtype.ndim:
            return None
        index, type_shape_, kept = [], current.shape[b:], []
        for axis, item in enumerate(items):
            n = type_shape_[axis]
            if item.kind != "single":
                lo, hi = self.slice_bounds(item, n)
                index.append(slice(lo - 1, max(hi, lo - 1)))
                kept.append(max(hi - lo + 1, 0))
            else:
                idx = self.expr(item.lo)
                if not (isinstance(idx, int | onp.integer) or onp.ndim(raw(idx)) == 0):
                    return None  # a multi-index
                i = int(raw(idx))
                if not 1 <= i <= n:
                    raise self.error(node, f"index {i} out of range 1..{n}")
                index.append(i - 1)
        if tuple(kept) + type_shape_[len(items) :] != value.shape[vb:]:
            return None  # a size mismatch: set_items says where
        target = (slice(None),) * b + tuple(index)
        out = current.astype(onp.result_type(current, value))  # a copy; ints take reals
        try:
            out[target] = value.reshape((1,) * (b - vb) + value.shape)
        except ValueError:
            return None  # shapes that do not fit: set_items says why
        return out

    def set_items(self, current, vtype: SType, items, value, value_type: SType, node):
        """Functional update of `current[items] = value`; ElementLists make x[i] = v cheap."""
        first, rest = items[0], items[1:]
        if first.kind == "single":
            idx = self.expr(first.lo)
            if isinstance(idx, int | onp.integer) or (onp.ndim(raw(idx)) == 0):
                i = int(raw(idx))
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
            positions = [int(k) for k in onp.asarray(raw(idx)).ravel()]
            return self._set_positions(current, vtype, positions, rest, value, value_type, node)
        # slices
        n = (
            len(current.items)
            if isinstance(current, ElementList)
            else type_shape(current, vtype)[0]
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
        arr = onp.asarray(raw(idx)).reshape(-1)
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
            n = type_shape(current, vtype)[0]
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
        stmt_body(s)(self)

    def log_density(self, dist, value, vtype: SType, args, types):
        """Elementwise log density summed over the vectorised (type) axes, batch axes kept."""
        ndims = [vtype.ndim] + [t.ndim for t in types]
        events = [dist.value_ndim] + list(dist.param_ndims)
        return call_site_density(dist, ndims, events, False)([value] + list(args))

    # ---- expressions
    def expr(self, e: ast.Expr):
        return expr_fn(e)(self)

    def logical(self, e: ast.BinOp):
        a = self.expr(e.left)
        if onp.size(raw(a)) == 1:
            av = bool(onp.asarray(raw(a)).reshape(()))
            if e.op == "&&" and not av:
                return 0
            if e.op == "||" and av:
                return 1
            b = self.expr(e.right)
            if onp.size(raw(b)) == 1:
                return int(bool(onp.asarray(raw(b)).reshape(())))
            return np.where(b, 1, 0)
        b = self.expr(e.right)
        a, b = align([a, b], [0, 0])
        return (np.logical_and(a, b) if e.op == "&&" else np.logical_or(a, b)).astype(int)

    def binop(self, op: str, a, ta: SType, b, tb: SType, node):
        return binop_fn(op, ta, tb, node)(self, a, b)

    def slice_bounds(self, item: ast.IndexItem, n: int) -> tuple[int, int]:
        lo = 1 if item.lo is None else self.int_value(self.expr(item.lo), item.lo)
        hi = n if item.hi is None else self.int_value(self.expr(item.hi), item.hi)
        if item.kind == "all":
            lo, hi = 1, n
        if hi >= lo and (lo < 1 or hi > n):
            raise self.error(item.lo or item.hi, f"slice {lo}:{hi} out of range 1..{n}")
        return lo, hi

    def index(self, e: ast.Index):
        return expr_fn(e)(self)

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
                raise self.error(e, f"{name}: {describe(err)}") from None
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
        arrs = [onp.asarray(raw(to_array(a)), dtype=float) for a in args]
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
# `expr_fn(e)` returns `f(ev) -> value` and `stmt_fn(s)` returns `f(ev) -> None`, built once per
# AST node and kept on it. They do exactly what the generic methods of `Evaluator` do, with the


def _is_float_array(x) -> bool:
    dtype = getattr(x, "dtype", None)
    return dtype is not None and dtype.kind == "f" and getattr(x, "ndim", 0) >= 1
