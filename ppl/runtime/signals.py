"""Exceptions that steer a run of the model: rerun a loop one index at a time, evaluate each draw
on its own, reject a draw, leave a loop body; and the wording of numerical errors for users."""

from __future__ import annotations

from ppl.language import ast


class Devectorise(Exception):
    """A loop run with a batched index met something it cannot do; rerun it one index at a time."""

    def __init__(self, loop: ast.For):
        super().__init__("devectorise")
        self.loop = loop


class NeedsPerSample(Exception):
    """Control flow depends on a latent value: evaluate each Monte Carlo sample on its own."""


class Rejected(Exception):
    """`reject(...)` was reached: the current draw has zero density."""


class LoopBreak(Exception):
    """`break;`: leaves the innermost loop."""


class LoopContinue(Exception):
    """`continue;`: ends the innermost loop's iteration."""


def describe(e: Exception) -> str:
    """A numerical error's message as a model error says it (shape errors as sizes)."""
    text = str(e).strip() or type(e).__name__
    if "broadcast" in text or "shapes" in text or "mismatch" in text:
        return f"sizes do not match ({text})"
    return text
