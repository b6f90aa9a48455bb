"""Record a function of arrays once as a tape of numpy calls, then replay it without the
interpreter that produced it.

An ODE's right-hand side is a user function run by the evaluator: each call walks its AST and
autograd's tracer, about a millisecond for a few arithmetic operations, and a solver calls it
thousands of times per gradient. Traced once with a recording node (autograd's own tracing
machinery: every primitive that touches an input becomes a tape entry holding the raw numpy
function and its other arguments), the same arithmetic replays as straight numpy calls. Nested
traces are recorded too, so a recorded reverse pass gives the Jacobian at replay speed.

A tape is only as general as the trace: shapes and every value not derived from the inputs are
frozen, and so is any control flow on the inputs' values. Callers therefore record only
functions without such branches (ppl.runtime.ode_calls checks the user function) and `record`
checks a
replay at a second point against a fresh evaluation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from autograd.tracer import Node, trace

_RECORDING: list[list] = []


class _Entry(Node):
    """One primitive call on traced values: its raw function, its other arguments, and the tape
    entries its traced arguments came from."""

    __slots__ = ["fun", "args", "kwargs", "argnums", "parents"]

    def __init__(self, value, fun, args, kwargs, parent_argnums, parents):
        self.fun = fun.fun  # the raw numpy function under autograd's wrapper
        self.args = args
        self.kwargs = kwargs
        self.argnums = parent_argnums
        self.parents = parents
        _RECORDING[-1].append(self)

    def initialize_root(self):
        self.fun = None
        self.parents = ()


class TapeMismatch(ValueError):
    """A replay disagreed with the function: it depends on its inputs in a way a tape cannot
    hold (a branch on their values, a value read outside autograd)."""


class Tape:
    """`tape(*inputs)` replays the recorded calls on new inputs of the recorded shapes."""

    def __init__(self, root: _Entry, output: _Entry, entries: list[_Entry]):
        needed = {id(output)}
        for entry in reversed(entries):  # keep only what the output depends on
            if id(entry) in needed:
                needed.update(id(p) for p in entry.parents)
        self._steps = []
        slot = {id(root): 0}
        for entry in entries:
            if id(entry) not in needed:
                continue
            slot[id(entry)] = len(slot)
            pairs = zip(entry.argnums, entry.parents, strict=True)
            sources = tuple((a, slot[id(p)]) for a, p in pairs)
            self._steps.append((entry.fun, list(entry.args), entry.kwargs, sources))
        self._output = slot[id(output)]
        self.size = len(self._steps)

    def __call__(self, *inputs):
        values = [inputs]
        for fun, args, kwargs, sources in self._steps:
            for argnum, source in sources:
                args[argnum] = values[source]
            values.append(fun(*args, **kwargs))
        return values[self._output]


def record(fun: Callable, inputs: tuple, check: tuple | None = None, rtol: float = 1e-10) -> Tape:
    """A tape of `fun(*inputs)` (arrays in, one array out). With `check`, a second set of inputs
    on which the replay must match a fresh call of `fun`, else TapeMismatch."""
    root = _Entry.new_root()
    _RECORDING.append([])
    try:
        _, output = trace(root, lambda args: fun(*args), tuple(inputs))
    finally:
        entries = _RECORDING.pop()
    if output is None or not isinstance(output, _Entry):
        raise TapeMismatch("the output does not depend on the inputs")
    tape = Tape(root, output, entries)
    if check is not None:
        got, want = np.asarray(tape(*check)), np.asarray(fun(*check))
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=1e-300,
                                                      equal_nan=True):  # fmt: skip
            raise TapeMismatch("a replay of the recorded function disagreed with the function")
    return tape
