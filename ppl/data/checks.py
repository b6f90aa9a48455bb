"""The checks a variable's value goes through once found: its sizes evaluated, the source's shape
against them, int elements integral, bounds respected; and a size variable inferred from the
arrays using it."""

from __future__ import annotations

import itertools

import numpy as np

from ppl.data.csv_text import CsvSource
from ppl.data.declaration import INT64_MAX, DataSpec, declared_type, describe, dim_text
from ppl.data.messages import first_index, number_text, shape_text
from ppl.data.sources import InferredSource, Source
from ppl.errors import DataError, PplError
from ppl.limits import elements, over_budget


def resolve_dims(spec: DataSpec, values: dict[str, np.ndarray]) -> list[int]:
    """Evaluate every dim of ``spec``; sizes must be non-negative integers."""
    dims: list[int] = []
    for axis, d in enumerate(spec.dims):
        label = f"size {axis + 1}"
        if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
            n: object = int(d)
        elif isinstance(d, str):
            if d not in values:
                raise DataError(
                    f"{describe(spec)}: its size {d} is not a data variable declared before it"
                )
            n = values[d]
            label = d
        else:
            try:
                n = d(values)
            except PplError:
                raise
            except Exception as e:  # noqa: BLE001 - the compiler's expression, user's values
                raise DataError(f"{describe(spec)}: cannot evaluate {label}: {e}") from None
        a = np.asarray(n)
        ok = a.shape == () and a.dtype.kind in "iuf" and bool(np.isfinite(a))
        if ok and a.dtype.kind == "f":
            ok = float(a).is_integer()
        if not ok or int(a) < 0:
            scalar = a.shape == () and a.dtype.kind in "iufb"
            shown = number_text(a.item()) if scalar else str(a.shape)
            raise DataError(
                f"{describe(spec)}: {label} = {shown}, but sizes must be non-negative integers"
            )
        dims.append(int(a))
    if spec.constraint in ("simplex", "unit_vector") and dims and dims[-1] < 1:
        raise DataError(f"{describe(spec)}: a {spec.constraint} needs at least 1 element, got 0")
    over = over_budget(f"{describe(spec)}: size {dims}", elements(dims))
    if over:
        raise DataError(over)
    return dims


def _named_dims(spec: DataSpec, dims: list[int]) -> str:
    """`` (D = 5)``: the values of the named column dims (the row dim is obvious)."""
    pairs = zip(spec.dims[1:], dims[1:], strict=True)
    named = [f"{d} = {n}" for d, n in pairs if isinstance(d, str)]
    return f" ({', '.join(dict.fromkeys(named))})" if named else ""


def check_shape(spec: DataSpec, src: Source, dims: list[int]) -> None:
    """Raise a DataError describing the first way ``src`` does not fit the declared ``dims``."""
    shape = src.shape
    if isinstance(src, CsvSource):
        if shape[0] != dims[0]:
            raise DataError(
                f"{spec.name} has {shape[0]} rows in {src.label} but {_want_text(spec, 0, dims[0])}"
            )
        _check_csv_columns(spec, src, dims)
        return
    if len(shape) != len(dims):
        # Stan writes an empty array as [] whatever its declared depth
        if len(shape) < len(dims) and 0 in shape and tuple(dims[: len(shape)]) == shape:
            return
        given = "a single number" if not shape else f"a list of {shape_text(shape)}"
        if not dims:
            need = "a single number"
        else:
            need = f"{len(dims)} dimension{'s' if len(dims) != 1 else ''}"
        raise DataError(f"{src.label}: {describe(spec)} needs {need}, but the file gives {given}")
    for axis, (have, want) in enumerate(zip(shape, dims, strict=True)):
        if have != want:
            raise DataError(
                f"{spec.name} has {src.length_text(axis, have)} but {_want_text(spec, axis, want)}"
            )


def _want_text(spec: DataSpec, axis: int, want: int) -> str:
    d = spec.dims[axis]
    if isinstance(d, str):
        return f"{d} = {want}"
    return f"its declaration {declared_type(spec)} needs {want}"


def _check_csv_columns(spec: DataSpec, src: CsvSource, dims: list[int]) -> None:
    """A k-D variable needs exactly the columns name.1.1 ... name.A.B (after the row dim)."""
    trailing = dims[1:]
    if not trailing:
        return

    def col(t: tuple[int, ...]) -> str:
        return spec.name + "".join(f".{i}" for i in t)

    wanted = itertools.product(*(range(1, m + 1) for m in trailing))
    missing = [t for t in wanted if t not in src.cols]
    extra = [t for t in src.cols if any(i > m for i, m in zip(t, trailing, strict=True))]
    if not missing and not extra:
        return
    kind = declared_type(spec).split("[")[0].split("<")[0].strip() + " " if spec.decl else ""
    dims_text = ", ".join(dim_text(d) for d in spec.dims)
    if 0 in trailing:
        need = "no columns"
    else:
        need = f"columns {col((1,) * len(trailing))} ... {col(tuple(trailing))}"
    head = f"{src.label}: {kind}{spec.name}[{dims_text}]{_named_dims(spec, dims)} needs {need}"
    if missing:
        shown = ", ".join(col(t) for t in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise DataError(f"{head}; missing {shown}")
    extra.sort()
    shown = ", ".join(f'"{src.file.header[src.cols[t]]}"' for t in extra[:5])
    raise DataError(f"{head}; the file also has {shown}" + (", ..." if len(extra) > 5 else ""))


def convert(spec: DataSpec, src: Source, dims: list[int]) -> np.ndarray:
    """The value of ``src`` as an exact-shape int64/float64 array; int elements must be integral."""
    want_int = spec.elem == "int"
    a = src.raw(want_int)
    if a.shape != tuple(dims):
        a = a.reshape(dims)  # only the zero-size case reaches here
    if not want_int:
        return a.astype(np.float64)
    if a.dtype.kind == "i":
        return a.astype(np.int64)
    integral = np.isfinite(a) & (a == np.trunc(a))
    fits = integral & (np.abs(a) < INT64_MAX)
    if not fits.all():
        idx = first_index(~fits)
        v = a[idx]
        problem = "is too large" if integral[idx] else "is not an integer"
        raise DataError(
            f"{src.where(idx)}: {number_text(v)} for int variable '{spec.name}' {problem}"
        )
    return a.astype(np.int64)


def check_bounds(
    spec: DataSpec, value: np.ndarray, src: Source | None, values: dict[str, np.ndarray]
) -> None:
    for which, bound in (("lower", spec.lower), ("upper", spec.upper)):
        if bound is None or value.size == 0 or src is None:
            continue
        if callable(bound):
            try:
                bound = bound(values)
            except PplError:
                raise
            except Exception as e:  # noqa: BLE001 - the compiler's expression, user's values
                raise DataError(
                    f"{describe(spec)}: cannot evaluate its {which} bound: {e}"
                ) from None
        try:
            b = np.asarray(bound, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(f"{describe(spec)}: its {which} bound is not a number") from None
        if b.ndim == value.ndim + 1 and b.shape[:1] == (1,):
            b = b[0]  # a bound carrying the data batch axis of size 1
        try:
            b = np.broadcast_to(b, value.shape)
        except ValueError:
            raise DataError(
                f"{describe(spec)}: its {which} bound has shape {b.shape}, "
                f"which does not fit the value's shape {value.shape}"
            ) from None
        bad = value < b if which == "lower" else value > b
        if bad.any():
            idx = first_index(bad)
            side = "below" if which == "lower" else "above"
            raise DataError(
                f"{src.where(idx)}: value {number_text(value[idx])} is {side} the declared "
                f"{which} bound {number_text(b[idx])} of {spec.name}"
            )


def infer_size(
    spec: DataSpec,
    users: list[tuple[DataSpec, int]],
    sources: dict[str, list[Source]],
) -> InferredSource | None:
    """Infer a size variable from the lengths of the arrays that use it; they must agree."""
    found: list[tuple[str, Source, int, int]] = []
    for user, axis in users:
        for src in sources[user.name]:
            if axis < len(src.shape):
                found.append((user.name, src, axis, src.shape[axis]))
    if not found:
        return None
    name0, src0, axis0, n0 = found[0]
    for name, src, axis, n in found[1:]:
        if n != n0:
            raise DataError(
                f"cannot infer {describe(spec)}: {name0} has {src0.length_text(axis0, n0)} "
                f"but {name} has {src.length_text(axis, n)}"
            )
    return InferredSource(spec.name, n0, f"{name0} in {src0.label}")
