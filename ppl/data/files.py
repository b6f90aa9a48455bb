"""Read the values a model's ``data`` block declares from CSV files, Stan JSON files and ``--set``.

The compiler describes each data variable with a :class:`DataSpec`; :func:`load_data` finds every
variable in the sources, infers sizes that were not given, checks shapes, integrality and bounds,
and returns exact-shape numpy arrays.  Every problem a user can cause raises
:class:`ppl.errors.DataError` whose message names the variable, the file and the place in it.

Places are reported the way users look for them: CSV rows are numbered from 1 *not counting the
header row*; JSON indices are 1-based like Stan's (``y[3, 2]``).

This module is the loading front; the pieces are next to it: the declaration (declaration.py),
the files (reading.py, csv_text.py, json_file.py), the sources of a value (sources.py) and its
checks (checks.py).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np

from ppl.data.checks import check_bounds, check_shape, convert, infer_size, resolve_dims
from ppl.data.csv_text import CsvText, split_column_name
from ppl.data.declaration import INT64_MAX, DataSpec, declared_type, describe
from ppl.data.json_file import JsonFile, json_array
from ppl.data.messages import cell_text, first_index, index_text, number_text
from ppl.data.reading import read_text, read_utf8
from ppl.data.sources import ArraySource, SetSource, Source
from ppl.errors import DataError
from ppl.library.transforms import make_transform

__all__ = [
    "CONSTRAINT_TEXT",
    "PythonValues",
    "load_data",
    "open_data_file",
]


class PythonValues:
    """Data given from Python (ppl.api): a mapping of name -> number, list or numpy array, or a
    pandas DataFrame whose columns follow the CSV convention (``x``, ``X.1``, ``X.2``: a row per
    element of the first dimension)."""

    kind = "python"

    def __init__(self, label: str, values) -> None:
        self.label = self.path = label
        self.values = dict(values)
        self.rows_only = False  # a DataFrame gives arrays (a row per element), as CSV does

    @classmethod
    def from_frame(cls, frame, label: str = "the DataFrame") -> PythonValues:
        columns = {str(c): np.asarray(frame[c]) for c in frame.columns}
        return cls.from_columns(columns, len(frame), label)

    @classmethod
    def from_columns(cls, columns: dict[str, np.ndarray], rows: int, label: str) -> PythonValues:
        """Columns named as in a CSV file (``x``, ``X.1``, ``X[2,3]``), `rows` long."""
        grouped: dict[str, dict[tuple[int, ...], np.ndarray]] = {}
        for col, values in columns.items():
            name, index = split_column_name(col)
            grouped.setdefault(name, {})[index] = values
        values = {}
        for name, cols in grouped.items():
            arities = {len(t) for t in cols}
            if len(arities) > 1:
                raise DataError(f"{label}: the columns of {name} mix index depths")
            if arities == {0}:
                values[name] = cols[()]
                continue
            trailing = tuple(max(t[k] for t in cols) for k in range(arities.pop()))
            keys = list(itertools.product(*(range(1, m + 1) for m in trailing)))
            missing = [t for t in keys if t not in cols]
            if missing:
                dotted = ".".join(str(i) for i in missing[0])
                raise DataError(f'{label}: column "{name}.{dotted}" is missing')
            values[name] = np.stack([cols[t] for t in keys], axis=1).reshape((rows, *trailing))
        out = cls(label, values)
        out.rows_only = True
        return out

    def source_for(self, spec: DataSpec) -> Source | None:
        if spec.name not in self.values or (self.rows_only and not spec.dims):
            return None
        return ArraySource(
            self.label, spec.name, _python_array(self.label, spec.name, self.values[spec.name])
        )


def _python_array(label: str, name: str, value: object) -> np.ndarray:
    """A Python value as an int64/float64 array, with a message naming it if it is not numbers."""
    if hasattr(value, "to_numpy"):  # pandas Series, xarray
        value = value.to_numpy()
    if isinstance(value, (list, tuple)) and not isinstance(value, np.ndarray):
        try:
            a = np.asarray(value)
        except ValueError:
            a = np.asarray(None, dtype=object)
        if a.dtype.kind not in "biuf":
            return json_array(label, name, [*value], fast_ok=False)
    else:
        a = np.asarray(value)
    if a.dtype.kind == "b":
        return a.astype(np.int64)
    if a.dtype.kind == "u" and a.size and int(a.max()) >= INT64_MAX:
        return a.astype(np.float64)
    if a.dtype.kind in "iu":
        return a.astype(np.int64)
    if a.dtype.kind == "f":
        return a.astype(np.float64)
    first = cell_text(str(a.flat[0])) if a.size else "empty"
    raise DataError(f"{label}: {name} holds {a.dtype} values ({first}); data must be numbers")


def open_data_file(path: str) -> CsvText | JsonFile:
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return CsvText(path, read_utf8(path))
    if suffix == ".json":
        return JsonFile(path, read_text(path))
    raise DataError(
        f"{path}: unknown data file type {suffix or '(no extension)'!s}; "
        "give a .csv or a .json file"
    )


#: what each constrained type requires of a data value (Stan's tolerance: 1e-8)
CONSTRAINT_TEXT = {
    "simplex": "a simplex (non-negative entries summing to 1)",
    "ordered": "ordered (strictly increasing)",
    "positive_ordered": "positive and strictly increasing",
    "unit_vector": "a unit vector (Euclidean norm 1)",
    "sum_to_zero_vector": "a vector summing to 0",
    "cov_matrix": "a covariance matrix (symmetric positive definite)",
    "corr_matrix": "a correlation matrix (symmetric positive definite with a unit diagonal)",
    "cholesky_factor_cov": "a Cholesky factor (lower triangular with a positive diagonal)",
    "cholesky_factor_corr": (
        "the Cholesky factor of a correlation matrix "
        "(lower triangular, positive diagonal, rows of unit length)"
    ),
}


def _check_constraint(spec: DataSpec, value: np.ndarray, src: Source | None) -> None:
    """A value of a constrained type (simplex, cov_matrix, ...) must satisfy its constraint."""
    if spec.constraint is None or value.size == 0:
        return
    t = make_transform(spec.constraint)
    lead = value.shape[: value.ndim - t.core_ndim]
    for idx in np.ndindex(*lead):
        if not t.in_support(value[idx]):
            where = f"{index_text(spec.name, idx)} in {describe(spec)}" if idx else describe(spec)
            origin = f" ({src.where(idx + (0,) * t.core_ndim)})" if src is not None else ""
            raise DataError(f"{where} is not {CONSTRAINT_TEXT[spec.constraint]}{origin}")


def _missing(
    spec: DataSpec,
    paths: list[str],
    files: list[CsvText | JsonFile],
    users: list[tuple[DataSpec, int]],
) -> DataError:
    where = ", ".join(paths) if paths else "the data (no data files were given)"
    n = len(spec.dims)
    if n == 0:
        how = f"give it as a JSON entry or --set {spec.name}=..."
    elif n == 1:
        how = f'give it as a CSV column "{spec.name}" or a JSON entry'
    else:
        first = spec.name + ".1" * (n - 1)
        how = f"give it as CSV columns {first}, ... or a JSON entry"
    line = f", line {spec.line}" if spec.line else ""
    msg = (
        f"data variable '{spec.name}' ({declared_type(spec)}{line}) was not found in {where}; {how}"
    )
    if users:
        names = ", ".join(dict.fromkeys(u.name for u, _ in users))
        msg += f" (or give {names}, so that {spec.name} can be inferred from its size)"
    for f in files:
        if n == 0 and isinstance(f, CsvText) and spec.name in f.vars:
            msg += f'; {f.path} has a column "{spec.name}", but a CSV column cannot give a scalar'
            break
    return DataError(msg)


def _check_set(name: str, text: str, by_name: dict[str, DataSpec]) -> DataSpec:
    spec = by_name.get(name)
    if spec is None:
        known = ", ".join(by_name) if by_name else "none"
        raise DataError(
            f"--set {name}={text}: the data block declares no variable '{name}' "
            f"(data variables: {known})"
        )
    if spec.dims:
        raise DataError(
            f"--set {name}={text}: {describe(spec)} is not a scalar; --set gives only single "
            "values, put arrays in a CSV or JSON file"
        )
    return spec


def load_data(
    specs: list[DataSpec],
    paths: list[str],
    sets: dict[str, str] | None = None,
    opened: list | None = None,
) -> dict[str, np.ndarray]:
    """Load every declared data variable from ``paths`` (CSV/JSON) and ``sets`` (``--set``).

    ``opened``: files already read (:func:`open_data_file`, or a chunk of a streamed CSV), used
    instead of reading ``paths`` again; ``paths`` then only name them in messages.
    Returns name -> array of exactly the declared shape (0-d for scalars), int64 for "int"
    and float64 for "real".  Raises DataError with a printable message for any problem.
    """
    for s in specs:
        if s.elem not in ("int", "real"):
            raise ValueError(f"DataSpec {s.name}: elem must be 'int' or 'real', not {s.elem!r}")
    by_name = {s.name: s for s in specs}
    set_specs = {name: _check_set(name, text, by_name) for name, text in (sets or {}).items()}
    files = [open_data_file(p) for p in paths] if opened is None else list(opened)

    users: dict[str, list[tuple[DataSpec, int]]] = {}
    for s in specs:
        for axis, d in enumerate(s.dims):
            if isinstance(d, str):
                users.setdefault(d, []).append((s, axis))

    sources: dict[str, list[Source]] = {}
    for s in specs:
        found: list[Source] = []
        for f in files:
            src = f.source_for(s)
            if src is not None:
                found.append(src)
        if s.name in set_specs:
            found.append(SetSource(s, (sets or {})[s.name]))
        sources[s.name] = found

    values: dict[str, np.ndarray] = {}
    for s in specs:
        srcs = sources[s.name]
        first: Source | None = None
        if not srcs:
            inferred = infer_size(s, users[s.name], sources) if s.name in users else None
            if inferred is not None and not s.dims:
                first = inferred
                value = convert(s, inferred, [])
            else:
                dims = resolve_dims(s, values)
                if math.prod(dims) != 0:  # an empty array may be left out, as in CmdStan
                    raise _missing(s, paths, files, users.get(s.name, []))
                value = np.zeros(dims, dtype=np.int64 if s.elem == "int" else np.float64)
        else:
            dims = resolve_dims(s, values)
            arrays = []
            for src in srcs:
                check_shape(s, src, dims)
                arrays.append(convert(s, src, dims))
            first, value = srcs[0], arrays[0]
            for src, other in zip(srcs[1:], arrays[1:], strict=True):
                diff = value != other
                if s.elem == "real":
                    diff &= ~(np.isnan(value) & np.isnan(other))
                if diff.any():
                    idx = first_index(diff)
                    raise DataError(
                        f"{s.name} is given twice with different values: {first.where(idx)} "
                        f"has {number_text(value[idx])} but {src.where(idx)} has "
                        f"{number_text(other[idx])}"
                    )
        if s.name in users and first is not None and value.ndim == 0:
            v = value.item()
            if v < 0 or (isinstance(v, float) and not v.is_integer()):
                user = users[s.name][0][0]
                raise DataError(
                    f"{first.where(())}: {s.name} = {number_text(v)} is the size of "
                    f"{describe(user)}, but sizes must be non-negative integers"
                )
        check_bounds(s, value, first, values)
        _check_constraint(s, value, first)
        values[s.name] = value
    return values
