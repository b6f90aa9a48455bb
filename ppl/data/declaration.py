"""One variable of a model's ``data`` block as the loader sees it (:class:`DataSpec`), and how
messages introduce it: by its name and the type as the model declares it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Dim = int | str | Callable[[dict[str, np.ndarray]], int]
Bound = None | float | Callable[[dict[str, np.ndarray]], "float | np.ndarray"]

#: int data must lie in [-INT64_MAX, INT64_MAX): numpy's int64
INT64_MAX = 2**63


@dataclass
class DataSpec:
    """One declaration of the ``data`` block, as the compiler hands it over.

    ``dims`` is the full shape, outermost first: literal sizes, names of int data variables
    ("size variables", which may be inferred from the arrays using them) or callables evaluated
    on the values loaded so far.  ``decl`` is optional source text of the type (e.g.
    ``"vector<lower=0>[N]"``), used only to make messages read like the model.
    """

    name: str
    elem: str  # "int" or "real"
    dims: list[Dim]
    lower: Bound = None
    upper: Bound = None
    line: int = 0
    decl: str = ""
    constraint: str | None = None  # a constrained type: "simplex", "cov_matrix", ...


def dim_text(d: Dim) -> str:
    """One size as the model wrote it: a number, a data name or the expression's text."""
    if isinstance(d, str):
        return d
    if isinstance(d, (int, np.integer)):
        return str(int(d))
    return str(getattr(d, "text", "?"))


def declared_type(spec: DataSpec) -> str:
    """The declared type, for messages: the compiler's text if given, else ``real[N, 3]``."""
    if spec.decl:
        return spec.decl
    if not spec.dims:
        return spec.elem
    return f"{spec.elem}[{', '.join(dim_text(d) for d in spec.dims)}]"


def describe(spec: DataSpec) -> str:
    """``y (vector[N], line 4)``: how a variable is introduced in messages."""
    line = f", line {spec.line}" if spec.line else ""
    return f"{spec.name} ({declared_type(spec)}{line})"
