"""Stan's constraining transforms (Reference Manual, "Constraint transforms"), vectorised.

ADVI optimises over an unconstrained vector; each declared parameter is read from a slice of it
and pushed through the transform its declaration implies.  ``forward`` returns the constrained
value together with log|det J| summed over the parameter's own (type) axes, so the caller can add
it straight onto the log density (which has the batch shape).  Everything on the forward path uses
``autograd.numpy`` so gradients flow to ``u`` *and* to bounds that depend on other parameters.
``inverse`` is plain numpy: it only serves initial values and tests.

Layout follows docs/conventions.md: batch axes first (axis 0 = Monte Carlo samples), type axes
last.  Bounds arrive already aligned with ``x`` under numpy's right-aligned broadcasting.

The transforms themselves are in transform_base (Identity), bound_transforms (bounds, offset and
multiplier), vector_transforms and matrix_transforms; this module builds the one a declaration
implies.
"""

from __future__ import annotations

import numpy as np
from autograd.tracer import getval

from ppl.errors import ModelError
from ppl.language import ast
from ppl.library.bound_transforms import LowerBound, LowerUpperBound, OffsetMultiplier, UpperBound
from ppl.library.matrix_transforms import (
    CholeskyFactorCorr,
    CholeskyFactorCov,
    CorrMatrix,
    CovMatrix,
)
from ppl.library.transform_base import Array, Identity, Transform, plain_value
from ppl.library.vector_transforms import Ordered, PositiveOrdered, Simplex, SumToZero, UnitVector

__all__ = [
    "TRANSFORM_KINDS",
    "Transform",
    "Identity",
    "LowerBound",
    "UpperBound",
    "LowerUpperBound",
    "OffsetMultiplier",
    "Simplex",
    "Ordered",
    "PositiveOrdered",
    "UnitVector",
    "SumToZero",
    "CholeskyFactorCorr",
    "CholeskyFactorCov",
    "CovMatrix",
    "CorrMatrix",
    "make_transform",
]


TRANSFORM_KINDS = (
    "identity",
    "lower",
    "upper",
    "lower_upper",
    "offset_multiplier",
    "simplex",
    "ordered",
    "positive_ordered",
    "unit_vector",
    "sum_to_zero_vector",
    "cholesky_factor_corr",
    "cholesky_factor_cov",
    "cov_matrix",
    "corr_matrix",
)

_SIMPLE = {
    "simplex": Simplex,
    "ordered": Ordered,
    "positive_ordered": PositiveOrdered,
    "unit_vector": UnitVector,
    "sum_to_zero_vector": SumToZero,
    "cholesky_factor_corr": CholeskyFactorCorr,
    "cov_matrix": CovMatrix,
    "corr_matrix": CorrMatrix,
}


def _is_const(b: Array) -> bool:
    """True for plain floats / arrays, False for values traced by autograd."""
    return getval(b) is b


def _all_equal(b: Array, value: float) -> bool:
    v = plain_value(b)
    return bool(np.all(v == value))


def make_transform(
    kind: str,
    *,
    lower: Array | None = None,
    upper: Array | None = None,
    offset: Array | None = None,
    multiplier: Array | None = None,
    shape: tuple[int, int] | None = None,
    check: bool = True,
) -> Transform:
    """Build the transform for a declaration; bounds may be floats, arrays or autograd boxes.

    For "identity", "lower", "upper" and "lower_upper" the class is chosen from the bounds that
    are actually present and finite (a bound of -inf/+inf everywhere is dropped), so e.g.
    ``make_transform("lower_upper", lower=-inf, upper=1.0)`` is an :class:`UpperBound`.
    Constant bounds are checked here (lower < upper, multiplier > 0) unless ``check=False``;
    traced (autograd-boxed) bounds never are, since a bad draw must not abort the optimiser.
    ``shape=(M, N)`` is only for non-square ``cholesky_factor_cov``.
    """
    if kind not in TRANSFORM_KINDS:
        raise ModelError(f"unknown constraint transform {kind!r}")
    if kind in ("identity", "lower", "upper", "lower_upper"):
        if offset is not None or multiplier is not None:
            raise ModelError("offset/multiplier cannot be combined with lower/upper bounds")
        if lower is not None and _all_equal(lower, np.inf):
            raise ModelError("lower bound cannot be +inf")
        if upper is not None and _all_equal(upper, -np.inf):
            raise ModelError("upper bound cannot be -inf")
        if lower is not None and _all_equal(lower, -np.inf):
            lower = None
        if upper is not None and _all_equal(upper, np.inf):
            upper = None
        if lower is not None and upper is not None:
            lo, hi = plain_value(lower), plain_value(upper)
            if check and _is_const(lower) and _is_const(upper) and np.any(lo >= hi):
                raise ModelError(
                    f"lower bound must be less than upper bound, got lower={lo}, upper={hi}"
                )
            return LowerUpperBound(lower, upper)
        if lower is not None:
            return LowerBound(lower)
        if upper is not None:
            return UpperBound(upper)
        return Identity()
    if lower is not None or upper is not None:
        raise ModelError(f"{kind} does not take lower/upper bounds")
    if kind == "offset_multiplier":
        if offset is None and multiplier is None:
            return Identity()
        offset = 0.0 if offset is None else offset
        multiplier = 1.0 if multiplier is None else multiplier
        if check and _is_const(offset) and not np.all(np.isfinite(plain_value(offset))):
            raise ModelError(f"offset must be finite, got {plain_value(offset)}")
        m = plain_value(multiplier)
        if check and _is_const(multiplier) and not np.all(np.isfinite(m) & (m > 0)):
            raise ModelError(f"multiplier must be positive and finite, got {m}")
        return OffsetMultiplier(offset, multiplier)
    if offset is not None or multiplier is not None:
        raise ModelError(f"{kind} does not take offset/multiplier")
    if kind == "cholesky_factor_cov":
        return CholeskyFactorCov(shape)
    return _SIMPLE[kind]()


def transform_kind(spec: ast.TypeSpec) -> str:
    """The constraining transform a declaration implies: make_transform's kind."""
    if spec.kind in ("int", "real", "vector", "row_vector", "matrix"):
        b = spec.bounds
        if "offset" in b or "multiplier" in b:
            return "offset_multiplier"
        if "lower" in b and "upper" in b:
            return "lower_upper"
        if "lower" in b:
            return "lower"
        if "upper" in b:
            return "upper"
        return "identity"
    return spec.kind
