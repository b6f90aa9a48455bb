"""Static types of the language and the batch-axis conventions that runtime arrays follow.

A runtime value is an array whose trailing `stype.ndim` axes are the value's own and whose
leading axes are batch axes (axis 0: Monte Carlo samples; a vectorised loop adds axis 1).
See docs/conventions.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import autograd.numpy as anp
import numpy as onp

KIND_NDIM = {"scalar": 0, "vector": 1, "row_vector": 1, "matrix": 2}


@dataclass(frozen=True)
class SType:
    base: str  # "int" or "real"
    kind: str = "scalar"  # "scalar", "vector", "row_vector", "matrix"
    adims: int = 0  # number of array dimensions in front

    @property
    def ndim(self) -> int:
        return self.adims + KIND_NDIM[self.kind]

    @property
    def is_scalar(self) -> bool:
        return self.ndim == 0

    @property
    def is_int(self) -> bool:
        return self.base == "int"

    def element(self) -> SType:
        """The type of `x[i]`."""
        if self.adims:
            return SType(self.base, self.kind, self.adims - 1)
        if self.kind == "matrix":
            return SType(self.base, "row_vector")
        if self.kind in ("vector", "row_vector"):
            return SType(self.base, "scalar")
        raise TypeError("a scalar cannot be indexed")

    def with_base(self, base: str) -> SType:
        return SType(base, self.kind, self.adims)

    def __str__(self) -> str:
        inner = self.base if self.kind == "scalar" else self.kind
        if self.kind in ("vector", "row_vector", "matrix") and self.base == "int":
            inner = self.kind
        return "array[" + ",".join("_" * self.adims) + "] " + inner if self.adims else inner


INT = SType("int")
REAL = SType("real")
VECTOR = SType("real", "vector")
ROW_VECTOR = SType("real", "row_vector")
MATRIX = SType("real", "matrix")

SPEC_KIND = {
    "int": "scalar",
    "real": "scalar",
    "vector": "vector",
    "row_vector": "row_vector",
    "matrix": "matrix",
    "simplex": "vector",
    "ordered": "vector",
    "positive_ordered": "vector",
    "unit_vector": "vector",
    "sum_to_zero_vector": "vector",
    "cov_matrix": "matrix",
    "corr_matrix": "matrix",
    "cholesky_factor_cov": "matrix",
    "cholesky_factor_corr": "matrix",
}


def fast_ndim(value) -> int:
    """`np.ndim` without autograd's wrapper: arrays, boxes and numpy scalars carry `.ndim`."""
    try:
        return value.ndim
    except AttributeError:
        return onp.ndim(value)


def fast_shape(value) -> tuple[int, ...]:
    """`np.shape` without autograd's wrapper (see `fast_ndim`)."""
    try:
        return value.shape
    except AttributeError:
        return onp.shape(value)


_NUMBER_TYPES = (int, float, bool)


def to_array(value):
    """Python numbers become 0-d arrays so that shapes can be read uniformly."""
    if value.__class__ in _NUMBER_TYPES or isinstance(value, int | float | bool | onp.number):
        return onp.asarray(value)
    return value


def align(values: list, ndims: list[int], type_ndim: int | None = None) -> list:
    """Reshape values so that numpy's right-aligned broadcasting lines up batch and type axes.

    Batch parts are padded to a common length with size-1 axes inserted after the existing batch
    axes; type parts are padded on their left to `type_ndim` (default: the largest), which is what
    elementwise operations between a scalar and a container need.
    """
    if len(values) == 2 and type_ndim is None:
        # fast path for binary operations: nothing to pad when neither operand has more than one
        # batch axis and both have the same type rank (or one of them has no axes at all)
        a, b = values
        ka, kb = ndims
        na, nb_ = fast_ndim(a), fast_ndim(b)
        if (ka == kb and na <= ka + 1 and nb_ <= kb + 1) or na == 0 or nb_ == 0:
            return [a, b]
    arrs = [to_array(v) for v in values]
    batches = [fast_ndim(a) - k for a, k in zip(arrs, ndims, strict=True)]
    nb = max(batches)
    kt = max(ndims) if type_ndim is None else type_ndim
    out = []
    for a, b, k in zip(arrs, batches, ndims, strict=True):
        if b == nb and k == kt:
            out.append(a)
            continue
        shape = fast_shape(a)
        new_shape = shape[:b] + (1,) * (nb - b) + (1,) * (kt - k) + shape[b:]
        out.append(anp.reshape(a, new_shape))
    return out


def align_batch(values: list, ndims: list[int]) -> list:
    """Pad batch parts only (for operations such as matmul that keep their own type axes)."""
    arrs = [to_array(v) for v in values]
    batches = [fast_ndim(a) - k for a, k in zip(arrs, ndims, strict=True)]
    nb = max(batches)
    out = []
    for a, b in zip(arrs, batches, strict=True):
        if b == nb:
            out.append(a)
        else:
            shape = fast_shape(a)
            out.append(anp.reshape(a, shape[:b] + (1,) * (nb - b) + shape[b:]))
    return out


def sum_to_batch0(value) -> object:
    """Sum every axis but the sample axis: a log density of batch shape (S, ...) becomes (S,)."""
    nd = fast_ndim(value)
    if nd == 0:
        return value
    if nd == 1:
        return value
    return anp.sum(value, axis=tuple(range(1, nd)))
