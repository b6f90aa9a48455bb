"""The registry every library function is entered in, and the helpers their type rules share.

A function is a type rule (argument types -> result type, raising SignatureError for a bad
call) and an autograd implementation ``impl(args, types)`` over runtime arrays laid out as in
docs/conventions.md (batch axes first). ppl.library.functions and the modules it imports fill
LIBRARY.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as onp

from ppl.language.types import REAL, SType


class SignatureError(Exception):
    """Arguments do not fit the function; the checker turns it into a ModelError with a position."""


@dataclass
class Function:
    name: str
    type_rule: Callable[[list[SType]], SType]
    impl: Callable  # impl(args, types) -> value
    size_args: tuple[int, ...] = ()  # argument positions that are sizes (must be loop-invariant)
    nargs: tuple[int, ...] | None = None  # accepted argument counts


LIBRARY: dict[str, Function] = {}


def register(name, type_rule, impl, size_args=(), nargs=None) -> None:
    LIBRARY[name] = Function(name, type_rule, impl, tuple(size_args), nargs)


def fixed(result: SType):
    """The type rule of a function whose result type does not depend on its arguments."""
    return lambda types: result


def real_of(t: SType) -> SType:
    return t.with_base("real")


def elementwise_rule(types):
    """Elementwise result: the one non-scalar shape among the arguments (scalars broadcast)."""
    shaped = [t for t in types if not t.is_scalar]
    if not shaped:
        return REAL
    first = shaped[0]
    for t in shaped[1:]:
        if (t.kind, t.adims) != (first.kind, first.adims):
            raise SignatureError(
                f"arguments of types {first} and {t} cannot be combined elementwise"
            )
    return real_of(first)


def type_axes(t: SType) -> tuple[int, ...]:
    return tuple(range(-t.ndim, 0))


def int_value(x) -> int:
    """A size argument as a Python int (sizes never carry batch axes)."""
    arr = onp.asarray(getattr(x, "_value", x))
    if arr.size != 1:
        raise SignatureError("a size argument must be a single integer")
    return int(arr.reshape(()))
