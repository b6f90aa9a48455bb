"""What the compiler computes: library functions against numpy/scipy on batched inputs, log
joints of small models against hand-written scipy.stats code, vectorised loops against sequential
ones, autograd gradients against finite differences, and run-time errors that point at a line."""

from __future__ import annotations

from pathlib import Path

import autograd
import autograd.numpy as anp
import numpy as np
import pytest
import scipy.linalg as sla
import scipy.special as sp
from scipy import stats

from ppl.errors import ModelError
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.language.types import INT, MATRIX, REAL, ROW_VECTOR, VECTOR, SType
from ppl.library.functions import LIBRARY
from ppl.runtime.compiler import CompiledModel

S, N = 4, 5
RNG = np.random.default_rng(20240501)
ARR_REAL = SType("real", "scalar", 1)
ARR_VEC = SType("real", "vector", 1)


def call(name, args, types):
    return LIBRARY[name].impl(args, types)


def per_sample(fn, *arrays):
    """Apply a single-sample reference to each row of batched arrays; stack the results."""
    return np.stack([np.asarray(fn(*[a[s] for a in arrays])) for s in range(arrays[0].shape[0])])


# ---- (a) library functions -----------------------------------------------------------------------

UNARY = {
    # name: (reference, low, high) - inputs drawn uniformly from the function's domain
    "exp": (np.exp, -2, 2),
    "log": (np.log, 0.1, 3),
    "log1p": (np.log1p, -0.5, 2),
    "expm1": (np.expm1, -2, 2),
    "sqrt": (np.sqrt, 0.1, 4),
    "cbrt": (np.cbrt, -3, 3),
    "square": (np.square, -2, 2),
    "inv": (lambda x: 1 / x, 0.2, 3),
    "inv_sqrt": (lambda x: 1 / np.sqrt(x), 0.2, 3),
    "inv_square": (lambda x: x**-2.0, 0.2, 3),
    "log2": (np.log2, 0.1, 3),
    "log10": (np.log10, 0.1, 3),
    "exp2": (np.exp2, -2, 2),
    "log1m": (lambda x: np.log(1 - x), -1, 0.9),
    "inv_logit": (sp.expit, -4, 4),
    "logit": (sp.logit, 0.05, 0.95),
    "log_inv_logit": (lambda x: np.log(sp.expit(x)), -5, 5),
    "log1m_inv_logit": (lambda x: np.log(1 - sp.expit(x)), -5, 5),
    "log1m_exp": (lambda x: np.log(1 - np.exp(x)), -3, -0.05),
    "log1p_exp": (lambda x: np.log1p(np.exp(x)), -5, 5),
    "softplus": (lambda x: np.log1p(np.exp(x)), -5, 5),
    "lgamma": (sp.gammaln, 0.2, 5),
    "digamma": (sp.digamma, 0.2, 5),
    "tgamma": (sp.gamma, 0.2, 4),
    "sin": (np.sin, -3, 3),
    "cos": (np.cos, -3, 3),
    "tan": (np.tan, -1.2, 1.2),
    "asin": (np.arcsin, -0.9, 0.9),
    "acos": (np.arccos, -0.9, 0.9),
    "atan": (np.arctan, -3, 3),
    "sinh": (np.sinh, -2, 2),
    "cosh": (np.cosh, -2, 2),
    "tanh": (np.tanh, -2, 2),
    "asinh": (np.arcsinh, -2, 2),
    "acosh": (np.arccosh, 1.1, 3),
    "atanh": (np.arctanh, -0.9, 0.9),
    "erf": (sp.erf, -2, 2),
    "erfc": (sp.erfc, -2, 2),
    "Phi": (sp.ndtr, -3, 3),
    "inv_Phi": (sp.ndtri, 0.02, 0.98),
    "trigamma": (lambda x: sp.polygamma(1, x), 0.3, 5),
    "fabs": (np.abs, -2, 2),
    "abs": (np.abs, -2, 2),
    "inv_cloglog": (lambda x: 1 - np.exp(-np.exp(x)), -2, 1.5),
}

# piecewise constant, integer-valued or approximate: checked for values only
UNARY_VALUES_ONLY = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,
    "trunc": np.trunc,
    "step": lambda x: np.where(x < 0, 0, 1),
    "int_step": lambda x: np.where(x > 0, 1, 0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_functions_values_and_gradients(name):
    ref, lo, hi = UNARY[name]
    x = RNG.uniform(lo, hi, size=(S, N))
    out = call(name, [x], [VECTOR])
    np.testing.assert_allclose(out, ref(x), rtol=1e-7, atol=1e-10)
    # scalar (batched) argument too
    np.testing.assert_allclose(call(name, [x[:, 0]], [REAL]), ref(x[:, 0]), rtol=1e-7, atol=1e-10)
    # autograd derivative against a central difference of the reference
    g = autograd.elementwise_grad(lambda v: call(name, [v], [VECTOR]))(x)
    h = 1e-6
    fd = (ref(x + h) - ref(x - h)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6)


def test_values_only_functions_and_phi_approx():
    x = RNG.uniform(-3, 3, size=(S, N))
    for name, ref in UNARY_VALUES_ONLY.items():
        np.testing.assert_array_equal(call(name, [x], [VECTOR]), ref(x), err_msg=name)
    np.testing.assert_allclose(call("Phi_approx", [x], [VECTOR]), sp.ndtr(x), atol=2e-4)
    y = np.array([[1.0, np.inf, np.nan]])
    np.testing.assert_array_equal(call("is_inf", [y], [VECTOR]), [[0, 1, 0]])
    np.testing.assert_array_equal(call("is_nan", [y], [VECTOR]), [[0, 0, 1]])


BINARY = {
    "pow": (np.power, (0.2, 3), (-2, 2)),
    "fmin": (np.minimum, (-2, 2), (-2, 2)),
    "fmax": (np.maximum, (-2, 2), (-2, 2)),
    "fdim": (lambda a, b: np.maximum(a - b, 0), (-2, 2), (-2, 2)),
    "hypot": (np.hypot, (-2, 2), (-2, 2)),
    "atan2": (np.arctan2, (-2, 2), (-2, 2)),
    "fmod": (np.fmod, (-5, 5), (0.5, 2)),
    "log_diff_exp": (lambda a, b: np.log(np.exp(a) - np.exp(b)), (1, 2), (-2, 0.5)),
    "lbeta": (sp.betaln, (0.2, 4), (0.2, 4)),
    "lchoose": (lambda n, k: np.log(sp.binom(n, k)), (5, 9), (0.5, 4)),
    "binomial_coefficient_log": (lambda n, k: np.log(sp.binom(n, k)), (5, 9), (0.5, 4)),
    "log_inv_logit_diff": (lambda a, b: np.log(sp.expit(a) - sp.expit(b)), (1, 3), (-3, 0.5)),
    "multiply_log": (sp.xlogy, (-2, 2), (0.1, 3)),
    "lmultiply": (sp.xlogy, (-2, 2), (0.1, 3)),
    "log_sum_exp": (np.logaddexp, (-3, 3), (-3, 3)),
    "max": (np.maximum, (-2, 2), (-2, 2)),
    "min": (np.minimum, (-2, 2), (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_functions_broadcast_scalars(name):
    ref, (alo, ahi), (blo, bhi) = BINARY[name]
    a = RNG.uniform(alo, ahi, size=(S, N))
    b = RNG.uniform(blo, bhi, size=(S, N))
    np.testing.assert_allclose(
        call(name, [a, b], [VECTOR, VECTOR]), ref(a, b), rtol=1e-8, atol=1e-12
    )
    # vector with a per-sample scalar, and with a data scalar
    np.testing.assert_allclose(
        call(name, [a, b[:, 0]], [VECTOR, REAL]), ref(a, b[:, :1]), rtol=1e-8
    )
    np.testing.assert_allclose(call(name, [a[0, 0], b], [REAL, VECTOR]), ref(a[0, 0], b), rtol=1e-8)


def test_ternary_elementwise_functions():
    a, b, c = (RNG.uniform(0.1, 0.9, size=(S, N)) for _ in range(3))
    np.testing.assert_allclose(call("fma", [a, b, c], [VECTOR] * 3), a * b + c)
    lp1, lp2 = RNG.normal(size=(2, S, N))
    expected = np.log(a * np.exp(lp1) + (1 - a) * np.exp(lp2))
    np.testing.assert_allclose(call("log_mix", [a, lp1, lp2], [VECTOR] * 3), expected)
    np.testing.assert_allclose(
        call("log_mix", [a[:, 0], lp1[:, 0], -1.0], [REAL] * 3),
        expected[:, 0] * 0 + np.log(a[:, 0] * np.exp(lp1[:, 0]) + (1 - a[:, 0]) * np.exp(-1.0)),
    )


def test_reductions():
    x = RNG.normal(size=(S, N))
    cases = {
        "sum": np.sum(x, axis=1),
        "prod": np.prod(x, axis=1),
        "mean": np.mean(x, axis=1),
        "variance": np.var(x, axis=1, ddof=1),
        "sd": np.std(x, axis=1, ddof=1),
        "log_sum_exp": sp.logsumexp(x, axis=1),
        "max": np.max(x, axis=1),
        "min": np.min(x, axis=1),
        "norm2": np.linalg.norm(x, axis=1),
        "dot_self": np.sum(x**2, axis=1),
    }
    for name, expected in cases.items():
        for t in (VECTOR, ROW_VECTOR, ARR_REAL):
            np.testing.assert_allclose(call(name, [x], [t]), expected, rtol=1e-10, err_msg=name)
    m = RNG.normal(size=(S, 3, 4))
    np.testing.assert_allclose(call("sum", [m], [MATRIX]), m.sum(axis=(1, 2)))
    np.testing.assert_allclose(call("sd", [m], [MATRIX]), m.reshape(S, -1).std(axis=1, ddof=1))
    np.testing.assert_allclose(call("log_sum_exp", [m], [MATRIX]), sp.logsumexp(m, axis=(1, 2)))
    # an array of vectors reduces over everything but the batch axis
    np.testing.assert_allclose(call("mean", [m], [ARR_VEC]), m.mean(axis=(1, 2)))
    # data (no batch axis)
    assert call("sum", [x[0]], [VECTOR]) == pytest.approx(x[0].sum())
    # gradient of a reduction
    g = autograd.grad(lambda v: anp.sum(call("log_sum_exp", [v], [VECTOR])))(x)
    np.testing.assert_allclose(g, sp.softmax(x, axis=1))


def test_sizes():
    m = RNG.normal(size=(S, 3, 4))
    assert call("rows", [m], [MATRIX]) == 3 and call("cols", [m], [MATRIX]) == 4
    assert call("num_elements", [m], [MATRIX]) == 12 and call("size", [m], [ARR_VEC]) == 3
    assert call("rows", [m[:, 0]], [VECTOR]) == 4 and call("cols", [m[:, 0]], [VECTOR]) == 1
    assert call("rows", [m[:, 0]], [ROW_VECTOR]) == 1 and call("cols", [m[:, 0]], [ROW_VECTOR]) == 4


def _mat(r, c):
    return RNG.normal(size=(S, r, c))


def _spd(n):
    a = RNG.normal(size=(S, n, n))
    return a @ np.swapaxes(a, 1, 2) + n * np.eye(n)


def test_multiplication_for_all_type_pairs():
    from ppl.runtime.evaluator import Evaluator

    ev = Evaluator(parse("model { }"), {})
    a, v, r, m, k = (
        _mat(3, 4),
        RNG.normal(size=(S, 4)),
        RNG.normal(size=(S, 3)),
        _mat(4, 2),
        RNG.normal(size=S),
    )
    mul = lambda x, tx, y, ty: ev.binop("*", x, tx, y, ty, None)  # noqa: E731
    np.testing.assert_allclose(mul(a, MATRIX, v, VECTOR), np.einsum("sij,sj->si", a, v))
    np.testing.assert_allclose(mul(r, ROW_VECTOR, a, MATRIX), np.einsum("si,sij->sj", r, a))
    np.testing.assert_allclose(mul(a, MATRIX, m, MATRIX), a @ m)
    np.testing.assert_allclose(mul(r, ROW_VECTOR, r, VECTOR), np.sum(r * r, axis=1))
    np.testing.assert_allclose(mul(v, VECTOR, r, ROW_VECTOR), v[:, :, None] * r[:, None, :])
    np.testing.assert_allclose(mul(k, REAL, a, MATRIX), k[:, None, None] * a)
    np.testing.assert_allclose(mul(v, VECTOR, k, REAL), v * k[:, None])
    np.testing.assert_allclose(mul(2.0, REAL, k, REAL), 2 * k)
    assert mul(3, INT, 4, INT) == 12
    # data matrix (no batch axis) times a batched vector
    np.testing.assert_allclose(mul(a[0], MATRIX, v, VECTOR), np.einsum("ij,sj->si", a[0], v))
    # and the loop-batched case: (S, L, 4) vectors against a data matrix
    vl = RNG.normal(size=(S, 2, 4))
    np.testing.assert_allclose(mul(a[0], MATRIX, vl, VECTOR), np.einsum("ij,slj->sli", a[0], vl))


def test_matrix_algebra():
    v, w = RNG.normal(size=(2, S, 4))
    A = _spd(4)
    L = np.linalg.cholesky(A)
    B = _mat(4, 3)
    np.testing.assert_allclose(call("dot_product", [v, w], [VECTOR, VECTOR]), np.sum(v * w, axis=1))
    np.testing.assert_allclose(call("dot_product", [v, w[0]], [VECTOR, ROW_VECTOR]), v @ w[0])
    np.testing.assert_allclose(call("cholesky_decompose", [A], [MATRIX]), L)
    np.testing.assert_allclose(
        call("mdivide_left_tri_low", [L, v], [MATRIX, VECTOR]),
        per_sample(lambda l_, b: sla.solve_triangular(l_, b, lower=True), L, v),
    )
    np.testing.assert_allclose(
        call("mdivide_left", [A, B], [MATRIX, MATRIX]), np.linalg.solve(A, B)
    )
    np.testing.assert_allclose(
        call("mdivide_right", [v, A], [ROW_VECTOR, MATRIX]),
        per_sample(lambda b, a: b @ np.linalg.inv(a), v, A),
    )
    np.testing.assert_allclose(
        call("quad_form", [A, v], [MATRIX, VECTOR]), np.einsum("si,sij,sj->s", v, A, v)
    )
    np.testing.assert_allclose(
        call("quad_form", [A, B], [MATRIX, MATRIX]), np.swapaxes(B, 1, 2) @ A @ B
    )
    np.testing.assert_allclose(
        call("diag_pre_multiply", [v, B], [VECTOR, MATRIX]), v[:, :, None] * B
    )
    np.testing.assert_allclose(
        call("diag_post_multiply", [A, v], [MATRIX, VECTOR]), A * v[:, None, :]
    )
    np.testing.assert_allclose(call("diag_matrix", [v], [VECTOR]), per_sample(np.diag, v))
    np.testing.assert_allclose(call("diagonal", [A], [MATRIX]), per_sample(np.diag, A))
    np.testing.assert_allclose(call("tcrossprod", [B], [MATRIX]), B @ np.swapaxes(B, 1, 2))
    np.testing.assert_allclose(call("crossprod", [B], [MATRIX]), np.swapaxes(B, 1, 2) @ B)
    np.testing.assert_allclose(
        call("multiply_lower_tri_self_transpose", [A], [MATRIX]),
        np.tril(A) @ np.swapaxes(np.tril(A), 1, 2),
    )
    np.testing.assert_allclose(call("inverse", [A], [MATRIX]), np.linalg.inv(A))
    np.testing.assert_allclose(call("determinant", [A], [MATRIX]), np.linalg.det(A))
    np.testing.assert_allclose(call("log_determinant", [A], [MATRIX]), np.linalg.slogdet(A)[1])
    np.testing.assert_allclose(
        call("columns_dot_product", [B, B], [MATRIX, MATRIX]), np.sum(B * B, axis=1)
    )
    np.testing.assert_allclose(
        call("rows_dot_product", [B, B], [MATRIX, MATRIX]), np.sum(B * B, axis=2)
    )
    np.testing.assert_allclose(call("softmax", [v], [VECTOR]), sp.softmax(v, axis=1))
    np.testing.assert_allclose(call("log_softmax", [v], [VECTOR]), sp.log_softmax(v, axis=1))
    np.testing.assert_allclose(call("cumulative_sum", [v], [VECTOR]), np.cumsum(v, axis=1))
    np.testing.assert_allclose(call("sort_asc", [v], [VECTOR]), np.sort(v, axis=1))
    np.testing.assert_allclose(call("sort_desc", [v], [VECTOR]), -np.sort(-v, axis=1))


def test_cholesky_of_non_spd_draw_gives_nan_for_that_draw_only():
    A = _spd(3)
    A[1] = -A[1]
    out = call("cholesky_decompose", [A], [MATRIX])
    assert np.all(np.isnan(out[1]))
    np.testing.assert_allclose(out[0], np.linalg.cholesky(A[0]))


def test_cholesky_gradient():
    A = _spd(3)

    def f(a):
        return anp.sum(call("cholesky_decompose", [a], [MATRIX]) ** 2)

    g = autograd.grad(f)(A)
    h = 1e-6
    E = np.zeros_like(A)
    E[:, 1, 2] = E[:, 2, 1] = h  # symmetric perturbation
    fd = (f(A + E) - f(A - E)) / (2 * h)
    assert np.sum(g * (E / h)) == pytest.approx(fd, rel=1e-5)


def test_constructors_and_reshapes():
    v, w = RNG.normal(size=(2, S, 3))
    m = _mat(3, 2)
    k = RNG.normal(size=S)
    np.testing.assert_allclose(
        call("append_row", [v, w], [VECTOR, VECTOR]), np.concatenate([v, w], axis=1)
    )
    np.testing.assert_allclose(
        call("append_row", [k, w[0]], [REAL, VECTOR]),
        np.concatenate([k[:, None], np.tile(w[0], (S, 1))], axis=1),
    )
    np.testing.assert_allclose(
        call("append_row", [m, w[:, :2]], [MATRIX, ROW_VECTOR]),
        np.concatenate([m, w[:, None, :2]], axis=1),
    )
    np.testing.assert_allclose(
        call("append_col", [m, v], [MATRIX, VECTOR]), np.concatenate([m, v[:, :, None]], axis=2)
    )
    np.testing.assert_allclose(
        call("append_col", [v, w], [ROW_VECTOR, ROW_VECTOR]), np.concatenate([v, w], axis=1)
    )
    np.testing.assert_allclose(call("rep_vector", [k, 3], [REAL, INT]), np.tile(k[:, None], (1, 3)))
    np.testing.assert_allclose(call("rep_row_vector", [2.0, 3], [REAL, INT]), np.full(3, 2.0))
    np.testing.assert_allclose(
        call("rep_matrix", [k, 2, 3], [REAL, INT, INT]), k[:, None, None] * np.ones((2, 3))
    )
    np.testing.assert_allclose(
        call("rep_matrix", [v, 2], [VECTOR, INT]), np.repeat(v[:, :, None], 2, axis=2)
    )
    np.testing.assert_allclose(
        call("rep_matrix", [v, 2], [ROW_VECTOR, INT]), np.repeat(v[:, None, :], 2, axis=1)
    )
    np.testing.assert_allclose(
        call("rep_array", [v, 2], [VECTOR, INT]), np.repeat(v[:, None, :], 2, axis=1)
    )
    np.testing.assert_allclose(
        call("rep_array", [k, 2, 3], [REAL, INT, INT]), k[:, None, None] * np.ones((2, 3))
    )
    # to_vector of a matrix is column-major, as in Stan; to_matrix fills column-major too
    np.testing.assert_allclose(
        call("to_vector", [m], [MATRIX]), np.swapaxes(m, 1, 2).reshape(S, -1)
    )
    np.testing.assert_allclose(call("to_vector", [v], [ROW_VECTOR]), v)
    np.testing.assert_allclose(call("to_array_1d", [v], [VECTOR]), v)
    flat = call("to_vector", [m], [MATRIX])
    np.testing.assert_allclose(call("to_matrix", [flat, 3, 2], [VECTOR, INT, INT]), m)
    np.testing.assert_allclose(call("to_matrix", [v], [VECTOR]), v[:, :, None])
    np.testing.assert_allclose(call("to_matrix", [v], [ROW_VECTOR]), v[:, None, :])
    np.testing.assert_allclose(call("identity_matrix", [3], [INT]), np.eye(3))
    np.testing.assert_allclose(
        call("linspaced_vector", [5, 0, 1], [INT, REAL, REAL]), np.linspace(0, 1, 5)
    )
    np.testing.assert_allclose(call("col", [m, 2], [MATRIX, INT]), m[:, :, 1])
    np.testing.assert_allclose(call("row", [m, 3], [MATRIX, INT]), m[:, 2, :])
    np.testing.assert_allclose(call("head", [v, 2], [VECTOR, INT]), v[:, :2])
    np.testing.assert_allclose(call("tail", [v, 2], [VECTOR, INT]), v[:, 1:])
    np.testing.assert_allclose(call("segment", [v, 2, 2], [VECTOR, INT, INT]), v[:, 1:3])
    np.testing.assert_allclose(call("tail", [m, 1], [ARR_VEC, INT]), m[:, 2:])
    np.testing.assert_array_equal(call("to_int", [np.array([1.7, -1.7])], [ARR_REAL]), [1, -1])


def test_gp_exp_quad_cov():
    x = RNG.normal(size=6)
    alpha, rho = RNG.uniform(0.5, 2, size=(2, S))
    out = call("gp_exp_quad_cov", [x, alpha, rho], [ARR_REAL, REAL, REAL])
    d2 = (x[:, None] - x[None, :]) ** 2
    expected = alpha[:, None, None] ** 2 * np.exp(-d2 / (2 * rho[:, None, None] ** 2))
    np.testing.assert_allclose(out, expected)
    pts = RNG.normal(size=(6, 2))
    out = call("cov_exp_quad", [pts, 1.5, 0.7], [ARR_VEC, REAL, REAL])
    d2 = ((pts[:, None, :] - pts[None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(out, 1.5**2 * np.exp(-d2 / (2 * 0.7**2)))
    # ARD: one length-scale per input dimension, per draw
    rhos = RNG.uniform(0.5, 2, size=(S, 2))
    out = call("gp_exp_quad_cov", [pts, alpha, rhos], [ARR_VEC, REAL, ARR_REAL])
    scaled = pts[None, :, :] / rhos[:, None, :]
    d2 = ((scaled[:, :, None, :] - scaled[:, None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(out, alpha[:, None, None] ** 2 * np.exp(-d2 / 2))


TESTED_ELSEWHERE = {
    "Phi_approx",
    "add_diag",  # test_to_matrix_of_an_array_of_vectors_and_add_diag
    "floor",
    "ceil",
    "round",
    "trunc",
    "step",
    "int_step",
    "is_inf",
    "is_nan",
    "fma",
    "log_mix",
    "sum",
    "prod",
    "mean",
    "variance",
    "sd",
    "norm2",
    "dot_self",
    "size",
    "num_elements",
    "rows",
    "cols",
    "rep_vector",
    "rep_row_vector",
    "rep_matrix",
    "rep_array",
    "diag_matrix",
    "identity_matrix",
    "diagonal",
    "to_vector",
    "to_row_vector",
    "to_array_1d",
    "to_matrix",
    "to_int",
    "cumulative_sum",
    "col",
    "row",
    "head",
    "tail",
    "segment",
    "linspaced_vector",
    "linspaced_array",
    "append_row",
    "append_col",
    "dot_product",
    "columns_dot_product",
    "rows_dot_product",
    "cholesky_decompose",
    "inverse",
    "inverse_spd",
    "determinant",
    "log_determinant",
    "tcrossprod",
    "crossprod",
    "multiply_lower_tri_self_transpose",
    "diag_pre_multiply",
    "diag_post_multiply",
    "quad_form",
    "mdivide_left",
    "mdivide_left_tri_low",
    "mdivide_left_spd",
    "mdivide_right",
    "mdivide_right_tri_low",
    "mdivide_right_spd",
    "softmax",
    "log_softmax",
    "gp_exp_quad_cov",
    "cov_exp_quad",
    "sort_asc",
    "sort_desc",
}


def test_every_library_function_is_covered():
    from ppl.library.distributions.cdfs import CDFS  # every CDF is tested in test_cdfs.py

    stdlib_tests = (Path(__file__).parents[1] / "library" / "test_functions_stdlib.py").read_text()
    cdfs = {d + suffix for d in CDFS for suffix in ("_cdf", "_lcdf", "_lccdf")}
    missing = set(LIBRARY) - set(UNARY) - set(BINARY) - TESTED_ELSEWHERE - cdfs
    missing = {name for name in missing if f'"{name}"' not in stdlib_tests}
    assert not missing, f"add tests for {sorted(missing)}"


# ---- helpers for whole models --------------------------------------------------------------------


def compile_src(src: str, data: dict | None = None, vectorise: bool = True) -> CompiledModel:
    data = {k: np.asarray(v) for k, v in (data or {}).items()}
    return CompiledModel(check(parse(src, "test.model")), data, seed=0, vectorise=vectorise)


def points(model: CompiledModel, n: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, model.dim))


def lj_rows(model: CompiledModel, zeta: np.ndarray) -> np.ndarray:
    return np.asarray(model.log_joint(zeta))


def lower0(u):
    return np.exp(u), u


def lower_upper(u, lo, hi):
    z = sp.expit(u)
    return lo + (hi - lo) * z, np.log(hi - lo) + np.log(z) + np.log1p(-z)


# ---- (b) log joints against scipy.stats ----------------------------------------------------------

X5 = np.array([-1.2, 0.3, 0.8, 1.9, 2.5])
Y5 = np.array([-0.5, 1.1, 1.2, 3.4, 4.0])

REGRESSION = """
data { int N; vector[N] x; vector[N] y; }
parameters { real a; real b; real<lower=0> s; }
model {
  a ~ normal(0, 10);
  b ~ normal(0, 10);
  s ~ exponential(1);
  for (n in 1:N) y[n] ~ normal(a + b * x[n], s);
}
"""


def regression_ref(z):
    a, b = z[0], z[1]
    s, lj = lower0(z[2])
    return (
        stats.norm.logpdf(a, 0, 10)
        + stats.norm.logpdf(b, 0, 10)
        + stats.expon.logpdf(s)
        + stats.norm.logpdf(Y5, a + b * X5, s).sum()
        + lj
    )


ARK = """
data { int<lower=0> K; int<lower=0> T; array[T] real y; }
parameters { real alpha; array[K] real beta; real<lower=0> sigma; }
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  sigma ~ cauchy(0, 2.5);
  for (t in (K + 1):T) {
    real mu;
    mu = alpha;
    for (k in 1:K) {
      mu = mu + beta[k] * y[t - k];
    }
    y[t] ~ normal(mu, sigma);
  }
}
"""


def ark_ref(z, K=2, y=Y5):
    alpha, beta = z[0], z[1 : 1 + K]
    sigma, lj = lower0(z[1 + K])
    lp = stats.norm.logpdf(alpha, 0, 10) + stats.norm.logpdf(beta, 0, 10).sum()
    lp += stats.cauchy.logpdf(sigma, 0, 2.5)
    for t in range(K, len(y)):
        mu = alpha + sum(beta[k] * y[t - k - 1] for k in range(K))
        lp += stats.norm.logpdf(y[t], mu, sigma)
    return lp + lj


GARCH = """
data { int<lower=0> T; array[T] real y; real<lower=0> sigma1; }
parameters {
  real mu;
  real<lower=0> alpha0;
  real<lower=0, upper=1> alpha1;
  real<lower=0, upper=(1 - alpha1)> beta1;
}
model {
  array[T] real sigma;
  sigma[1] = sigma1;
  for (t in 2:T) {
    sigma[t] = sqrt(alpha0 + alpha1 * square(y[t - 1] - mu) + beta1 * square(sigma[t - 1]));
  }
  y ~ normal(mu, sigma);
}
"""


def garch_ref(z, y=Y5, sigma1=0.7):
    mu = z[0]
    alpha0, lj0 = lower0(z[1])
    alpha1, lj1 = lower_upper(z[2], 0, 1)
    beta1, lj2 = lower_upper(z[3], 0, 1 - alpha1)
    sig = [sigma1]
    for t in range(1, len(y)):
        sig.append(np.sqrt(alpha0 + alpha1 * (y[t - 1] - mu) ** 2 + beta1 * sig[-1] ** 2))
    return stats.norm.logpdf(y, mu, np.array(sig)).sum() + lj0 + lj1 + lj2


TPARAMS = """
data { int N; vector[N] x; vector[N] y; }
parameters { real a; real<lower=0> b; real<lower=0> s; }
transformed parameters {
  vector[N] mu;
  for (n in 1:N) mu[n] = a + b * x[n];
  real scale = s * 2;
}
model {
  a ~ std_normal_placeholder;
}
"""
TPARAMS = TPARAMS.replace(
    "a ~ std_normal_placeholder;", "a ~ normal(0, 1);\n  y ~ normal(mu, scale);"
)


def tparams_ref(z):
    a = z[0]
    b, lj1 = lower0(z[1])
    s, lj2 = lower0(z[2])
    return stats.norm.logpdf(a) + stats.norm.logpdf(Y5, a + b * X5, 2 * s).sum() + lj1 + lj2


IF_DATA = """
data { int N; vector[N] y; int flag; }
parameters { real mu; }
model {
  if (flag == 1) mu ~ normal(0, 1);
  else mu ~ normal(5, 2);
  for (n in 1:N) {
    if (y[n] > 1) y[n] ~ normal(mu, 1);
    else y[n] ~ student_t(3, mu, 1);
  }
}
"""


def if_data_ref(z, flag):
    mu = z[0]
    lp = stats.norm.logpdf(mu, 0, 1) if flag == 1 else stats.norm.logpdf(mu, 5, 2)
    big = Y5 > 1
    lp += stats.norm.logpdf(Y5[big], mu, 1).sum() + stats.t.logpdf(Y5[~big], 3, mu, 1).sum()
    return lp


TERNARY = """
data { int N; vector[N] y; }
parameters { real mu; }
model {
  real s = mu > 0 ? 1 : 2.5;
  y ~ normal(mu, s);
  target += mu < 0.5 ? -mu^2 : -fabs(mu);
}
"""


def ternary_ref(z):
    mu = z[0]
    s = 1.0 if mu > 0 else 2.5
    return stats.norm.logpdf(Y5, mu, s).sum() + (-(mu**2) if mu < 0.5 else -abs(mu))


GROUPS = np.array([1, 2, 3, 1, 2])
MULTI = """
data { int N; int J; array[N] int group; vector[N] y; }
parameters { vector[J] mu; real<lower=0> sigma; }
model {
  mu ~ normal(0, 3);
  sigma ~ lognormal(0, 1);
  y ~ normal(mu[group], sigma);
  target += normal_lpdf(y[2:4] | mu[group[2:4]], 1);
}
"""


def multi_ref(z):
    mu = z[:3]
    sigma, lj = lower0(z[3])
    m = mu[GROUPS - 1]
    return (
        stats.norm.logpdf(mu, 0, 3).sum()
        + stats.lognorm.logpdf(sigma, 1)
        + lj
        + stats.norm.logpdf(Y5, m, sigma).sum()
        + stats.norm.logpdf(Y5[1:4], m[1:4], 1).sum()
    )


TARGET = """
data { int N; vector[N] y; }
parameters { real mu; real<lower=-1, upper=3> s; }
model {
  target += normal_lpdf(mu | 0, 1);
  target += normal_lpdf(y | mu, s + 1.5);
  target += gamma_lpdf(s + 1 | 2, 1);
}
"""


def target_ref(z):
    mu = z[0]
    s, lj = lower_upper(z[1], -1, 3)
    return (
        stats.norm.logpdf(mu)
        + stats.norm.logpdf(Y5, mu, s + 1.5).sum()
        + stats.gamma.logpdf(s + 1, 2)
        + lj
    )


DATA = {"N": 5, "x": X5, "y": Y5, "K": 2, "T": 5, "sigma1": 0.7, "J": 3, "group": GROUPS, "flag": 1}

MODELS = {
    "regression": (REGRESSION, regression_ref),
    "arK": (ARK, ark_ref),
    "garch": (GARCH, garch_ref),
    "tparams": (TPARAMS, tparams_ref),
    "if_data": (IF_DATA, lambda z: if_data_ref(z, 1)),
    "ternary": (TERNARY, ternary_ref),
    "multi_index": (MULTI, multi_ref),
    "target": (TARGET, target_ref),
}


def model_data(src: str) -> dict:
    data_block = src.split("parameters")[0]
    return {k: v for k, v in DATA.items() if f" {k};" in data_block}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_log_joint_matches_scipy(name):
    src, ref = MODELS[name]
    model = compile_src(src, model_data(src))
    zeta = points(model, 6, seed=1)
    expected = np.array([ref(z) for z in zeta])
    np.testing.assert_allclose(lj_rows(model, zeta), expected, rtol=1e-9, atol=1e-9)


def test_if_on_data_other_branch():
    data = dict(model_data(IF_DATA), flag=0)
    model = compile_src(IF_DATA, data)
    zeta = points(model, 3)
    np.testing.assert_allclose(lj_rows(model, zeta), [if_data_ref(z, 0) for z in zeta])


def test_transformed_parameters_values():
    model = compile_src(TPARAMS, model_data(TPARAMS))
    zeta = points(model, 4)
    draws = model.constrained_draws(zeta, np.random.default_rng(0))
    expected = zeta[:, :1] + np.exp(zeta[:, 1:2]) * X5
    np.testing.assert_allclose(draws["mu"], expected)
    np.testing.assert_allclose(draws["scale"], 2 * np.exp(zeta[:, 2]))


SIMPLEX = """
data { int K; vector[K] alpha; }
parameters { simplex[K] theta; }
model { theta ~ dirichlet(alpha); }
"""


def test_simplex_dirichlet_with_numerical_jacobian():
    alpha = np.array([1.5, 2.0, 0.7, 3.0])
    model = compile_src(SIMPLEX, {"K": 4, "alpha": alpha})
    assert model.dim == 3
    zeta = points(model, 4)
    rng = np.random.default_rng(0)
    theta = model.constrained_draws(zeta, rng)["theta"]
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.all(theta > 0)

    def first_k1(u):
        return model.constrained_draws(u[None, :], rng)["theta"][0, :3]

    h = 1e-6
    for z, th, lp in zip(zeta, theta, lj_rows(model, zeta), strict=True):
        jac = np.column_stack(
            [(first_k1(z + h * e) - first_k1(z - h * e)) / (2 * h) for e in np.eye(3)]
        )
        log_jac = np.linalg.slogdet(jac)[1]
        assert lp == pytest.approx(stats.dirichlet.logpdf(th, alpha) + log_jac, rel=1e-6)


# ---- (c) vectorised loops == sequential loops ----------------------------------------------------

LOOPS = {
    "matrix_rows": (
        """
data { int N; matrix[N, 2] X; vector[N] y; }
parameters { vector[2] b; real<lower=0> s; }
model {
  b ~ normal(0, 1);
  for (n in 1:N) y[n] ~ normal(X[n] * b, s);
  for (n in 1:N) target += normal_lpdf(y[n] | dot_product(X[n], b) + X[n, 1] * b[2], s + 1);
}
""",
        {"N": 5, "X": np.column_stack([X5, Y5]), "y": Y5},
    ),
    "locals_and_nested": (ARK, {"K": 2, "T": 5, "y": Y5}),
    "element_assignment": (
        """
data { int N; vector[N] x; array[N] int g; }
parameters { vector[3] mu; real<lower=0> s; }
transformed parameters {
  vector[N] eta;
  array[N] vector[2] pairs;
  for (n in 1:N) {
    eta[n] = mu[g[n]] + x[n] * s;
    pairs[n] = [eta[n], exp(eta[n])]';
  }
}
model {
  mu ~ normal(0, 1);
  x ~ normal(eta, 1);
  for (n in 1:N) pairs[n] ~ normal(0, 10);
  for (j in 1:3) target += -square(mu[j] - j) * s;
}
""",
        {"N": 5, "x": X5, "g": GROUPS},
    ),
    "recurrence": (GARCH, {"T": 5, "y": Y5, "sigma1": 0.7}),
    "ternary_in_loop": (
        """
data { int N; vector[N] y; }
parameters { real mu; real<lower=0> s; }
model {
  for (n in 1:N) y[n] ~ normal(y[n] > 1 ? mu : -mu, n % 2 == 0 ? s : 2 * s);
}
""",
        {"N": 5, "y": Y5},
    ),
    "break_in_loop": (
        """
data { int N; vector[N] y; }
parameters { real mu; }
model {
  for (n in 1:N) { if (n > 3) break; y[n] ~ normal(mu, 1); }
  for (n in 1:N) { if (y[n] < 0) continue; target += -fabs(y[n] - mu); }
}
""",
        {"N": 5, "y": Y5},
    ),
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_vectorised_equals_sequential(name):
    src, data = LOOPS[name]
    fast = compile_src(src, data)
    slow = compile_src(src, data, vectorise=False)
    zeta = points(fast, 6, seed=3)
    np.testing.assert_allclose(lj_rows(fast, zeta), lj_rows(slow, zeta), rtol=1e-12, atol=1e-12)
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    da, db = fast.constrained_draws(zeta, rng_a), slow.constrained_draws(zeta, rng_b)
    assert da.keys() == db.keys()
    for key in da:
        np.testing.assert_allclose(da[key], db[key], rtol=1e-12, err_msg=key)


def test_single_sample_equals_batch():
    src, data = LOOPS["element_assignment"]
    model = compile_src(src, data)
    zeta = points(model, 5, seed=4)
    batch = lj_rows(model, zeta)
    one = np.concatenate([lj_rows(model, zeta[i : i + 1]) for i in range(5)])
    np.testing.assert_allclose(batch, one, rtol=1e-12)


# ---- (d) gradients against finite differences ----------------------------------------------------


@pytest.mark.parametrize("name", ["garch", "multi_index", "tparams"])
def test_gradient_matches_finite_differences(name):
    src, _ = MODELS[name]
    model = compile_src(src, model_data(src))
    z0 = points(model, 1, seed=5)[0] * 0.5
    grad = autograd.grad(lambda z: anp.sum(model.log_joint(z[None, :])))(z0)
    h = 1e-5
    fd = np.array(
        [
            (lj_rows(model, (z0 + h * e)[None]) - lj_rows(model, (z0 - h * e)[None]))[0] / (2 * h)
            for e in np.eye(model.dim)
        ]
    )
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-6)


def test_batched_gradient_is_per_sample():
    src, _ = MODELS["regression"]
    model = compile_src(src, model_data(src))
    zeta = points(model, 3, seed=6)
    g = autograd.grad(lambda z: anp.sum(model.log_joint(z)))(zeta)
    for i in range(3):
        gi = autograd.grad(lambda z: anp.sum(model.log_joint(z[None, :])))(zeta[i])
        np.testing.assert_allclose(g[i], gi, rtol=1e-10)


# ---- (e) run-time errors -------------------------------------------------------------------------


def runtime_error(src: str, data: dict | None = None) -> str:
    with pytest.raises(ModelError) as info:
        model = compile_src(src, data)
        model.log_joint(points(model, 2))
    msg = str(info.value)
    assert msg.startswith("test.model:")
    return msg


def test_index_out_of_range():
    msg = runtime_error(
        "data { int N; vector[N] y; } parameters { real mu; } model { mu ~ normal(y[7], 1); }",
        {"N": 5, "y": Y5},
    )
    assert "test.model:1:" in msg and "index 7 out of range 1..5" in msg and "'y'" in msg
    msg = runtime_error(
        """data { int N; vector[N] y; } parameters { real mu; }
model {
  for (n in 1:N) y[n] ~ normal(y[n + 1], 1);
}""",
        {"N": 5, "y": Y5},
    )
    assert msg.startswith("test.model:3:") and "out of range 1..5" in msg


def test_index_out_of_range_in_assignment():
    msg = runtime_error("""parameters { real mu; }
model {
  vector[3] v;
  for (i in 1:4) v[i] = mu;
  v ~ normal(0, 1);
}""")
    assert msg.startswith("test.model:4:") and "out of range 1..3" in msg


def test_size_mismatch_in_assignment_to_declared_vector():
    msg = runtime_error(
        """data { int N; vector[N] y; } parameters { real mu; }
model {
  vector[3] v;
  v = y;
  v ~ normal(mu, 1);
}""",
        {"N": 5, "y": Y5},
    )
    assert (
        msg.startswith("test.model:4:") and "size mismatch" in msg and "[3]" in msg and "[5]" in msg
    )
    msg = runtime_error(
        "data { int N; vector[N] y; } parameters { real mu; } model { vector[2] v = y; }",
        {"N": 5, "y": Y5},
    )
    assert "size mismatch: 'v' is declared with dimensions [2] but the value has [5]" in msg


def test_other_runtime_errors():
    assert "integer division by zero" in runtime_error(
        "data { int N; } parameters { real mu; } model { int k = N / 0; mu ~ normal(k, 1); }",
        {"N": 5},
    )
    assert "size must not be negative" in runtime_error(
        "data { int N; } parameters { real mu; } model { vector[N - 9] v; mu ~ normal(0, 1); }",
        {"N": 5},
    )
    assert "tail of length 9 out of range 1..5" in runtime_error(
        "data { int N; vector[N] y; } parameters { real mu; }\n"
        "model { tail(y, 9) ~ normal(mu, 1); }",
        {"N": 5, "y": Y5},
    )
    assert "column 0 out of range" in runtime_error(
        "parameters { real mu; }\n"
        "model { matrix[2, 2] m = rep_matrix(mu, 2, 2); target += sum(col(m, 0)); }"
    )
    assert "sizes do not match" in runtime_error(
        "data { int N; vector[N] y; } parameters { vector[3] mu; } model { y ~ normal(mu, 1); }",
        {"N": 5, "y": Y5},
    )


def test_regression_container_bound_with_wrong_size():
    # bug: a data vector bound of the wrong length crashed with a numpy broadcasting ValueError
    with pytest.raises(
        ModelError, match="lower bound of 'b' has dimensions \\[3\\] but 'b' has dimensions \\[4\\]"
    ):
        compile_src(
            "data { int N; vector[N] lo; } parameters { vector<lower=lo>[N + 1] b; } model { }",
            {"N": 3, "lo": [0.0, 1.0, 2.0]},
        )
    # the right size works and respects the bound elementwise
    model = compile_src(
        "data { int N; vector[N] lo; } parameters { vector<lower=lo>[N] b; } model { }",
        {"N": 3, "lo": [0.0, 1.0, 2.0]},
    )
    b = model.constrained_draws(points(model, 4), np.random.default_rng(0))["b"]
    assert np.all(b > np.array([0.0, 1.0, 2.0]))


def test_regression_integer_comparison_with_zero():
    # bug: comparing two integers computed a / b eagerly, so `n % 2 == 0` raised "division by zero"
    src = """data { int N; } parameters { real mu; }
model {
  int evens = 0;
  for (n in 1:N) { if (n % 2 == 0) evens += 1; }
  mu ~ normal(evens, 1);
  target += (0 == 0) + (N ./ 2);
}"""
    model = compile_src(src, {"N": 5}, vectorise=False)
    zeta = points(model, 3)
    np.testing.assert_allclose(lj_rows(model, zeta), stats.norm.logpdf(zeta[:, 0], 2, 1) + 1 + 2.5)


def test_regression_cbrt_is_differentiable():
    # bug: cbrt used np.cbrt, which autograd cannot differentiate
    g = autograd.grad(lambda x: anp.sum(call("cbrt", [x], [VECTOR])))(np.array([[8.0, -27.0]]))
    np.testing.assert_allclose(g, [[1 / 12, 1 / 27]])


def test_reductions_of_containers_are_scalars_in_batched_arithmetic():
    """Regression: `sum(matrix)` was typed as a matrix, so `-log_determinant(S) - sum(S)` summed
    over the draws of a batch as well (right for one draw, wrong for several)."""
    text = """
    parameters { real<lower=0> s; }
    model {
      matrix[2, 2] Sigma = diag_matrix(rep_vector(s, 2));
      target += -log_determinant(Sigma) - sum(Sigma);
    }
    """
    model = CompiledModel(check(parse(text, "t.model")), {})
    zeta = np.array([[0.0], [1.0], [2.0]])
    s = np.exp(zeta[:, 0])
    expected = -2 * np.log(s) - 2 * s + zeta[:, 0]  # log-Jacobian of the lower=0 transform
    np.testing.assert_allclose(model.log_joint(zeta), expected, rtol=1e-12)


def test_to_matrix_of_an_array_of_vectors_and_add_diag():
    text = """
    data { int N; int D; array[N] vector[D] y; }
    transformed data {
      matrix[D, D] yty = crossprod(to_matrix(y));
      matrix[D, D] a = add_diag(yty, 2.5);
      matrix[D, D] b = add_diag(yty, [1, 2]');
    }
    parameters { real mu; }
    model { mu ~ normal(0, 1); }
    """
    y = np.arange(6.0).reshape(3, 2)
    data = {"N": np.asarray(3), "D": np.asarray(2), "y": y}
    model = CompiledModel(check(parse(text, "t.model")), data)
    np.testing.assert_allclose(model.data["yty"], y.T @ y)
    np.testing.assert_allclose(model.data["a"], y.T @ y + 2.5 * np.eye(2))
    np.testing.assert_allclose(model.data["b"], y.T @ y + np.diag([1.0, 2.0]))


def test_column_slice_assignment_into_a_declared_matrix():
    # regression: `Xs[:, k] = ...` into a declared, unassigned matrix failed ("tuple index out
    # of range"): the slice path did not create the rows the single-index path creates
    text = """
    data { int N; int K; matrix[N, K] X; }
    transformed data {
      matrix[N, K] Xs;
      for (k in 1:K) Xs[:, k] = X[:, k] - mean(X[:, k]);
    }
    parameters { real m; } model { m ~ normal(0, 1); }
    """
    X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]])
    model = CompiledModel(check(parse(text, "t.model")), {"N": 3, "K": 2, "X": X})
    np.testing.assert_allclose(model.data["Xs"], X - X.mean(axis=0))
