"""Passes over the lowered program (ppl.ir.graph), as stanc3's optimisation passes over its MIR.

Each pass decides something once, from the program's text and types alone (no data), marks the
statement or expression it concerns and records a `Decision`; the evaluator does what the marks
say, and nothing a pass did not mark. `ppl ir --passes none` shows (and `CompiledModel(...,
passes=())` runs) the program as written: every loop one index at a time, nothing folded.
"""

from __future__ import annotations

from ppl.errors import PplError
from ppl.ir.lowering import lower
from ppl.ir.passes import (
    constant_folding,
    loop_invariants,
    loop_vectorisation,
    noncentre,
    sufficient_statistics,
)
from ppl.ir.program import Program
from ppl.language.checker import CheckedProgram

#: name -> pass, in the order they run (non-centring first: it rewrites statements the others
#: then plan; folding next: the others leave folded constants alone)
PASSES = {
    noncentre.NAME: noncentre.run,
    "constant_folding": constant_folding.run,
    "loop_vectorisation": loop_vectorisation.run,
    "loop_invariants": loop_invariants.run,
    "sufficient_statistics": sufficient_statistics.run,
}
#: the passes every fit runs; non-centring changes the latents, so a fit asks for it
#: (ppl.methods.reparam, --reparam)
ALL = tuple(name for name in PASSES if name != noncentre.NAME)


def optimise(program: Program, passes: tuple[str, ...] = ALL) -> Program:
    for name in [n for n in PASSES if n in passes]:  # in PASSES' order
        PASSES[name](program)
        program.passes += (name,)
    return program


def lowered(checked: CheckedProgram, passes: tuple[str, ...] = ALL) -> Program:
    """The checked program lowered and optimised, once per set of passes: every compiled model of
    one checked program runs the same statements (a streamed fit's chunks, a minibatch's pool)."""
    memo = checked.lowered
    key = tuple(passes)
    if key not in memo:
        memo[key] = optimise(lower(checked), key)
    return memo[key]


def parse(text: str) -> tuple[str, ...]:
    """`all` (the default passes), `none` or a comma-separated list of pass names (`--passes`;
    `all,noncentre` adds non-centring to the defaults)."""
    if text == "all":
        return ALL
    if text == "none":
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if "all" in names:
        names = ALL + names
    unknown = [n for n in names if n not in PASSES and n != "all"]
    if unknown:
        raise PplError(f"--passes: unknown pass {', '.join(unknown)} (passes: all, none, "
                       f"{', '.join(PASSES)})")  # fmt: skip
    return tuple(n for n in PASSES if n in names)
