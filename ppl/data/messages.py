"""How data messages show numbers, cells, indices and shapes: the way users wrote or look for
them (integral floats without ``.0``, indices 1-based like Stan's)."""

from __future__ import annotations

import numpy as np


def number_text(v: object) -> str:
    """Format a number the way a user wrote it: integral floats without ``.0``."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        return repr(v)
    return str(v)


def cell_text(text: str) -> str:
    """Quote a (possibly huge) cell for a message."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


def index_text(name: str, index: tuple[int, ...]) -> str:
    """``y[3, 2]`` for the 0-based index (2, 1): Stan's 1-based indices."""
    if not index:
        return name
    return f"{name}[{', '.join(str(i + 1) for i in index)}]"


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    """Index of the first True element of a boolean array (C order)."""
    flat = int(np.flatnonzero(mask.ravel())[0])
    return tuple(int(i) for i in np.unravel_index(flat, mask.shape))


def shape_text(shape: tuple[int, ...]) -> str:
    """``length 3`` or ``shape (3, 2)``: a shape in words."""
    if not shape:
        return "a single number"
    if len(shape) == 1:
        return f"length {shape[0]}"
    return f"shape ({', '.join(str(n) for n in shape)})"
