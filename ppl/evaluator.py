"""Runs checked statements on arrays with leading batch axes: the engine behind the log joint.

Every latent carries a leading axis of S Monte Carlo samples, so one run evaluates S draws.
`for` loops whose iterations are independent (the common `y[n] ~ normal(mu[n], sigma)` shape) run
once with the loop index as an extra batch axis instead of once per iteration.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import autograd.numpy as np
import numpy as onp

from ppl import ast
from ppl.checker import split_dist_call
from ppl.distributions import get_distribution
from ppl.distributions.base import where
from ppl.errors import ModelError
from ppl.functions import CONSTANTS, lookup, matmul
from ppl.loops import vectorisable
from ppl.parser import format_location
from ppl.types import SType, align, align_batch, sum_to_batch0, to_array


class Devectorise(Exception):
    """A loop run with a batched index met something it cannot do; rerun it one index at a time."""

    def __init__(self, loop: ast.For):
        super().__init__("devectorise")
        self.loop = loop


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


@dataclass
class LoopIndex:
    """Marks the batched index of a vectorised loop: values lo..hi along batch axis 1."""

    lo: int
    hi: int


class ElementList:
    """An array being filled element by element (`x[t] = ...` in a loop): O(1) per assignment."""

    def __init__(self, items: list, elem_type: SType, elem_shape: tuple[int, ...], base: str):
        self.items = items
        self.elem_type = elem_type
        self.elem_shape = elem_shape
        self.base = base

    @classmethod
    def from_array(cls, arr, stype: SType) -> ElementList:
        arr = to_array(arr)
        b = np.ndim(arr) - stype.ndim
        n = np.shape(arr)[b]
        items = [arr[(slice(None),) * b + (i,)] for i in range(n)]
        return cls(items, stype.element(), tuple(np.shape(arr)[b + 1 :]), stype.base)

    def materialise(self):
        k = self.elem_type.ndim
        fill = onp.nan if self.base == "real" else 0
        items = [onp.full(self.elem_shape, fill) if v is None else to_array(v) for v in self.items]
        if not items:
            return onp.zeros((0,) + self.elem_shape)
        items = align_batch(items, [k] * len(items))
        nb = np.ndim(items[0]) - k
        batch = onp.broadcast_shapes(*[np.shape(v)[:nb] for v in items])
        items = [v if np.shape(v)[:nb] == batch else v * onp.ones(batch + (1,) * k) for v in items]
        return np.stack(items, axis=nb)


class Evaluator:
    """Executes statements; `env` maps names to arrays (or ElementLists being filled)."""

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

    # ---- errors
    def error(self, node, message: str) -> ModelError:
        pos = getattr(node, "pos", None) or ast.Pos(0, 0)
        return ModelError(
            format_location(self.program.filename, self.program.source, pos.line, pos.col, message)
        )

    # ---- statements
    def run(self, stmts: list[ast.Stmt]) -> None:
        for s in stmts:
            self.stmt(s)

    def stmt(self, s: ast.Stmt) -> None:
        try:
            self._stmt(s)
        except (Devectorise, NeedsPerSample, Rejected, _Break, _Continue, ModelError):
            raise
        except (ValueError, IndexError, TypeError, ArithmeticError, onp.linalg.LinAlgError) as e:
            if self.in_vector_loop:
                raise Devectorise(self._current_loop) from None
            if isinstance(s, ast.For | ast.ForEach | ast.While | ast.If | ast.Block):
                raise
            raise self.error(s, f"cannot evaluate this statement: {_describe(e)}") from None

    def _stmt(self, s: ast.Stmt) -> None:
        if isinstance(s, ast.Decl):
            self.declare(s)
        elif isinstance(s, ast.Assign):
            self.assign(s)
        elif isinstance(s, ast.Tilde):
            self.tilde(s)
        elif isinstance(s, ast.TargetInc):
            self.add_target(self.expr(s.expr), s.expr.type)
        elif isinstance(s, ast.For):
            self.for_loop(s)
        elif isinstance(s, ast.ForEach):
            seq = self.expr(s.iterable)
            t = s.iterable.type
            b = np.ndim(seq) - t.ndim
            if b and onp.shape(seq)[0] > 1:
                raise NeedsPerSample()
            n = np.shape(seq)[b]
            for i in range(n):
                self.env[s.var] = seq[(slice(None),) * b + (i,)]
                if self._loop_body(s.body):
                    break
        elif isinstance(s, ast.While):
            guard = 0
            while self.truth(self.expr(s.cond), s.cond):
                if self._loop_body(s.body):
                    break
                guard += 1
                if guard > 10_000_000:
                    raise self.error(s, "while loop did not end after 10^7 iterations")
        elif isinstance(s, ast.If):
            if self.truth(self.expr(s.cond), s.cond):
                self.scoped(s.then)
            elif s.otherwise is not None:
                self.scoped(s.otherwise)
        elif isinstance(s, ast.Block):
            saved = set(self.env)
            for inner in s.stmts:
                self.stmt(inner)
            for name in set(self.env) - saved:
                del self.env[name]
        elif isinstance(s, ast.Print):
            pass  # printing inside a log density would flood the terminal S times per step
        elif isinstance(s, ast.Reject):
            raise Rejected(" ".join(a.value if isinstance(a, ast.Str) else "?" for a in s.args))
        elif isinstance(s, ast.Break):
            raise _Break()
        elif isinstance(s, ast.Continue):
            raise _Continue()
        elif isinstance(s, ast.CallStmt):
            self.expr(s.call)

    def scoped(self, s: ast.Stmt) -> None:
        saved = set(self.env)
        self.stmt(s)
        for name in set(self.env) - saved:
            del self.env[name]

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
        arr = onp.asarray(_raw(value))
        if arr.size == 1:
            return bool(arr.reshape(()))
        if self.in_vector_loop:
            raise Devectorise(self._current_loop)
        raise NeedsPerSample()

    def for_loop(self, s: ast.For) -> None:
        lo = self.int_value(self.expr(s.lo), s.lo)
        hi = self.int_value(self.expr(s.hi), s.hi)
        if hi < lo:
            return
        if (
            self.vectorise
            and not self.in_vector_loop
            and s not in self.devectorised
            and hi - lo >= 1
            and vectorisable(s)
        ):
            self._current_loop = s
            self.in_vector_loop = True
            self.env[s.var] = onp.arange(lo, hi + 1).reshape(1, -1)
            self._loop_range = (lo, hi)
            try:
                self.scoped(s.body)
            finally:
                self.in_vector_loop = False
                self.env.pop(s.var, None)
            return
        for i in range(lo, hi + 1):
            self.env[s.var] = i
            if self._loop_body(s.body):
                break
        self.env.pop(s.var, None)

    def int_value(self, v, node) -> int:
        arr = onp.asarray(_raw(v))
        if arr.size != 1:
            if self.in_vector_loop:
                raise Devectorise(self._current_loop)
            raise self.error(node, "expected a single integer here")
        return int(arr.reshape(()))

    # ---- declarations and assignment
    def shape_of(self, spec: ast.TypeSpec) -> tuple[int, ...]:
        dims = [self.int_value(self.expr(e), e) for e in spec.array_sizes]
        sizes = [self.int_value(self.expr(e), e) for e in spec.sizes]
        if spec.kind in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
            spec.kind == "cholesky_factor_cov" and len(sizes) == 1
        ):
            sizes = sizes * 2
        for e, n in zip(spec.array_sizes + spec.sizes, dims + sizes, strict=False):
            if n < 0:
                raise self.error(e, f"a size must not be negative, got {n}")
        return tuple(dims + sizes)

    def declare(self, d: ast.Decl) -> None:
        shape = self.shape_of(d.spec)
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
        vshape = tuple(np.shape(value))[np.ndim(value) - vtype.ndim :] if vtype.ndim else ()
        if vshape != tuple(shape):
            raise self.error(
                node,
                f"size mismatch: '{name}' is declared with dimensions "
                f"{list(shape)} but the value has {list(vshape)}",
            )

    def lookup_var(self, name: str, node):
        try:
            v = self.env[name]
        except KeyError:
            if name in CONSTANTS:
                return CONSTANTS[name]
            raise self.error(node, f"'{name}' has no value here") from None
        if isinstance(v, ElementList):
            v = v.materialise()
            self.env[name] = v
        return v

    def assign(self, s: ast.Assign) -> None:
        lhs = s.lhs
        rhs = self.expr(s.rhs)
        if s.op != "=":
            current = self.expr(lhs)
            rhs = self.binop(s.op[:-1], current, lhs.type, rhs, s.rhs.type, s)
            rtype = lhs.type
        else:
            rtype = s.rhs.type
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
                        elem = onp.full(current.elem_shape, onp.nan)
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
        vb = np.ndim(value) - value_type.ndim
        for j, i in enumerate(positions):
            if not 1 <= i <= n:
                raise self.error(node, f"index {i} out of range 1..{n}")
            part = value[(slice(None),) * vb + (j,)]
            if rest:
                elem = current.items[i - 1]
                elem = self.set_items(elem, vtype.element(), rest, part, value_type.element(), node)
                if isinstance(elem, ElementList):
                    elem = elem.materialise()
                current.items[i - 1] = elem
            else:
                current.items[i - 1] = part
        return current

    def scatter_loop(self, current, vtype: SType, idx, value, node):
        """`x[i] = v` inside a vectorised loop: v's loop axis becomes x's first type axis."""
        lo, hi = self._loop_range
        arr = onp.asarray(_raw(idx)).reshape(-1)
        if arr.size != hi - lo + 1 or not onp.array_equal(
            arr, onp.arange(arr[0], arr[0] + arr.size)
        ):
            raise Devectorise(self._current_loop)
        a, b = int(arr[0]), int(arr[-1])
        if isinstance(current, ElementList):
            current = current.materialise()
        elem_nd = vtype.ndim - 1
        value = to_array(value)
        vb = np.ndim(value) - elem_nd
        if vb < 2:  # the value does not vary with the loop index: broadcast it
            value = np.reshape(value, np.shape(value)[:vb] + (1,) * (2 - vb) + np.shape(value)[vb:])
            value = value * onp.ones((1, b - a + 1) + (1,) * elem_nd)
        moved = np.moveaxis(value, 1, -(elem_nd + 1))  # (S, L, elem) -> (S, L as type axis, elem)
        n = _type_shape(current, vtype)[0]
        if not (1 <= a and b <= n):
            raise self.error(node, f"index out of range 1..{n}")
        if a == 1 and b == n:
            return moved
        cb = np.ndim(current) - vtype.ndim
        before = current[(slice(None),) * cb + (slice(0, a - 1),)]
        after = current[(slice(None),) * cb + (slice(b, None),)]
        parts = align_batch([before, moved, after], [vtype.ndim] * 3)
        nb = np.ndim(parts[1]) - vtype.ndim
        batch = onp.broadcast_shapes(*[np.shape(p)[:nb] for p in parts])
        parts = [
            p if np.shape(p)[:nb] == batch else p * onp.ones(batch + (1,) * vtype.ndim)
            for p in parts
        ]
        return np.concatenate(parts, axis=nb)

    # ---- model statements
    def add_target(self, value, vtype: SType) -> None:
        self.target = self.target + sum_to_batch0(value)

    def tilde(self, s: ast.Tilde) -> None:
        dist = get_distribution(s.dist)
        value = self.expr(s.lhs)
        args = [self.expr(a) for a in s.args]
        lp = self.log_density(dist, value, s.lhs.type, args, [a.type for a in s.args])
        if s.truncation is not None:
            raise self.error(s, "truncation T[,] is not supported yet")
        self.target = self.target + sum_to_batch0(lp)

    def log_density(self, dist, value, vtype: SType, args, types):
        """Elementwise log density summed over the vectorised (type) axes, batch axes kept."""
        values = [value] + list(args)
        ndims = [vtype.ndim] + [t.ndim for t in types]
        events = [dist.value_ndim] + list(dist.param_ndims)
        vec = max(k - e for k, e in zip(ndims, events, strict=True))
        arrs = [to_array(v) for v in values]
        batches = [np.ndim(a) - k for a, k in zip(arrs, ndims, strict=True)]
        nb = max(batches)
        shaped = []
        for a, b, k, e in zip(arrs, batches, ndims, events, strict=True):
            shape = np.shape(a)
            new = shape[:b] + (1,) * (nb - b) + (1,) * (vec - (k - e)) + shape[b:]
            shaped.append(a if new == shape else np.reshape(a, new))
        lp = dist.log_prob(*shaped)
        if vec:
            lp = np.sum(lp, axis=tuple(range(-vec, 0)))
        return lp

    # ---- expressions
    def expr(self, e: ast.Expr):
        if isinstance(e, ast.Num):
            return e.value
        if isinstance(e, ast.Var):
            return self.lookup_var(e.name, e)
        if isinstance(e, ast.BinOp):
            if e.op in ("&&", "||"):
                return self.logical(e)
            return self.binop(
                e.op, self.expr(e.left), e.left.type, self.expr(e.right), e.right.type, e
            )
        if isinstance(e, ast.UnOp):
            v = self.expr(e.operand)
            if e.op == "neg":
                return -v
            if e.op == "not":
                if isinstance(v, int | float):
                    return int(not v)
                return np.where(v, 0, 1)
            t = e.operand.type
            if t.is_scalar:
                return v
            if t.kind == "matrix":
                return np.swapaxes(v, -1, -2)
            return v
        if isinstance(e, ast.Ternary):
            c = self.expr(e.cond)
            if onp.size(_raw(c)) == 1:
                branch = e.if_true if bool(onp.asarray(_raw(c)).reshape(())) else e.if_false
                return self.expr(branch)
            a, b = self.expr(e.if_true), self.expr(e.if_false)
            c, a, b = align([c, a, b], [0, e.if_true.type.ndim, e.if_false.type.ndim])
            return where(c, a, b)
        if isinstance(e, ast.Index):
            return self.index(e)
        if isinstance(e, ast.ArrayExpr | ast.RowVectorExpr):
            vals = [self.expr(i) for i in e.items]
            k = e.items[0].type.ndim
            vals = align_batch(vals, [k] * len(vals))
            nb = np.ndim(vals[0]) - k
            batch = onp.broadcast_shapes(*[np.shape(v)[:nb] for v in vals])
            vals = [
                v if np.shape(v)[:nb] == batch else v * onp.ones(batch + (1,) * k) for v in vals
            ]
            out = np.stack(vals, axis=nb)
            return out
        if isinstance(e, ast.Call):
            return self.call(e)
        raise self.error(e, f"cannot evaluate {type(e).__name__}")

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
        if isinstance(a, int) and isinstance(b, int) and not isinstance(a, bool):
            return _int_binop(op, a, b, self, node)
        if op == "*":
            return matmul(a, ta, b, tb)
        if (
            op in ("/", "%/%", "%")
            and ta.is_int
            and tb.is_int
            and onp.any(onp.asarray(_raw(b)) == 0)
        ):
            raise self.error(node, f"integer {'modulus' if op == '%' else 'division'} by zero")
        if op == "/" and ta.is_int and tb.is_int:
            x, y = align([a, b], [ta.ndim, tb.ndim])
            return np.trunc(x / y).astype(int)
        x, y = align([a, b], [ta.ndim, tb.ndim])
        if op in ("+",):
            return x + y
        if op == "-":
            return x - y
        if op in (".*",):
            return x * y
        if op in ("./", "/"):
            return x / y
        if op in ("^", ".^"):
            return x**y
        if op == "%":
            return np.fmod(x, y)
        if op == "%/%":
            return np.trunc(x / y).astype(int)
        cmp = {
            "==": np.equal,
            "!=": np.not_equal,
            "<": np.less,
            "<=": np.less_equal,
            ">": np.greater,
            ">=": np.greater_equal,
        }[op]
        result = cmp(x, y)
        return result.astype(int) if hasattr(result, "astype") else int(result)

    def slice_bounds(self, item: ast.IndexItem, n: int) -> tuple[int, int]:
        lo = 1 if item.lo is None else self.int_value(self.expr(item.lo), item.lo)
        hi = n if item.hi is None else self.int_value(self.expr(item.hi), item.hi)
        if item.kind == "all":
            lo, hi = 1, n
        if hi >= lo and (lo < 1 or hi > n):
            raise self.error(item.lo or item.hi, f"slice {lo}:{hi} out of range 1..{n}")
        return lo, hi

    def index(self, e: ast.Index):
        base = e.base
        if (
            isinstance(base, ast.Var)
            and len(e.items) == 1
            and e.items[0].kind == "single"
            and isinstance(self.env.get(base.name), ElementList)
        ):
            idx = self.expr(e.items[0].lo)
            if isinstance(idx, int):
                lst = self.env[base.name]
                if not 1 <= idx <= len(lst.items):
                    raise self.error(
                        e, f"index {idx} out of range 1..{len(lst.items)} for '{base.name}'"
                    )
                v = lst.items[idx - 1]
                if v is None:
                    return onp.full(lst.elem_shape, onp.nan if lst.base == "real" else 0)
                return v
        value = self.expr(base)
        t = base.type
        axis = 0  # current type axis
        ndim_left = t.ndim
        for item in e.items:
            b = np.ndim(value) - ndim_left
            n = np.shape(value)[b + axis]
            if item.kind == "single":
                idx = self.expr(item.lo)
                it = item.lo.type
                if isinstance(idx, int) or onp.ndim(_raw(idx)) == 0:
                    i = int(_raw(idx))
                    if not 1 <= i <= n:
                        raise self.error(
                            item.lo,
                            f"index {i} out of range 1..{n}"
                            + (f" for '{base.name}'" if isinstance(base, ast.Var) else ""),
                        )
                    value = value[(slice(None),) * (b + axis) + (i - 1,)]
                    ndim_left -= 1
                    continue
                arr = onp.asarray(_raw(idx))
                if arr.size and (arr.min() < 1 or arr.max() > n):
                    raise self.error(item.lo, f"index out of range 1..{n}")
                if it.is_scalar:  # batched scalar index (vectorised loop)
                    value = _gather(value, b, axis, arr - 1)
                    ndim_left -= 1
                    continue
                if onp.ndim(arr) != 1:
                    if self.in_vector_loop:
                        raise Devectorise(self._current_loop)
                    raise NeedsPerSample()
                value = value[(slice(None),) * (b + axis) + (arr - 1,)]
                axis += 1
                continue
            lo, hi = self.slice_bounds(item, n)
            value = value[(slice(None),) * (b + axis) + (slice(lo - 1, max(hi, lo - 1)),)]
            axis += 1
        return value

    def call(self, e: ast.Call):
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


def _gather(value, b: int, axis: int, idx):
    """value[..., idx, ...] on type axis `axis` where idx carries batch axes of its own."""
    bi = idx.ndim
    nb = max(b, bi)
    shape = np.shape(value)
    if b < nb:
        value = np.reshape(value, shape[:b] + (1,) * (nb - b) + shape[b:])
        shape = np.shape(value)
    if bi < nb:
        idx = idx.reshape(idx.shape + (1,) * (nb - bi))
    index = []
    for j in range(nb):
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
    shape = tuple(np.shape(value))
    return shape[len(shape) - t.ndim :] if t.ndim else ()


def _decl_stype(d: ast.Decl) -> SType:
    from ppl.checker import decl_type

    return decl_type(d.spec)


def _describe(e: Exception) -> str:
    text = str(e).strip() or type(e).__name__
    if "broadcast" in text or "shapes" in text or "mismatch" in text:
        return f"sizes do not match ({text})"
    return text
