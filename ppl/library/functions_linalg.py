"""Matrix functions of the Stan library: decompositions, the matrix exponential, traces and
quadratic forms, constructors of constant and one-hot containers.

Everything acts on the trailing (type) axes and broadcasts over leading batch axes, and is
differentiable by autograd: the thin QR factors through their own VJP (Walter and Lehmann's
formula for m >= n), the eigen- and singular values through autograd's, and matrix_exp as a
Pade approximant with scaling and squaring written in differentiable operations.
"""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp
from autograd.extend import defvjp, primitive

from ppl.language.types import MATRIX, REAL, ROW_VECTOR, VECTOR, SType, align_batch, fast_shape
from ppl.library.cholesky_ops import solve_lower, solve_lower_vector
from ppl.library.function_registry import SignatureError, fixed, int_value, register


def _t(x):
    return np.swapaxes(x, -1, -2)


# ---- QR --------------------------------------------------------------------------------------


def _signed_qr(a, mode: str):
    """numpy's QR with Stan's convention: R has a non-negative diagonal (Q's columns follow)."""
    q, r = onp.linalg.qr(onp.asarray(a, dtype=float), mode=mode)
    k = min(a.shape[-2:])
    d = onp.diagonal(r, axis1=-2, axis2=-1)[..., :k]
    s = onp.where(d < 0, -1.0, 1.0)
    q = q.copy()
    r = r.copy()
    q[..., :, :k] *= s[..., None, :]
    r[..., :k, :] *= s[..., :, None]
    return q, r


def _copyltu(m):
    """The symmetric matrix whose lower triangle is m's."""
    lower = np.tril(m, -1)
    return lower + _t(lower) + m * onp.eye(fast_shape(m)[-1])


def _thin_qr_vjp(a, gq, gr):
    """d loss / d A for A = Q R (m >= n) from the cotangents of Q and R."""
    if a.shape[-2] < a.shape[-1]:
        raise NotImplementedError("gradients of qr_thin for a matrix with more columns than rows")
    q, r = _signed_qr(a, "reduced")
    m = np.matmul(r, _t(gr)) - np.matmul(_t(gq), q)
    b = gq + np.matmul(q, _copyltu(m))
    return _t(onp.linalg.solve(r, _t(b)))


@primitive
def qr_thin_q(a):
    return _signed_qr(a, "reduced")[0]


@primitive
def qr_thin_r(a):
    return _signed_qr(a, "reduced")[1]


defvjp(qr_thin_q, lambda ans, a: lambda g: _thin_qr_vjp(a, g, onp.zeros_like(qr_thin_r(a))))
defvjp(qr_thin_r, lambda ans, a: lambda g: _thin_qr_vjp(a, onp.zeros_like(qr_thin_q(a)), g))


@primitive
def qr_full_q(a):
    return _signed_qr(a, "complete")[0]


@primitive
def qr_full_r(a):
    return _signed_qr(a, "complete")[1]


def _same_as_thin(full, thin):
    """VJP of a full factor for a square or wide matrix, where it equals the thin one."""

    def vjp_maker(ans, a):
        if a.shape[-2] > a.shape[-1]:
            raise NotImplementedError(
                "gradients of the full QR of a tall matrix (use qr_thin_Q / qr_thin_R)"
            )
        return lambda g: _thin_qr_vjp(
            a,
            g if thin is qr_thin_q else onp.zeros_like(qr_thin_q(a)),
            g if thin is qr_thin_r else onp.zeros_like(qr_thin_r(a)),
        )

    defvjp(full, vjp_maker)


_same_as_thin(qr_full_q, qr_thin_q)
_same_as_thin(qr_full_r, qr_thin_r)

register("qr_thin_Q", fixed(MATRIX), lambda args, types: qr_thin_q(args[0]), nargs=(1,))
register("qr_thin_R", fixed(MATRIX), lambda args, types: qr_thin_r(args[0]), nargs=(1,))
register("qr_Q", fixed(MATRIX), lambda args, types: qr_full_q(args[0]), nargs=(1,))
register("qr_R", fixed(MATRIX), lambda args, types: qr_full_r(args[0]), nargs=(1,))


# ---- eigen and singular values ---------------------------------------------------------------


def _symmetric(x):
    return 0.5 * (x + _t(x))


register(
    "eigenvalues_sym",
    fixed(VECTOR),
    lambda args, types: np.linalg.eigh(_symmetric(args[0]))[0],
    nargs=(1,),
)
register(
    "eigenvectors_sym",
    fixed(MATRIX),
    lambda args, types: np.linalg.eigh(_symmetric(args[0]))[1],
    nargs=(1,),
)
register(
    "singular_values",
    fixed(VECTOR),
    lambda args, types: np.linalg.svd(args[0], compute_uv=False),
    nargs=(1,),
)
register(
    "svd_U",
    fixed(MATRIX),
    lambda args, types: np.linalg.svd(args[0], full_matrices=False)[0],
    nargs=(1,),
)
register(
    "svd_V",
    fixed(MATRIX),
    lambda args, types: _t(np.linalg.svd(args[0], full_matrices=False)[2]),
    nargs=(1,),
)


# ---- matrix exponential and powers -----------------------------------------------------------

# Pade(13) coefficients and the 1-norm up to which it is accurate to double precision
# (Higham 2005, "The scaling and squaring method for the matrix exponential revisited").
_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_THETA13 = 5.371920351148152


def matrix_exp(a):
    """exp(A) by scaling and squaring with the degree-13 Pade approximant, differentiable."""
    raw = onp.asarray(getattr(a, "_value", a), dtype=float)
    n = raw.shape[-1]
    norm1 = float(onp.max(onp.sum(onp.abs(raw), axis=-2))) if raw.size else 0.0
    s = max(0, int(onp.ceil(onp.log2(norm1 / _THETA13)))) if norm1 > _THETA13 else 0
    a = a / 2.0**s
    b = _PADE13
    eye = onp.eye(n)
    a2 = np.matmul(a, a)
    a4 = np.matmul(a2, a2)
    a6 = np.matmul(a4, a2)
    u = np.matmul(
        a,
        np.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
        + b[7] * a6
        + b[5] * a4
        + b[3] * a2
        + b[1] * eye,
    )
    v = (
        np.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
        + b[6] * a6
        + b[4] * a4
        + b[2] * a2
        + b[0] * eye
    )
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = np.matmul(r, r)
    return r


def _matrix_exp_multiply(args, types):
    a, b = align_batch(list(args), [2, 2])
    return np.matmul(matrix_exp(a), b)


def _scale_matrix_exp_multiply(args, types):
    t, a, b = args
    t_arr = np.reshape(t, fast_shape(t) + (1, 1)) if hasattr(t, "shape") else t
    a, b = align_batch([a, b], [2, 2])
    return np.matmul(matrix_exp(t_arr * a), b)


def _matrix_power(args, types):
    a = args[0]
    k = int_value(args[1])
    if k < 0:
        raise SignatureError("matrix_power needs a non-negative power")
    result = onp.eye(fast_shape(a)[-1]) + 0.0 * a
    base = a
    while k:  # binary powering: O(log k) products
        if k & 1:
            result = np.matmul(result, base)
        k >>= 1
        if k:
            base = np.matmul(base, base)
    return result


register("matrix_exp", fixed(MATRIX), lambda args, types: matrix_exp(args[0]), nargs=(1,))
register("matrix_exp_multiply", fixed(MATRIX), _matrix_exp_multiply, nargs=(2,))
register("scale_matrix_exp_multiply", fixed(MATRIX), _scale_matrix_exp_multiply, nargs=(3,))
register("matrix_power", fixed(MATRIX), _matrix_power, size_args=(1,), nargs=(2,))


# ---- traces, quadratic forms, products -------------------------------------------------------


def _diag_sum(x):
    return np.sum(x * onp.eye(fast_shape(x)[-1]), axis=(-2, -1))


def _trace_quad_form(args, types):
    a, b = align_batch(list(args), [2, 2])
    return _diag_sum(np.matmul(_t(b), np.matmul(a, b)))


def _quad_form_diag(args, types):
    m, v = align_batch(list(args), [2, 1])
    return v[..., :, None] * m * v[..., None, :]


def _quad_form_sym(args, types):
    a, b = align_batch(list(args), [2, types[1].ndim])
    a = _symmetric(a)
    if types[1].kind == "vector":
        return np.sum(b * np.matmul(a, b[..., :, None])[..., 0], axis=-1)
    return _symmetric(np.matmul(_t(b), np.matmul(a, b)))


def _trace_gen_quad_form(args, types):
    d, a, b = align_batch(list(args), [2, 2, 2])
    return _diag_sum(np.matmul(d, np.matmul(_t(b), np.matmul(a, b))))


def _symmetrize_from_lower_tri(args, types):
    m = args[0]
    lower = np.tril(m, -1)
    return lower + _t(lower) + m * onp.eye(fast_shape(m)[-1])


def _chol2inv(args, types):
    L = np.tril(args[0])
    n = fast_shape(L)[-1]
    eye = onp.eye(n) + 0.0 * L
    inv_l = np.linalg.solve(L, eye)
    return np.matmul(_t(inv_l), inv_l)


register("trace", fixed(REAL), lambda args, types: _diag_sum(args[0]), nargs=(1,))
register("trace_quad_form", fixed(REAL), _trace_quad_form, nargs=(2,))
register("trace_gen_quad_form", fixed(REAL), _trace_gen_quad_form, nargs=(3,))
register("quad_form_diag", fixed(MATRIX), _quad_form_diag, nargs=(2,))
register(
    "quad_form_sym", lambda t: REAL if t[1].kind == "vector" else MATRIX, _quad_form_sym, nargs=(2,)
)
register("symmetrize_from_lower_tri", fixed(MATRIX), _symmetrize_from_lower_tri, nargs=(1,))
register("chol2inv", fixed(MATRIX), _chol2inv, nargs=(1,))
register(
    "columns_dot_self",
    fixed(ROW_VECTOR),
    lambda args, types: np.sum(args[0] ** 2, axis=-2),
    nargs=(1,),
)
register(
    "rows_dot_self", fixed(VECTOR), lambda args, types: np.sum(args[0] ** 2, axis=-1), nargs=(1,)
)


# ---- blocks ----------------------------------------------------------------------------------


def _range_check(what: str, lo: int, n: int, size: int) -> None:
    if n < 0 or lo < 1 or lo + n - 1 > size:
        raise SignatureError(f"{what} {lo}..{lo + n - 1} out of range 1..{size}")


def _block(args, types):
    m = args[0]
    i, j, nr, nc = (int_value(a) for a in args[1:])
    rows, cols = fast_shape(m)[-2:]
    _range_check("block rows", i, nr, rows)
    _range_check("block columns", j, nc, cols)
    return m[..., i - 1 : i - 1 + nr, j - 1 : j - 1 + nc]


def _sub_col(args, types):
    m = args[0]
    i, j, n = (int_value(a) for a in args[1:])
    rows, cols = fast_shape(m)[-2:]
    _range_check("sub_col rows", i, n, rows)
    _range_check("sub_col column", j, 1, cols)
    return m[..., i - 1 : i - 1 + n, j - 1]


def _sub_row(args, types):
    m = args[0]
    i, j, n = (int_value(a) for a in args[1:])
    rows, cols = fast_shape(m)[-2:]
    _range_check("sub_row row", i, 1, rows)
    _range_check("sub_row columns", j, n, cols)
    return m[..., i - 1, j - 1 : j - 1 + n]


register("block", fixed(MATRIX), _block, size_args=(1, 2, 3, 4), nargs=(5,))
register("sub_col", fixed(VECTOR), _sub_col, size_args=(1, 2, 3), nargs=(4,))
register("sub_row", fixed(ROW_VECTOR), _sub_row, size_args=(1, 2, 3), nargs=(4,))


# ---- constant, one-hot and evenly spaced containers ------------------------------------------


def _constant(value: float, kind: str):
    def impl(args, types):
        return onp.full(int_value(args[0]), value, dtype=int if kind == "int" else float)

    return impl


_CONTAINER = {
    "vector": VECTOR,
    "row_vector": ROW_VECTOR,
    "array": SType("real", "scalar", 1),
    "int_array": SType("int", "scalar", 1),
}

for _kind, _stype in _CONTAINER.items():
    _base = "int" if _kind == "int_array" else "real"
    register(f"ones_{_kind}", fixed(_stype), _constant(1, _base), size_args=(0,), nargs=(1,))
    register(f"zeros_{_kind}", fixed(_stype), _constant(0, _base), size_args=(0,), nargs=(1,))


def _one_hot(kind: str):
    def impl(args, types):
        n, k = int_value(args[0]), int_value(args[1])
        if not 1 <= k <= n:
            raise SignatureError(f"one_hot: position {k} out of range 1..{n}")
        out = onp.zeros(n, dtype=int if kind == "int_array" else float)
        out[k - 1] = 1
        return out

    return impl


for _kind, _stype in _CONTAINER.items():
    register(f"one_hot_{_kind}", fixed(_stype), _one_hot(_kind), size_args=(0, 1), nargs=(2,))


register(
    "uniform_simplex",
    fixed(VECTOR),
    lambda args, types: onp.full(int_value(args[0]), 1.0 / int_value(args[0])),
    size_args=(0,),
    nargs=(1,),
)
register(
    "linspaced_row_vector",
    fixed(ROW_VECTOR),
    lambda args, types: onp.linspace(float(args[1]), float(args[2]), int_value(args[0])),
    size_args=(0,),
    nargs=(3,),
)


def _mdivide_left_tri_low(args, types):
    """L^-1 b, L lower triangular (its upper triangle is not read, as Stan's)."""
    a, b = align_batch(list(args), [2, types[1].ndim])
    if types[1].kind == "vector":
        return solve_lower_vector(a, b)
    return solve_lower(a, b)


def _mdivide_right_tri_low(args, types):
    """b L^-1 = (L^-T b^T)^T, L lower triangular."""
    b, a = align_batch(list(args), [types[0].ndim, 2])
    if types[0].kind == "row_vector":
        return solve_lower_vector(a, b, True)
    return np.swapaxes(solve_lower(a, np.swapaxes(b, -1, -2), True), -1, -2)


register("mdivide_left_tri_low", lambda t: t[1], _mdivide_left_tri_low, nargs=(2,))
register("mdivide_right_tri_low", lambda t: t[0], _mdivide_right_tri_low, nargs=(2,))
