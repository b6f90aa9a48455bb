"""Fused scalar kernels: a tree of scalar operations as one autograd node with a hand-written VJP.

A tree of elementwise operations on scalars (`sqrt(a0 + a1 * square(y[t - 1] - mu) + ...)`) runs
as a single autograd node whose VJP is the hand-written reverse pass over the tree: one node per
statement instead of one per operation, which is what sequential loops (recurrences) pay for.
The forward pass applies the very same numpy operations in the same order, so values are
unchanged; when an operand has more than one batch axis (vectorised loops, which would need
alignment) the ordinary per-operation path runs instead.
"""

from __future__ import annotations

import operator

import autograd.numpy as np
import numpy as onp
from autograd.extend import defvjp_argnums, primitive
from autograd.numpy.numpy_vjps import unbroadcast

from ppl.language import ast
from ppl.language.types import fast_shape
from ppl.library.functions import lookup
from ppl.runtime.operators import binop_fn
from ppl.runtime.signals import Devectorise, NeedsPerSample, describe

#: Stan's scalar operators a kernel applies itself
_FUSED_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv}
#: Stan's functions a kernel applies itself to one real scalar, each with the numpy function the
#: library applies (ppl.library.functions registers them as elementwise unary maths;
#: tests/runtime/test_fused_kernels.py checks that the two agree)
FUSED_CALLS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "square": np.square}
#: the plain-numpy forward form of each (the kernel's node is one autograd primitive)
_RAW = {np.exp: onp.exp, np.log: onp.log, np.sqrt: onp.sqrt, np.square: onp.square}


def fusable(e: ast.Expr) -> bool:
    """Whether `e` is an operation a kernel computes itself (not a leaf of one)."""
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
    if isinstance(e, ast.Call):  # user functions cannot take a library function's name
        return e.name in FUSED_CALLS and len(e.args) == 1 and e.args[0].type.ndim == 0
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


def compile_fused(e: ast.Expr, expr_fn):
    """A fused closure for the scalar tree rooted at `e`, or None if it has fewer than 2 ops;
    `expr_fn` compiles its leaves."""
    kernel = _Kernel()

    # slots: leaves first, then one per instruction, in evaluation order; build() records the
    # instructions with provisional operand numbers, renumbered below
    order: list = []

    def number(node):
        if not fusable(node):
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
    kernel.leaves = [expr_fn(leaf) for leaf in leaves]
    n = len(leaves)

    def slot(ref):
        return ref[1] if ref[0] == "leaf" else n + ref[1]

    for _, node, a, b in ops:
        if isinstance(node, ast.BinOp):
            generic = binop_fn(node.op, node.left.type, node.right.type, node)
            kernel.instrs.append(("bin", _FUSED_BINOPS[node.op], slot(a), slot(b), generic))
        elif isinstance(node, ast.UnOp):
            kernel.instrs.append(("un", operator.neg, slot(a), None, _neg_generic))
        else:
            kernel.instrs.append(("un", FUSED_CALLS[node.name], slot(a), None, _call_generic(node)))
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
            raise ev.error(node, f"{name}: {describe(err)}") from None

    return generic
