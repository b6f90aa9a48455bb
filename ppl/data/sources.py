"""Sources: where one variable's value was found (CSV columns, a JSON entry or a Python value,
``--set``, or a size inferred from the arrays using it), with its shape, its numbers and how to
name one of its elements in a message."""

from __future__ import annotations

import re

import numpy as np

from ppl.data.declaration import INT64_MAX, DataSpec
from ppl.data.messages import cell_text, index_text
from ppl.errors import DataError


def parse_float(text: str) -> float | None:
    """The number float() reads in ``text``, or None: a cell's value without an exception."""
    try:
        return float(text)
    except ValueError:
        return None


#: a number as Stan writes one (ASCII digits; no `1_0`, no other scripts' digits, which Python's
#: int() and float() accept), or inf / nan as CmdStan's data reader takes them
STAN_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
    re.IGNORECASE,
)


class Source:
    """Where a value came from: its shape, its raw numbers, and how to name one element."""

    label: str
    name: str

    @property
    def shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    def raw(self, want_int: bool) -> np.ndarray:
        raise NotImplementedError

    def where(self, index: tuple[int, ...]) -> str:
        raise NotImplementedError

    def length_text(self, axis: int, n: int) -> str:
        if axis == 0:
            return f"length {n} in {self.label}"
        return f"size {n} in dimension {axis + 1} in {self.label}"


class ArraySource(Source):
    """A value already an array: a JSON entry or a value given from Python."""

    def __init__(self, path: str, name: str, value: np.ndarray) -> None:
        self.label, self.name, self.value = path, name, value

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape

    def raw(self, want_int: bool) -> np.ndarray:
        return self.value

    def where(self, index: tuple[int, ...]) -> str:
        return f"{self.label}: {index_text(self.name, index)}"


class ScalarSource(Source):
    """A single value held as it was read (`value`): a --set option or an inferred size."""

    @property
    def shape(self) -> tuple[int, ...]:
        return ()

    def raw(self, want_int: bool) -> np.ndarray:
        return self.value


class SetSource(ScalarSource):
    """A scalar given on the command line (``--set name=value``), parsed as its type asks."""

    def __init__(self, spec: DataSpec, text: str) -> None:
        self.label, self.name, self.text = "--set", spec.name, text
        stripped = text.strip()
        value: int | float | None = None
        if stripped and not STAN_NUMBER.fullmatch(stripped):
            raise DataError(
                f"--set {spec.name}={text}: {cell_text(stripped)} is not a number as Stan writes "
                "one (digits 0-9, a decimal point, an exponent such as 1e3)"
            )
        if spec.elem == "int":
            try:
                value = int(stripped)
            except ValueError:
                value = None
            if value is not None and not -INT64_MAX <= value < INT64_MAX:
                value = float(value)
        if value is None:
            value = parse_float(stripped)
        if value is None:
            what = "missing value" if not stripped else f"{cell_text(stripped)} is not a number"
            raise DataError(f"--set {spec.name}={text}: {what}")
        self.value = np.asarray(value)

    def where(self, index: tuple[int, ...]) -> str:
        return f"--set {self.name}={self.text}"


class InferredSource(ScalarSource):
    """A size variable not given, inferred from the length of an array that uses it."""

    def __init__(self, name: str, n: int, origin: str) -> None:
        self.label, self.name, self.origin = "inferred", name, origin
        self.value = np.asarray(n, dtype=np.int64)

    def where(self, index: tuple[int, ...]) -> str:
        return f"{self.name} = {int(self.value)} (inferred from {self.origin})"
