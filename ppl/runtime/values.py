"""What the evaluator's environment holds besides plain arrays: arrays being filled element by
element (ElementList), stacked as one autograd node; and helpers on values and their types."""

from __future__ import annotations

import numpy as onp
from autograd.extend import defvjp_argnum, primitive

from ppl.ir.marks import compiled_of
from ppl.language import ast
from ppl.language.types import SType, align_batch, fast_ndim, fast_shape, to_array
from ppl.runtime.row_selection import broadcast
from ppl.runtime.signals import Devectorise


def raw(x):
    """The array inside an autograd box (or the value itself)."""
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


def trim(env: dict, n: int) -> None:
    """Drop the names declared since `env` had `n` entries (dicts keep insertion order; the checker
    forbids shadowing, so names that existed before a scope are never removed inside it)."""
    for name in list(env)[n:]:
        del env[name]


def type_shape(value, t: SType) -> tuple[int, ...]:
    shape = tuple(fast_shape(value))
    return shape[len(shape) - t.ndim :] if t.ndim else ()


def decl_stype(d: ast.Decl) -> SType:
    compiled = compiled_of(d)
    if compiled.stype is None:
        from ppl.language.checker import decl_type

        compiled.stype = decl_type(d.spec)
    return compiled.stype
