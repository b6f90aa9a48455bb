"""The declared records the lowered program's nodes carry (their `marks` and `compiled` fields,
ppl.language.ast): what the lowering and the passes decided about a node, and the backend's
closures for it. Nothing else is ever written on a node."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class LoopPlan:
    """How a `for` loop runs (ppl.ir.passes.loop_vectorisation.plan)."""

    private: dict[str, object] | None  # vectorised: its private variables; None: sequential
    sequential_because: str = ""
    reductions: frozenset = frozenset()  # its accumulating assignments (summed over rows)


@dataclass(eq=False)
class Marks:
    """One node's decisions: the lowering's and each pass's (ppl.ir.passes)."""

    # a `~` statement: the density it evaluates (a Truncated one for `T[L, U]`) and the
    # expressions it passes (the bounds after the arguments)
    density: Any = None
    density_args: list = field(default_factory=list)
    # a `target +=` lowered from a `~` on a user-defined density: that `~` as written
    written: Any = None
    # a `for` loop: loop_vectorisation's plan and decision, loop_invariants' expressions
    plan: LoopPlan | None = None
    vectorise: bool = False
    invariants: list | None = None  # the pass's marks (None: the pass did not run)
    found_invariants: list | None = None  # invariant_expressions' answer, kept
    # an expression: constant_folding's data names (None: not folded)
    constant: tuple[str, ...] | None = None
    # a `~` or a multivariate normal's `_lpdf` call: sufficient_statistics' mark
    sufficient_statistics: bool = False


@dataclass(eq=False)
class Compiled:
    """The backend's closures for one node (ppl.runtime), built at its first run."""

    value: Any = None  # an expression's value function
    run: Any = None  # a statement's run function (its body, with the error handling)
    body: Any = None  # a statement's body function
    statements: list | None = None  # a function definition's statement functions
    memo_loop: bool = False  # an expression compiled as a loop-invariant memo
    stype: Any = None  # a declaration's SType
    ranks: dict | None = None  # a program's type rank of every name it declares


def marks_of(node) -> Marks:
    """The node's marks, made at the first decision."""
    if node.marks is None:
        node.marks = Marks()
    return node.marks


def compiled_of(node) -> Compiled:
    """The node's compiled record, made at its first compilation."""
    if node.compiled is None:
        node.compiled = Compiled()
    return node.compiled
