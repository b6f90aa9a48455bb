"""Stan's binary operators on batched values: `binop_fn` resolves one for static operand types,
with exact integer arithmetic on Python ints and alignment of batch axes on arrays."""

from __future__ import annotations

import operator

import autograd.numpy as np
import numpy as onp

from ppl.language.types import SType, align
from ppl.library.functions import matmul
from ppl.limits import INT_RANGE
from ppl.runtime.values import raw

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


def binop_fn(op: str, ta: SType, tb: SType, node):
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
            if onp.any(onp.asarray(raw(b)) == 0):
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


def _int_binop(op, a, b, ev, node):
    if op in ("+", "-", "*"):
        r = a + b if op == "+" else a - b if op == "-" else a * b
        if not INT_RANGE[0] <= r <= INT_RANGE[1]:  # Stan's ints are 32 bits
            raise ev.error(node, f"integer overflow: {a} {op} {b} = {r} is outside Stan's int "
                           f"range {INT_RANGE}")  # fmt: skip
        return r
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
