"""A Stan-format JSON data file parsed (an object of name -> number or nested lists), and one
entry turned into an array with a message naming the element if it is not a number."""

from __future__ import annotations

import json

import numpy as np

from ppl.data.declaration import INT64_MAX, DataSpec
from ppl.data.messages import cell_text, index_text, shape_text
from ppl.data.sources import ArraySource, Source
from ppl.errors import DataError


class JsonFile:
    """A parsed Stan-format JSON data file (an object of name -> number / nested lists)."""

    kind = "json"

    def __init__(self, path: str, text: str) -> None:
        self.path = path

        def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
            out: dict[str, object] = {}
            for k, v in items:
                if k in out:
                    raise DataError(f'{path}: key "{k}" appears twice')
                out[k] = v
            return out

        try:
            obj = json.loads(text, object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{path}: line {e.lineno}, column {e.colno}: malformed JSON: {e.msg}"
            ) from None
        except RecursionError:
            raise DataError(f"{path}: the JSON is nested too deeply") from None
        except ValueError as e:  # e.g. integers with more digits than Python allows
            raise DataError(f"{path}: malformed JSON: {e}") from None
        if not isinstance(obj, dict):
            raise DataError(
                f"{path}: the top level must be a JSON object mapping variable names to values, "
                f"not {_json_kind(obj)}"
            )
        self.obj = obj
        # numpy silently turns true/false into 1/0, so only trust it when no booleans are present
        self.fast_ok = "true" not in text and "false" not in text

    def source_for(self, spec: DataSpec) -> Source | None:
        if spec.name not in self.obj:
            return None
        value = json_array(self.path, spec.name, self.obj[spec.name], self.fast_ok)
        return ArraySource(self.path, spec.name, value)


def _json_kind(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the string {cell_text(v)}"
    if isinstance(v, dict):
        return "an object"
    if isinstance(v, list):
        return "a list"
    return "a number"


_JSON_SPECIALS = {"inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"}


def json_array(path: str, name: str, value: object, fast_ok: bool) -> np.ndarray:
    """Convert one JSON entry to an int64/float64 array, with a precise message if it is bad."""
    if fast_ok:
        try:
            a = np.asarray(value)
        except (ValueError, OverflowError, TypeError):
            a = None
        if a is not None and a.dtype.kind in "if":
            return a.astype(np.int64 if a.dtype.kind == "i" else np.float64)

    def shape_of(v: object, index: tuple[int, ...]) -> tuple[int, ...]:
        if isinstance(v, list):
            if not v:
                return (0,)
            shapes = [shape_of(x, (*index, i)) for i, x in enumerate(v)]
            for i, s in enumerate(shapes):
                if s != shapes[0]:
                    raise DataError(
                        f"{path}: {name} is a ragged nested list: "
                        f"{index_text(name, (*index, i))} is {desc(s)} but "
                        f"{index_text(name, (*index, 0))} is {desc(shapes[0])}"
                    )
            return (len(v), *shapes[0])
        ok = (isinstance(v, (int, float)) and not isinstance(v, bool)) or (
            isinstance(v, str) and v.strip().lower() in _JSON_SPECIALS
        )
        if not ok:
            hint = " (missing values are not allowed)" if v is None else ""
            if isinstance(v, str):
                hint = ' (the only strings allowed are "inf", "-inf" and "NaN")'
            raise DataError(
                f"{path}: {index_text(name, index)}: {_json_kind(v)} is not a number{hint}"
            )
        return ()

    def desc(sh: tuple[int, ...]) -> str:
        return "a number" if not sh else f"a list of {shape_text(sh)}"

    def flatten(v: object) -> list[object]:
        if isinstance(v, list):
            return [y for x in v for y in flatten(x)]
        return [v]

    try:
        shape = shape_of(value, ())
    except RecursionError:
        raise DataError(f"{path}: {name} is nested too deeply") from None
    if len(shape) > 32:
        raise DataError(f"{path}: {name} has {len(shape)} dimensions, too many")
    flat = flatten(value)
    if all(isinstance(x, int) and -INT64_MAX <= x < INT64_MAX for x in flat):
        return np.array(flat, dtype=np.int64).reshape(shape)
    out = np.empty(len(flat), dtype=np.float64)
    for i, x in enumerate(flat):
        try:
            out[i] = float(x)  # type: ignore[arg-type]
        except OverflowError:
            idx = np.unravel_index(i, shape) if shape else ()
            raise DataError(
                f"{path}: {index_text(name, tuple(int(j) for j in idx))}: the number is too large"
            ) from None
    return out.reshape(shape)
