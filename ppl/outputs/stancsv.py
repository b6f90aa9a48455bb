"""draws.csv as a Stan CSV file: the column names, and a reader that gives every Stan variable
back with its shape, its element order and its integer type.

CmdStan names an element of a container by its 1-based indices after dots, first index fastest
(column-major): `theta.1`, `W.1.2` (matrix row 1, column 2), `z.3.2` (array element 3, vector
element 2). A name then never holds the CSV delimiter, so every CSV reader splits the header
right (pandas, R, a spreadsheet), and the readers of CmdStan's files (ArviZ's from_cmdstan,
CmdStanPy, R's posterior) rebuild the arrays from these names. The tables (console,
summary.csv, fit.summary()) keep Stan's bracket names, `W[1,2]`, as CmdStan's stansummary and
CmdStanPy's summary() do: ppl.outputs.summary.scalar_names.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ppl.errors import PplError
from ppl.outputs.summary import element_indices

_IDENTIFIER = r"[A-Za-z][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"({_IDENTIFIER})((?:\.[0-9]+)*)")
_BRACKETED = re.compile(rf"({_IDENTIFIER})\[([0-9]+(?:, ?[0-9]+)*)\]")
_INTEGER = re.compile(r"[-+]?[0-9]+")


def csv_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """CmdStan's column names of a variable's elements, in Stan's order (first index
    fastest): `W.1.1, W.2.1, W.1.2, ...`."""
    if not shape:
        return [name]
    return [".".join([name, *map(str, ix)]) for ix in element_indices(shape)]


def element(column: str) -> tuple[str, tuple[int, ...]] | None:
    """(variable, 1-based indices) of a column named as CmdStan does (`W.1.2`) or as Stan
    prints it (`W[1,2]`: older ppl files, a quoted header); None for any other name, CmdStan's
    own columns (`lp__`) included. Only identifiers come back, so a crafted header cannot
    name a file outside a directory."""
    if column.endswith("__") or column == "psis_log_weight":  # older ppl's name for it
        return None
    m = _DOTTED.fullmatch(column)
    if m:
        return m.group(1), tuple(int(i) for i in m.group(2).split(".")[1:])
    m = _BRACKETED.fullmatch(column)
    if m:
        return m.group(1), tuple(int(i) for i in m.group(2).split(","))
    return None


def bracket_name(column: str) -> str:
    """Stan's printed name of a column (`W.1.2` -> `W[1,2]`), as the tables and posteriordb's
    references name elements; other names unchanged."""
    parsed = element(column)
    if parsed is None or not parsed[1]:
        return column
    return f"{parsed[0]}[{','.join(str(i) for i in parsed[1])}]"


@dataclass
class StanCsv:
    """A draws.csv read back: each Stan variable (draws, *shape) in the file's order, its
    columns' names in Stan's element order, and the other columns (lp__, log_p__, log_g__,
    psis_log_weight, a sampler's `__` columns) by name."""

    variables: dict[str, np.ndarray] = field(default_factory=dict)
    names: dict[str, list[str]] = field(default_factory=dict)
    other: dict[str, np.ndarray] = field(default_factory=dict)

    def elements(self, name: str) -> list[tuple[str, np.ndarray]]:
        """(column name, draws) of each element of `name`, in Stan's order."""
        arr = self.variables[name]
        flat = np.transpose(arr, (0, *reversed(range(1, arr.ndim)))).reshape(arr.shape[0], -1)
        return list(zip(self.names[name], flat.T, strict=True))


def _header(lines: list[str], path: Path) -> tuple[int, list[str]]:
    """(line index, column names) of the first line that is not a `#` comment. A header
    that older ppl versions wrote unquoted (`W[1,2]`: the comma split the name) is mended."""
    at = next((i for i, line in enumerate(lines) if line.strip() and not line.startswith("#")),
              None)  # fmt: skip
    if at is None:
        raise PplError(f"{path}: no header line (column names)")
    fields, mended = next(csv.reader([lines[at]])), []
    for f in fields:
        if mended and "[" in mended[-1] and not mended[-1].endswith("]"):
            mended[-1] += "," + f
        else:
            mended.append(f.strip())
    return at, mended


def _place(name: str, cols: list[tuple[int, tuple[int, ...]]], path: Path) -> tuple:
    """The shape of `name` and where each column goes in it; PplError when its elements do
    not fill an array (one missing, one twice, indices of different lengths)."""
    ndims = {len(idx) for _, idx in cols}
    if len(ndims) != 1:
        raise PplError(f"{path}: the columns of {name} have different numbers of indices")
    shape = tuple(max(idx[d] for _, idx in cols) for d in range(ndims.pop()))
    seen = {idx for _, idx in cols}
    if len(seen) != len(cols) or len(cols) != int(np.prod(shape, dtype=int)) or \
            any(i < 1 for idx in seen for i in idx):  # fmt: skip
        raise PplError(f"{path}: the columns of {name} do not make a {shape} array "
                       "(an element missing or repeated)")  # fmt: skip
    return shape, [tuple(i - 1 for i in idx) for _, idx in cols]


def read_draws(directory_or_file) -> StanCsv:
    """The draws of a `ppl fit --output DIR` directory (or of a Stan CSV file, CmdStan's
    included) by Stan variable, with shapes; integer variables stay integers."""
    path = Path(directory_or_file)
    if path.is_dir():
        path = path / "draws.csv"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise PplError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    at, header = _header(lines, path)
    rows = [line for line in lines[at + 1 :] if line.strip() and not line.startswith("#")]
    try:
        table = np.loadtxt(rows, delimiter=",", ndmin=2, dtype=float) if rows else \
            np.zeros((0, len(header)))  # fmt: skip
    except ValueError as e:
        raise PplError(f"cannot read {path}: {e}") from None
    if table.shape[1] != len(header):
        raise PplError(f"{path}: {table.shape[1]} values a row but {len(header)} column names")
    first = rows[0].split(",") if rows else []
    out = StanCsv()
    grouped: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    for j, column in enumerate(header):
        parsed = element(column)
        if parsed is None:
            out.other[column] = table[:, j]
        else:
            grouped.setdefault(parsed[0], []).append((j, parsed[1]))
    for name, cols in grouped.items():
        shape, places = _place(name, cols, path)
        js = [j for j, _ in cols]
        values = table[:, js]
        ints = bool(first) and all(_INTEGER.fullmatch(first[j].strip()) for j in js) and \
            bool(np.all(values == np.round(values)))  # fmt: skip
        arr = np.zeros((table.shape[0], *shape), dtype=np.int64 if ints else float)
        for k, idx in enumerate(places):
            arr[(slice(None), *idx)] = values[:, k]
        out.variables[name] = arr
        order = sorted(range(len(cols)), key=lambda k: tuple(reversed(places[k])))
        out.names[name] = [header[js[k]] for k in order]
    return out
