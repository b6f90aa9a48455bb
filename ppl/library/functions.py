"""The standard library of functions: a type rule and an autograd implementation for each.

Implementations receive runtime arrays laid out as in docs/conventions.md (batch axes first) and the
static types of their arguments, so reductions and matrix algebra act on the type axes only.
"""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp

from ppl.language.types import (
    INT,
    MATRIX,
    REAL,
    ROW_VECTOR,
    VECTOR,
    SType,
    align,
    align_batch,
    fast_ndim,
    fast_shape,
    to_array,
)
from ppl.library import functions_extra as _extra  # noqa: F401  (registers its functions)
from ppl.library import functions_linalg as _linalg  # noqa: F401  (registers the matrix functions)
from ppl.library import special as sps
from ppl.library.cholesky_ops import cholesky
from ppl.library.distributions.base import rows_times, unbatched, where, xlogy
from ppl.library.function_registry import (
    LIBRARY,
    Function,
    SignatureError,
    elementwise_rule,
    fixed,
    int_value,
    real_of,
    register,
    type_axes,
)
from ppl.library.gp_kernels import add_to_diagonal, exp_quad
from ppl.limits import INT_RANGE

# ---- type rules ----------------------------------------------------------------------------------


def _unary_real_rule(types):
    return real_of(types[0])


def _reduce_rule(types):
    """sum/prod/max/min of a container: a scalar of the container's element base type."""
    return INT if types[0].is_int else REAL


# ---- helpers -------------------------------------------------------------------------------------


def _elementwise(fn):
    def impl(args, types):
        return fn(*align(list(args), [t.ndim for t in types]))

    return impl


# ---- elementwise maths ---------------------------------------------------------------------------


def _log1m_exp(x):
    # log(1 - exp(x)) for x < 0, stable on both sides of log(1/2)
    return where(
        x > -0.693147,
        np.log(-np.expm1(np.minimum(x, -1e-300))),
        np.log1p(-np.exp(np.minimum(x, 0.0))),
    )


def _softplus(x):
    return np.logaddexp(0.0, x)


_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "cbrt": lambda x: np.sign(x) * np.abs(x) ** (1.0 / 3.0),  # np.cbrt has no VJP
    "square": np.square,
    "inv": lambda x: 1.0 / x,
    "inv_sqrt": lambda x: 1.0 / np.sqrt(x),
    "inv_square": lambda x: 1.0 / np.square(x),
    "log2": np.log2,
    "log10": np.log10,
    "exp2": np.exp2,
    "log1m": lambda x: np.log1p(-x),
    "inv_logit": sps.expit,
    "logit": sps.logit,
    "log_inv_logit": lambda x: -_softplus(-x),
    "log1m_inv_logit": lambda x: -_softplus(x),
    "log1m_exp": _log1m_exp,
    "log1p_exp": _softplus,
    "softplus": _softplus,
    "lgamma": sps.gammaln,
    "digamma": sps.digamma,
    "tgamma": sps.gamma,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": sps.erf,
    "erfc": sps.erfc,
    "Phi": lambda x: 0.5 * sps.erfc(-x / np.sqrt(2.0)),
    "Phi_approx": lambda x: sps.expit(0.07056 * x**3 + 1.5976 * x),
    "inv_Phi": lambda x: -np.sqrt(2.0) * sps.erfcinv(2.0 * x),
    "trigamma": lambda x: sps.polygamma(1, x),
    "fabs": np.abs,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "trunc": np.trunc,
    "inv_cloglog": lambda x: -np.expm1(-np.exp(x)),
}

for _name, _fn in _UNARY.items():
    register(_name, _unary_real_rule, (lambda fn: lambda args, types: fn(args[0]))(_fn), nargs=(1,))


def _abs_rule(types):
    return types[0]


register("abs", _abs_rule, lambda args, types: np.abs(args[0]), nargs=(1,))

_BINARY = {
    "pow": np.power,
    "fmin": np.minimum,
    "fmax": np.maximum,
    "fdim": lambda a, b: np.maximum(a - b, 0.0),
    "hypot": lambda a, b: np.sqrt(a * a + b * b),
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "log_diff_exp": lambda a, b: a + _log1m_exp(b - a),
    "lbeta": lambda a, b: sps.gammaln(a) + sps.gammaln(b) - sps.gammaln(a + b),
    "lchoose": lambda n, k: sps.gammaln(n + 1) - sps.gammaln(k + 1) - sps.gammaln(n - k + 1),
    "binomial_coefficient_log": lambda n, k: (
        sps.gammaln(n + 1) - sps.gammaln(k + 1) - sps.gammaln(n - k + 1)
    ),
    "log_inv_logit_diff": lambda a, b: np.log(sps.expit(a) - sps.expit(b)),
    "multiply_log": xlogy,
    "lmultiply": xlogy,
}
for _name, _fn in _BINARY.items():
    register(_name, elementwise_rule, _elementwise(_fn), nargs=(2,))


def _fma(args, types):
    a, b, c = align(list(args), [t.ndim for t in types])
    return a * b + c


register("fma", elementwise_rule, _fma, nargs=(3,))


def _log_mix(args, types):
    theta, lp1, lp2 = align(list(args), [t.ndim for t in types])
    return np.logaddexp(np.log(theta) + lp1, np.log1p(-theta) + lp2)


register("log_mix", elementwise_rule, _log_mix, nargs=(3,))


def _step_impl(args, types):
    return np.where(args[0] < 0, 0, 1)


register("step", lambda t: REAL, _step_impl, nargs=(1,))
register("int_step", lambda t: INT, lambda args, types: np.where(args[0] > 0, 1, 0), nargs=(1,))
register("is_inf", lambda t: INT, lambda args, types: np.isinf(args[0]).astype(int), nargs=(1,))
register("is_nan", lambda t: INT, lambda args, types: np.isnan(args[0]).astype(int), nargs=(1,))

# ---- constants -----------------------------------------------------------------------------------
_CONSTANTS = {
    "pi": onp.pi,
    "e": onp.e,
    "sqrt2": onp.sqrt(2.0),
    "log2": onp.log(2.0),
    "log10": onp.log(10.0),
    "not_a_number": onp.nan,
    "positive_infinity": onp.inf,
    "negative_infinity": -onp.inf,
    "machine_precision": onp.finfo(float).eps,
}
CONSTANTS = _CONSTANTS


# ---- reductions ----------------------------------------------------------------------------------


def _reduce(fn):
    def impl(args, types):
        t = types[0]
        if t.is_scalar:
            return args[0]
        return fn(args[0], axis=type_axes(t))

    return impl


def _log_sum_exp_impl(args, types):
    if len(args) == 2:
        a, b = align(list(args), [t.ndim for t in types])
        return np.logaddexp(a, b)
    t = types[0]
    if t.is_scalar:
        return args[0]
    return sps.logsumexp(args[0], axis=type_axes(t))


def _lse_rule(types):
    if len(types) == 2:
        return elementwise_rule(types)
    return REAL


def _variance(x, axis):
    n = 1
    for ax in axis:
        n *= fast_shape(x)[ax]
    m = np.mean(x, axis=axis, keepdims=True)
    return np.sum((x - m) ** 2, axis=axis) / (n - 1)


register("sum", _reduce_rule, _reduce(np.sum), nargs=(1,))
register("prod", _reduce_rule, _reduce(np.prod), nargs=(1,))
register("mean", lambda t: REAL, _reduce(np.mean), nargs=(1,))
register("variance", lambda t: REAL, _reduce(_variance), nargs=(1,))
register("sd", lambda t: REAL, _reduce(lambda x, axis: np.sqrt(_variance(x, axis))), nargs=(1,))
register("log_sum_exp", _lse_rule, _log_sum_exp_impl, nargs=(1, 2))


def _minmax(reduce_fn, pair_fn):
    def impl(args, types):
        if len(args) == 2:
            a, b = align(list(args), [t.ndim for t in types])
            return pair_fn(a, b)
        return _reduce(reduce_fn)(args, types)

    return impl


def _minmax_rule(types):
    if len(types) == 2:
        r = elementwise_rule(types)
        return INT if all(t.is_int for t in types) else r
    return _reduce_rule(types)


register("max", _minmax_rule, _minmax(np.max, np.maximum), nargs=(1, 2))
register("min", _minmax_rule, _minmax(np.min, np.minimum), nargs=(1, 2))


def _norm2(args, types):
    return np.sqrt(np.sum(args[0] ** 2, axis=type_axes(types[0])))


register("norm2", lambda t: REAL, _norm2, nargs=(1,))
register(
    "dot_self",
    lambda t: REAL,
    lambda args, types: np.sum(args[0] ** 2, axis=type_axes(types[0])),
    nargs=(1,),
)


# ---- sizes ---------------------------------------------------------------------------------------


def _shape_of(x, t: SType) -> tuple[int, ...]:
    shape = fast_shape(x)
    return shape[len(shape) - t.ndim :] if t.ndim else ()


def _size(args, types):
    shape = _shape_of(args[0], types[0])
    return int(shape[0]) if shape else 1


def _num_elements(args, types):
    return int(onp.prod(_shape_of(args[0], types[0]), dtype=int))


def _rows(args, types):
    t = types[0]
    shape = _shape_of(args[0], t)
    if t.kind == "row_vector" and not t.adims:
        return 1
    return int(shape[0])


def _cols(args, types):
    t = types[0]
    shape = _shape_of(args[0], t)
    if t.kind == "vector" and not t.adims:
        return 1
    return int(shape[-1])


register("size", fixed(INT), _size, nargs=(1,))
register("num_elements", fixed(INT), _num_elements, nargs=(1,))
register("rows", fixed(INT), _rows, nargs=(1,))
register("cols", fixed(INT), _cols, nargs=(1,))


# ---- constructors --------------------------------------------------------------------------------


def _rep(kind):
    def impl(args, types):
        x = to_array(args[0])
        sizes = tuple(int_value(s) for s in args[1:])
        t = types[0]
        if kind == "matrix" and not t.is_scalar:  # rep_matrix(v, n): copies of a (row) vector
            n = sizes[0]
            if t.kind == "vector":
                return np.repeat(x[..., :, None], n, axis=-1)
            return np.repeat(x[..., None, :], n, axis=-2)
        if kind == "array":
            # array of copies of x (any type): new axes in front of x's type axes
            b = fast_ndim(x) - t.ndim
            shape = fast_shape(x)
            y = np.reshape(x, shape[:b] + (1,) * len(sizes) + shape[b:])
            return y * np.ones(shape[:b] + sizes + shape[b:])
        return np.reshape(x, fast_shape(x) + (1,) * len(sizes)) * np.ones(sizes)

    return impl


def _rep_matrix_rule(types):
    if len(types) == 2 and types[0].kind not in ("vector", "row_vector"):
        raise SignatureError("rep_matrix(x, m, n) takes a scalar; rep_matrix(v, n) a vector")
    return MATRIX


def _rep_array_rule(types):
    t = types[0]
    return SType(t.base, t.kind, t.adims + len(types) - 1)


register("rep_vector", fixed(VECTOR), _rep("vector"), size_args=(1,), nargs=(2,))
register("rep_row_vector", fixed(ROW_VECTOR), _rep("row_vector"), size_args=(1,), nargs=(2,))
register("rep_matrix", _rep_matrix_rule, _rep("matrix"), size_args=(1, 2), nargs=(2, 3))
register("rep_array", _rep_array_rule, _rep("array"), size_args=(1, 2, 3), nargs=(2, 3, 4))


def _diag_matrix(args, types):
    v = args[0]
    n = fast_shape(v)[-1]
    return v[..., :, None] * onp.eye(n)


def _identity_matrix(args, types):
    return onp.eye(int_value(args[0]))


def _diagonal(args, types):
    m = args[0]
    n = min(fast_shape(m)[-2:])
    idx = onp.arange(n)
    return m[..., idx, idx]


register("diag_matrix", fixed(MATRIX), _diag_matrix, nargs=(1,))
register("identity_matrix", fixed(MATRIX), _identity_matrix, size_args=(0,), nargs=(1,))
register("diagonal", fixed(VECTOR), _diagonal, nargs=(1,))


def _to_vector(args, types):
    x, t = args[0], types[0]
    b = fast_ndim(x) - t.ndim
    shape = fast_shape(x)
    if t.kind == "matrix" and not t.adims:  # column-major as in Stan
        x = np.swapaxes(x, -1, -2)
    return np.reshape(x, shape[:b] + (-1,)) if t.ndim != 1 else x


register("to_vector", lambda t: VECTOR, _to_vector, nargs=(1,))
register("to_row_vector", lambda t: ROW_VECTOR, _to_vector, nargs=(1,))
register("to_array_1d", lambda t: SType(t[0].base, "scalar", 1), _to_vector, nargs=(1,))


def _to_matrix(args, types):
    x, t = args[0], types[0]
    if len(args) == 1:
        if t.adims == 1 and t.kind in ("vector", "row_vector"):
            return x  # an array of N vectors of size D: the N x D matrix of those rows
        if t.adims == 2 and t.kind == "scalar":
            return x  # array[N, D] real
        if t.kind == "vector":
            return x[..., :, None]
        if t.kind == "row_vector":
            return x[..., None, :]
        return x
    m, n = int_value(args[1]), int_value(args[2])
    flat = _to_vector([x], [t])
    b = fast_ndim(flat) - 1
    # column-major fill, as in Stan
    return np.swapaxes(np.reshape(flat, fast_shape(flat)[:b] + (n, m)), -1, -2)


register("to_matrix", lambda t: MATRIX, _to_matrix, size_args=(1, 2), nargs=(1, 3))


def _to_int(args, types):
    x = args[0]
    values = onp.asarray(getattr(x, "_value", x), dtype=float)
    inside = (values >= INT_RANGE[0]) & (values <= INT_RANGE[1])  # NaN is outside too
    if not inside.all():
        raise ValueError(f"{values[~inside].ravel()[0]:g} is outside Stan's int range {INT_RANGE}")
    return np.trunc(x).astype(int) if hasattr(x, "astype") else int(x)


register("to_int", lambda t: t[0].with_base("int"), _to_int, nargs=(1,))


def _cumulative_sum(args, types):
    return np.cumsum(args[0], axis=-1)


register("cumulative_sum", lambda t: t[0], _cumulative_sum, nargs=(1,))


def _check_range(what: str, lo: int, hi: int, n: int) -> None:
    """1-based inclusive range lo..hi must lie within 1..n (an empty range is fine)."""
    if hi >= lo and (lo < 1 or hi > n):
        raise SignatureError(f"{what} out of range 1..{n}")


def _col(args, types):
    j = int_value(args[1])
    _check_range(f"column {j}", j, j, fast_shape(args[0])[-1])
    return args[0][..., :, j - 1]


def _row(args, types):
    i = int_value(args[1])
    _check_range(f"row {i}", i, i, fast_shape(args[0])[-2])
    return args[0][..., i - 1, :]


register("col", fixed(VECTOR), _col, nargs=(2,))
register("row", fixed(ROW_VECTOR), _row, nargs=(2,))


def _head(args, types):
    n = int_value(args[1])
    _check_range(f"head of length {n}", 1, n, _size([args[0]], [types[0]]))
    return args[0][..., :n] if types[0].adims == 0 else _lead_slice(args[0], types[0], 0, n)


def _tail(args, types):
    n = int_value(args[1])
    size = _size([args[0]], [types[0]])
    _check_range(f"tail of length {n}", size - n + 1, size, size)
    return _lead_slice(args[0], types[0], size - n, size)


def _segment(args, types):
    i, n = int_value(args[1]), int_value(args[2])
    _check_range(f"segment {i}..{i + n - 1}", i, i + n - 1, _size([args[0]], [types[0]]))
    return _lead_slice(args[0], types[0], i - 1, i - 1 + n)


def _lead_slice(x, t, lo, hi):
    b = fast_ndim(x) - t.ndim
    return x[(slice(None),) * b + (slice(lo, hi),)]


register("head", lambda t: t[0], _head, size_args=(1,), nargs=(2,))
register("tail", lambda t: t[0], _tail, size_args=(1,), nargs=(2,))
register("segment", lambda t: t[0], _segment, size_args=(1, 2), nargs=(3,))


def _linspaced(args, types):
    return onp.linspace(float(args[1]), float(args[2]), int_value(args[0]))


register("linspaced_vector", fixed(VECTOR), _linspaced, size_args=(0,), nargs=(3,))
register(
    "linspaced_array", lambda t: SType("real", "scalar", 1), _linspaced, size_args=(0,), nargs=(3,)
)


def _append(axis_kind):
    def impl(args, types):
        ta, tb = types
        a, b = args
        if axis_kind == "row":  # stack vertically
            if ta.is_scalar:
                a = np.reshape(to_array(a), fast_shape(a) + (1,))
            if tb.is_scalar:
                b = np.reshape(to_array(b), fast_shape(b) + (1,))
            if ta.kind == "row_vector":
                a = a[..., None, :]
            if tb.kind == "row_vector":
                b = b[..., None, :]
            nd = 1 if (ta.kind in ("vector", "scalar") and tb.kind in ("vector", "scalar")) else 2
            a, b = align_batch([a, b], [nd, nd])
            a, b = _broadcast_batch(a, b, nd)
            return np.concatenate([a, b], axis=-nd)
        if ta.is_scalar:
            a = np.reshape(to_array(a), fast_shape(a) + (1,))
        if tb.is_scalar:
            b = np.reshape(to_array(b), fast_shape(b) + (1,))
        if ta.kind == "vector":
            a = a[..., :, None]
        if tb.kind == "vector":
            b = b[..., :, None]
        nd = (
            1
            if (ta.kind in ("row_vector", "scalar") and tb.kind in ("row_vector", "scalar"))
            else 2
        )
        a, b = align_batch([a, b], [nd, nd])
        a, b = _broadcast_batch(a, b, nd)
        return np.concatenate([a, b], axis=-1)

    return impl


def _broadcast_batch(a, b, nd):
    ba, bb = fast_shape(a)[:-nd], fast_shape(b)[:-nd]
    batch = onp.broadcast_shapes(ba, bb)
    if ba != batch:
        a = a * np.ones(batch + (1,) * nd)
    if bb != batch:
        b = b * np.ones(batch + (1,) * nd)
    return a, b


def _append_row_rule(types):
    kinds = {t.kind for t in types}
    return MATRIX if ("matrix" in kinds or "row_vector" in kinds) else VECTOR


def _append_col_rule(types):
    kinds = {t.kind for t in types}
    return MATRIX if ("matrix" in kinds or "vector" in kinds) else ROW_VECTOR


register("append_row", _append_row_rule, _append("row"), nargs=(2,))
register("append_col", _append_col_rule, _append("col"), nargs=(2,))


# ---- linear algebra ------------------------------------------------------------------------------


def matmul(a, ta: SType, b, tb: SType):
    """Stan's `*` for every pair of types."""
    if ta.is_scalar or tb.is_scalar:
        x, y = align([a, b], [ta.ndim, tb.ndim])
        return x * y
    a, b = align_batch([a, b], [ta.ndim, tb.ndim])
    ka, kb = ta.kind, tb.kind
    if ka == "row_vector" and kb == "vector":
        return np.sum(a * b, axis=-1)
    if ka == "vector" and kb == "row_vector":
        return a[..., :, None] * b[..., None, :]
    if ka == "matrix" and kb == "vector":
        return rows_times(a, b)
    if ka == "row_vector" and kb == "matrix":
        if unbatched(b):  # a batch of row vectors times data: one BLAS product
            return np.matmul(a, np.reshape(b, np.shape(b)[-2:]))
        return np.matmul(a[..., None, :], b)[..., 0, :]
    if ka == "matrix" and kb == "matrix":
        return np.matmul(a, b)
    raise SignatureError(f"cannot multiply {ta} by {tb}")


def matmul_type(ta: SType, tb: SType) -> SType:
    if ta.is_scalar or tb.is_scalar:
        return elementwise_rule([ta, tb]) if not (ta.is_int and tb.is_int) else INT
    if ta.adims or tb.adims:
        raise SignatureError(f"cannot multiply {ta} by {tb} (arrays are not matrices)")
    table = {
        ("row_vector", "vector"): REAL,
        ("vector", "row_vector"): MATRIX,
        ("matrix", "vector"): VECTOR,
        ("row_vector", "matrix"): ROW_VECTOR,
        ("matrix", "matrix"): MATRIX,
    }
    try:
        return table[(ta.kind, tb.kind)]
    except KeyError:
        raise SignatureError(f"cannot multiply {ta} by {tb}") from None


def _dot_product(args, types):
    a, b = align_batch(list(args), [t.ndim for t in types])
    return np.sum(a * b, axis=-1)


register("dot_product", fixed(REAL), _dot_product, nargs=(2,))
register(
    "columns_dot_product",
    fixed(ROW_VECTOR),
    lambda args, types: np.sum(args[0] * args[1], axis=-2),
    nargs=(2,),
)
register(
    "rows_dot_product",
    fixed(VECTOR),
    lambda args, types: np.sum(args[0] * args[1], axis=-1),
    nargs=(2,),
)


def _transpose_last(x):
    return np.swapaxes(x, -1, -2)


def _cholesky(args, types):
    """Cholesky factor; draws whose matrix is not positive definite get NaN (Stan rejects them)."""
    m = args[0]
    try:
        return cholesky(m)
    except onp.linalg.LinAlgError:
        pass
    raw = onp.asarray(getattr(m, "_value", m))
    flat = raw.reshape((-1,) + raw.shape[-2:])
    bad = onp.zeros(len(flat), dtype=bool)
    for i, mat in enumerate(flat):  # only reached when some draw failed
        try:
            onp.linalg.cholesky(mat)
        except onp.linalg.LinAlgError:
            bad[i] = True
    bad = bad.reshape(raw.shape[:-2] + (1, 1))
    eye = onp.eye(raw.shape[-1])
    safe_m = where(bad, eye, m)
    return where(bad, onp.nan, cholesky(safe_m))


register("cholesky_decompose", fixed(MATRIX), _cholesky, nargs=(1,))
register("inverse", fixed(MATRIX), lambda args, types: np.linalg.inv(args[0]), nargs=(1,))
register("inverse_spd", fixed(MATRIX), lambda args, types: np.linalg.inv(args[0]), nargs=(1,))
register("determinant", fixed(REAL), lambda args, types: np.linalg.det(args[0]), nargs=(1,))
register(
    "log_determinant", fixed(REAL), lambda args, types: np.linalg.slogdet(args[0])[1], nargs=(1,)
)
register(
    "tcrossprod",
    fixed(MATRIX),
    lambda args, types: np.matmul(args[0], _transpose_last(args[0])),
    nargs=(1,),
)
register(
    "crossprod",
    fixed(MATRIX),
    lambda args, types: np.matmul(_transpose_last(args[0]), args[0]),
    nargs=(1,),
)
register(
    "multiply_lower_tri_self_transpose",
    fixed(MATRIX),
    lambda args, types: np.matmul(np.tril(args[0]), _transpose_last(np.tril(args[0]))),
    nargs=(1,),
)


def _diag_pre_multiply(args, types):
    v, m = align_batch(list(args), [1, 2])
    return v[..., :, None] * m


def _diag_post_multiply(args, types):
    m, v = align_batch(list(args), [2, 1])
    return m * v[..., None, :]


def _add_diag(args, types):
    m, d = args[0], to_array(args[1])
    if types[1].is_scalar:
        d = np.reshape(d, fast_shape(d) + (1,))
    m, d = align_batch([m, d], [2, 1])
    return add_to_diagonal(m, d)  # one copy of m (ppl.library.gp_kernels)


register("add_diag", fixed(MATRIX), _add_diag, nargs=(2,))
register("diag_pre_multiply", fixed(MATRIX), _diag_pre_multiply, nargs=(2,))
register("diag_post_multiply", fixed(MATRIX), _diag_post_multiply, nargs=(2,))


def _quad_form(args, types):
    a, b = align_batch(list(args), [2, types[1].ndim])
    if types[1].kind == "vector":
        return np.sum(b * np.matmul(a, b[..., :, None])[..., 0], axis=-1)
    return np.matmul(_transpose_last(b), np.matmul(a, b))


register("quad_form", lambda t: REAL if t[1].kind == "vector" else MATRIX, _quad_form, nargs=(2,))


def _mdivide_left(args, types):
    a, b = align_batch(list(args), [2, types[1].ndim])
    if types[1].kind == "vector":
        return np.linalg.solve(a, b[..., :, None])[..., 0]
    return np.linalg.solve(a, b)


def _mdivide_right(args, types):
    b, a = align_batch(list(args), [types[0].ndim, 2])
    at = _transpose_last(a)
    if types[0].kind == "row_vector":
        return np.linalg.solve(at, b[..., :, None])[..., 0]
    return _transpose_last(np.linalg.solve(at, _transpose_last(b)))


register("mdivide_left", lambda t: t[1], _mdivide_left, nargs=(2,))
register("mdivide_left_spd", lambda t: t[1], _mdivide_left, nargs=(2,))
register("mdivide_right", lambda t: t[0], _mdivide_right, nargs=(2,))
register("mdivide_right_spd", lambda t: t[0], _mdivide_right, nargs=(2,))


def _softmax(args, types):
    x = args[0]
    return np.exp(x - sps.logsumexp(x, axis=-1, keepdims=True))


def _log_softmax(args, types):
    x = args[0]
    return x - sps.logsumexp(x, axis=-1, keepdims=True)


register("softmax", fixed(VECTOR), _softmax, nargs=(1,))
register("log_softmax", fixed(VECTOR), _log_softmax, nargs=(1,))


def _gp_exp_quad_cov(args, types):
    """Squared-exponential kernel alpha^2 exp(-|x_i - x_j|^2 / (2 rho^2)) over array points;
    with one length-scale per input dimension (`array[] real rho`, Stan's ARD signature)
    exp(-sum_d (x_id - x_jd)^2 / (2 rho_d^2)). The points are scaled by the length-scales and
    the rest is one primitive (ppl.library.gp_kernels.exp_quad)."""
    x, alpha, rho = args
    tx = types[0]
    x = to_array(x)
    if tx.kind == "scalar":  # array of reals: points are scalars, one input dimension
        x = np.reshape(x, fast_shape(x) + (1,))
    if types[2].ndim == 1:  # ARD: scale each input dimension by its own length-scale
        x, alpha, rho = align_batch([x, alpha, rho], [2, 0, 1])
        shape = fast_shape(rho)
        x = x / np.reshape(rho, shape[:-1] + (1,) + shape[-1:])
    else:
        x, alpha, rho = align_batch([x, alpha, rho], [2, 0, 0])
        x = x / np.reshape(rho, fast_shape(rho) + (1, 1))
    return exp_quad(x, alpha**2)  # the scale in the kernel's own pass over each matrix


def _gp_rule(types):
    if types[0].adims != 1:
        raise SignatureError("gp_exp_quad_cov needs an array of reals or of vectors")
    if types[2].ndim > 1 or (types[2].ndim == 1 and types[0].kind != "vector"):
        raise SignatureError(
            "gp_exp_quad_cov: one length-scale per dimension (array[] real) needs array[] vector x"
        )
    return MATRIX


register("gp_exp_quad_cov", _gp_rule, _gp_exp_quad_cov, nargs=(3,))
register("cov_exp_quad", _gp_rule, _gp_exp_quad_cov, nargs=(3,))


def _sort(descending):
    def impl(args, types):
        s = np.sort(args[0], axis=-1)
        return s[..., ::-1] if descending else s

    return impl


register("sort_asc", lambda t: t[0], _sort(False), nargs=(1,))
register("sort_desc", lambda t: t[0], _sort(True), nargs=(1,))


def lookup(name: str) -> Function | None:
    return LIBRARY.get(name)
