"""The matrix, special, array and GP-kernel functions of ppl.library.functions_linalg /
functions_extra:
values against numpy / scipy or a closed form, over a leading batch axis of draws, and
gradients against central finite differences."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
import scipy.linalg
from autograd import grad
from scipy import special

from ppl.language.types import INT, MATRIX, REAL, ROW_VECTOR, VECTOR, SType
from ppl.library.functions import LIBRARY

ARRAY = SType("real", "scalar", 1)
ARRAY_VEC = SType("real", "vector", 1)


def call(name, *args_and_types):
    args = list(args_and_types[0::2])
    types = list(args_and_types[1::2])
    return LIBRARY[name].impl(args, types)


def fd_check(f, x, rng, h=1e-6, rtol=1e-5, atol=1e-8):
    """Directional derivative of sum(f) by autograd against a central difference."""
    d = rng.normal(size=np.shape(x))
    g = grad(lambda a: anp.sum(f(a)))(x)
    fd = (np.sum(f(x + h * d)) - np.sum(f(x - h * d))) / (2 * h)
    np.testing.assert_allclose(np.sum(g * d), fd, rtol=rtol, atol=atol)


RNG = np.random.default_rng(0)


# ---- decompositions ---------------------------------------------------------------------------


def test_qr_thin_follows_stans_sign_convention_over_a_batch():
    A = RNG.normal(size=(4, 6, 3))
    Q = call("qr_thin_Q", A, MATRIX)
    R = call("qr_thin_R", A, MATRIX)
    assert Q.shape == (4, 6, 3) and R.shape == (4, 3, 3)
    np.testing.assert_allclose(Q @ R, A, atol=1e-12)
    np.testing.assert_allclose(
        np.swapaxes(Q, -1, -2) @ Q, np.broadcast_to(np.eye(3), (4, 3, 3)), atol=1e-12
    )
    assert np.all(np.diagonal(R, axis1=-2, axis2=-1) > 0)
    np.testing.assert_allclose(np.tril(R, -1), 0.0)
    # full decomposition of a square matrix equals the thin one
    S = RNG.normal(size=(3, 3))
    np.testing.assert_allclose(call("qr_Q", S, MATRIX), call("qr_thin_Q", S, MATRIX))
    Qf = call("qr_Q", A[0], MATRIX)
    assert Qf.shape == (6, 6)
    np.testing.assert_allclose(Qf @ call("qr_R", A[0], MATRIX), A[0], atol=1e-12)


def test_qr_thin_gradients():
    A = RNG.normal(size=(5, 3))
    W = RNG.normal(size=(5, 3))
    fd_check(lambda a: W * call("qr_thin_Q", a, MATRIX), A, RNG)
    fd_check(lambda a: W[:3] * call("qr_thin_R", a, MATRIX), A, RNG)
    S = RNG.normal(size=(3, 3))
    fd_check(lambda a: W[:3] * call("qr_R", a, MATRIX), S, RNG)


def test_eigen_and_singular_values():
    B = RNG.normal(size=(3, 4, 4))
    S = B @ np.swapaxes(B, -1, -2)
    vals = call("eigenvalues_sym", S, MATRIX)
    vecs = call("eigenvectors_sym", S, MATRIX)
    np.testing.assert_allclose(vals, np.stack([scipy.linalg.eigvalsh(s) for s in S]), rtol=1e-10)
    np.testing.assert_allclose(S @ vecs, vecs * vals[:, None, :], atol=1e-10)
    fd_check(lambda a: call("eigenvalues_sym", a, MATRIX) ** 2, S[0], RNG, rtol=1e-4)
    sv = call("singular_values", B, MATRIX)
    np.testing.assert_allclose(sv, np.linalg.svd(B, compute_uv=False))
    U, V = call("svd_U", B[0], MATRIX), call("svd_V", B[0], MATRIX)
    np.testing.assert_allclose(U @ np.diag(sv[0]) @ V.T, B[0], atol=1e-12)


@pytest.mark.parametrize("scale", [0.1, 1.0, 30.0])  # 30: several squarings
def test_matrix_exp_matches_scipy_and_differentiates(scale):
    A = RNG.normal(size=(2, 4, 4)) * scale
    got = call("matrix_exp", A, MATRIX)
    expected = np.stack([scipy.linalg.expm(a) for a in A])
    np.testing.assert_allclose(
        got, expected, rtol=1e-10 if scale < 10 else 1e-8, atol=1e-12 * np.abs(expected).max()
    )
    W = RNG.normal(size=(4, 4))
    fd_check(
        lambda a: W * call("matrix_exp", a, MATRIX) / np.abs(expected).max(),
        A[0],
        RNG,
        h=1e-7 / scale,
        rtol=1e-4,
    )
    B = RNG.normal(size=(4, 2))
    np.testing.assert_allclose(
        call("matrix_exp_multiply", A[0], MATRIX, B, MATRIX), expected[0] @ B, rtol=1e-8
    )
    t = 0.3
    np.testing.assert_allclose(
        call("scale_matrix_exp_multiply", t, REAL, A[0], MATRIX, B, MATRIX),
        scipy.linalg.expm(t * A[0]) @ B,
        rtol=1e-8,
    )


def test_matrix_power_traces_and_quadratic_forms():
    A = RNG.normal(size=(3, 3))
    B = RNG.normal(size=(3, 2))
    D = RNG.normal(size=(2, 2))
    v = RNG.normal(size=3)
    for k in (0, 1, 5):
        np.testing.assert_allclose(
            call("matrix_power", A, MATRIX, k, INT), np.linalg.matrix_power(A, k), rtol=1e-12
        )
    assert np.isclose(call("trace", A, MATRIX), np.trace(A))
    assert np.isclose(call("trace_quad_form", A, MATRIX, B, MATRIX), np.trace(B.T @ A @ B))
    assert np.isclose(
        call("trace_gen_quad_form", D, MATRIX, A, MATRIX, B, MATRIX), np.trace(D @ B.T @ A @ B)
    )
    np.testing.assert_allclose(
        call("quad_form_diag", A, MATRIX, v, VECTOR), np.diag(v) @ A @ np.diag(v)
    )
    Sym = A + A.T
    assert np.isclose(call("quad_form_sym", Sym, MATRIX, v, VECTOR), v @ Sym @ v)
    np.testing.assert_allclose(call("quad_form_sym", Sym, MATRIX, B, MATRIX), B.T @ Sym @ B)
    np.testing.assert_allclose(
        call("symmetrize_from_lower_tri", A, MATRIX), np.tril(A) + np.tril(A, -1).T
    )
    L = np.linalg.cholesky(Sym @ Sym.T + np.eye(3))
    np.testing.assert_allclose(call("chol2inv", L, MATRIX), np.linalg.inv(L @ L.T), rtol=1e-10)
    np.testing.assert_allclose(call("columns_dot_self", B, MATRIX), np.sum(B**2, axis=0))
    np.testing.assert_allclose(call("rows_dot_self", B, MATRIX), np.sum(B**2, axis=1))
    # batched over draws
    As = RNG.normal(size=(5, 3, 3))
    np.testing.assert_allclose(call("trace", As, MATRIX), np.trace(As, axis1=1, axis2=2))
    fd_check(lambda a: call("quad_form_diag", A, MATRIX, a, VECTOR), v, RNG)


def test_blocks_and_constant_containers():
    M = np.arange(20.0).reshape(4, 5)
    np.testing.assert_array_equal(
        call("block", M, MATRIX, 2, INT, 3, INT, 2, INT, 2, INT), M[1:3, 2:4]
    )
    np.testing.assert_array_equal(call("sub_col", M, MATRIX, 2, INT, 5, INT, 3, INT), M[1:4, 4])
    np.testing.assert_array_equal(call("sub_row", M, MATRIX, 4, INT, 2, INT, 3, INT), M[3, 1:4])
    containers = [
        ("ones_vector", "zeros_vector", "one_hot_vector"),
        ("ones_row_vector", "zeros_row_vector", "one_hot_row_vector"),
        ("ones_array", "zeros_array", "one_hot_array"),
        ("ones_int_array", "zeros_int_array", "one_hot_int_array"),
    ]
    for ones_name, zeros_name, one_hot_name in containers:
        ones, zeros = call(ones_name, 3, INT), call(zeros_name, 2, INT)
        np.testing.assert_array_equal(ones, np.ones(3))
        np.testing.assert_array_equal(zeros, np.zeros(2))
        assert np.issubdtype(ones.dtype, np.integer) == ("int" in ones_name)
        np.testing.assert_array_equal(call(one_hot_name, 4, INT, 2, INT), [0, 1, 0, 0])
    np.testing.assert_allclose(call("uniform_simplex", 4, INT), np.full(4, 0.25))
    np.testing.assert_allclose(
        call("linspaced_row_vector", 3, INT, 0.0, REAL, 1.0, REAL), [0, 0.5, 1]
    )


# ---- special functions ------------------------------------------------------------------------


def test_special_functions_match_scipy():
    x = np.array([0.3, 1.7, 4.2])
    n = np.array([2, 1, 3])
    np.testing.assert_allclose(call("lambert_w0", x, VECTOR), special.lambertw(x).real)
    xm = np.array([-0.3, -0.1])
    np.testing.assert_allclose(call("lambert_wm1", xm, VECTOR), special.lambertw(xm, -1).real)
    np.testing.assert_allclose(call("owens_t", x, VECTOR, 0.7, REAL), special.owens_t(x, 0.7))
    for name, ref in [
        ("bessel_first_kind", special.jv),
        ("bessel_second_kind", special.yv),
        ("modified_bessel_first_kind", special.iv),
        ("modified_bessel_second_kind", special.kv),
    ]:
        np.testing.assert_allclose(call(name, n, SType("int", "scalar", 1), x, VECTOR), ref(n, x))
    np.testing.assert_allclose(
        call("log_modified_bessel_first_kind", 1.5, REAL, x, VECTOR), np.log(special.iv(1.5, x))
    )
    np.testing.assert_allclose(call("falling_factorial", x + 3, VECTOR, 2, INT), (x + 3) * (x + 2))
    np.testing.assert_allclose(
        call("log_falling_factorial", x + 3, VECTOR, 2, INT), np.log((x + 3) * (x + 2))
    )
    np.testing.assert_allclose(call("ldexp", x, VECTOR, 3, INT), 8 * x)
    np.testing.assert_allclose(call("rising_factorial", x, VECTOR, 3, INT), special.poch(x, 3))
    np.testing.assert_allclose(
        call("log_rising_factorial", x, VECTOR, 3, INT), np.log(special.poch(x, 3))
    )
    np.testing.assert_allclose(
        call("lmgamma", 3, INT, x + 2, VECTOR), [special.multigammaln(v, 3) for v in x + 2]
    )
    assert call("choose", 7, INT, 3, INT) == 35
    np.testing.assert_allclose(call("inv_erfc", x / 5, VECTOR), special.erfcinv(x / 5))
    np.testing.assert_allclose(
        call("binary_log_loss", np.array([1, 0]), SType("int", "scalar", 1), 0.3, REAL),
        [-np.log(0.3), -np.log(0.7)],
    )


@pytest.mark.parametrize(
    "name, args",
    [
        ("lambert_w0", ()),
        ("owens_t", (0.7,)),
        ("bessel_first_kind", (2,)),
        ("bessel_second_kind", (1,)),
        ("modified_bessel_first_kind", (2,)),
        ("modified_bessel_second_kind", (1,)),
        ("log_modified_bessel_first_kind", (1.5,)),
    ],
)
def test_special_function_gradients(name, args):
    x = np.array([0.3, 1.7, 4.2])
    if name == "owens_t":
        fd_check(lambda a: call(name, a, VECTOR, 0.7, REAL), x, RNG)
        fd_check(lambda a: call(name, x, VECTOR, a, REAL), np.array(0.7), RNG)
    elif args:
        fd_check(
            lambda a: call(name, args[0], INT if isinstance(args[0], int) else REAL, a, VECTOR),
            x,
            RNG,
        )
    else:
        fd_check(lambda a: call(name, a, VECTOR), x, RNG)


# ---- arrays -----------------------------------------------------------------------------------


def test_array_functions():
    v = np.array([3.0, 1.0, 2.0, 1.0])
    np.testing.assert_array_equal(
        call("dims", np.zeros((7, 2, 3)), SType("real", "matrix", 1)), [7, 2, 3]
    )
    np.testing.assert_array_equal(call("dims", np.zeros((5, 2, 3)), MATRIX), [2, 3])  # batched
    np.testing.assert_array_equal(call("reverse", v, VECTOR), v[::-1])
    batch = np.stack([v, 2 * v])
    np.testing.assert_array_equal(call("reverse", batch, VECTOR), batch[:, ::-1])
    np.testing.assert_array_equal(call("append_array", v, ARRAY, v[:2], ARRAY), np.r_[v, v[:2]])
    np.testing.assert_array_equal(
        call("append_array", batch, ARRAY, v[:1], ARRAY), np.c_[batch, [3.0, 3.0]]
    )
    np.testing.assert_array_equal(call("sort_indices_asc", v, VECTOR), [2, 4, 3, 1])
    np.testing.assert_array_equal(call("sort_indices_desc", v, VECTOR), [1, 3, 2, 4])
    assert call("rank", v, VECTOR, 3, INT) == 2
    w = np.array([1.0, -1.0, 0.5, 0.0])
    assert np.isclose(call("squared_distance", v, VECTOR, w, VECTOR), np.sum((v - w) ** 2))
    assert np.isclose(call("distance", v, VECTOR, w, VECTOR), np.linalg.norm(v - w))
    assert np.isclose(call("norm1", w, VECTOR), 2.5)
    fd_check(lambda a: call("distance", a, VECTOR, w, VECTOR), v, RNG)


# ---- Gaussian process kernels -----------------------------------------------------------------


def _pairwise(x1, x2):
    return np.sqrt(np.sum((x1[:, None, :] - x2[None, :, :]) ** 2, axis=-1))


@pytest.mark.parametrize(
    "name, params, formula",
    [
        ("gp_exponential_cov", (1.3, 0.7), lambda d, a, r: a**2 * np.exp(-d / r)),
        (
            "gp_matern32_cov",
            (1.3, 0.7),
            lambda d, a, r: a**2 * (1 + np.sqrt(3) * d / r) * np.exp(-np.sqrt(3) * d / r),
        ),
        (
            "gp_matern52_cov",
            (1.3, 0.7),
            lambda d, a, r: (
                a**2
                * (1 + np.sqrt(5) * d / r + 5 * d**2 / (3 * r**2))
                * np.exp(-np.sqrt(5) * d / r)
            ),
        ),
        (
            "gp_periodic_cov",
            (1.3, 0.7, 2.0),
            lambda d, a, r, p: a**2 * np.exp(-2 * np.sin(np.pi * d / p) ** 2 / r**2),
        ),
    ],
)
def test_gp_kernels(name, params, formula):
    x = RNG.normal(size=(5, 2))
    x2 = RNG.normal(size=(3, 2))
    ptypes = [p for q in params for p in (q, REAL)]
    K = call(name, x, ARRAY_VEC, *ptypes)
    np.testing.assert_allclose(K, formula(_pairwise(x, x), *params), rtol=1e-10, atol=1e-12)
    Kx = call(name, x, ARRAY_VEC, x2, ARRAY_VEC, *ptypes)
    np.testing.assert_allclose(Kx, formula(_pairwise(x, x2), *params), rtol=1e-10)
    # reals as inputs, and a batch of length-scales (draws)
    xs = RNG.normal(size=4)
    rho = np.array([0.5, 1.0, 2.0])
    rest = [p for q in params[2:] for p in (q, REAL)]
    Kb = call(name, xs, ARRAY, params[0], REAL, rho, REAL, *rest)
    assert Kb.shape == (3, 4, 4)
    for i, r in enumerate(rho):
        d = np.abs(xs[:, None] - xs[None, :])
        np.testing.assert_allclose(Kb[i], formula(d, params[0], r, *params[2:]), rtol=1e-10)
    fd_check(lambda r: call(name, xs, ARRAY, params[0], REAL, r, REAL, *rest), rho, RNG)


def test_gp_dot_prod_cov():
    x = RNG.normal(size=(4, 2))
    np.testing.assert_allclose(call("gp_dot_prod_cov", x, ARRAY_VEC, 0.5, REAL), 0.25 + x @ x.T)


def test_every_function_of_these_modules_is_tested_here():
    """tests/runtime/test_evaluator.py counts a function as covered when this file names it."""
    import ppl.library.functions_extra
    import ppl.library.functions_linalg

    text = open(__file__).read()
    for module in (ppl.library.functions_extra, ppl.library.functions_linalg):
        for name, fn in LIBRARY.items():
            cdf = fn.impl.__qualname__.startswith("_cdf_function")  # tests/library/test_cdfs.py
            if fn.impl.__module__ == module.__name__ and not cdf:
                assert f'"{name}"' in text, name


def test_names_are_registered_with_their_type_rules():
    for name in (
        "qr_thin_Q",
        "qr_thin_R",
        "eigenvalues_sym",
        "matrix_exp",
        "gp_matern32_cov",
        "dims",
        "lambert_w0",
        "ones_row_vector",
        "one_hot_int_array",
        "to_array_2d",
    ):
        assert name in LIBRARY
    assert LIBRARY["dims"].type_rule([MATRIX]) == SType("int", "scalar", 1)
    assert LIBRARY["reverse"].type_rule([ROW_VECTOR]) == ROW_VECTOR


def test_triangular_divides_read_the_lower_triangle():
    """mdivide_left_tri_low / mdivide_right_tri_low (ppl.library.cholesky_ops' triangular
    solves): L^-1 b and b L^-1 for vectors and matrices, the upper triangle not read."""
    A = RNG.normal(size=(70, 70))
    L = np.linalg.cholesky(A @ A.T + 70 * np.eye(70))
    junk = L + np.triu(RNG.normal(size=L.shape), 1)
    v, B = RNG.normal(size=70), RNG.normal(size=(70, 3))
    np.testing.assert_allclose(
        call("mdivide_left_tri_low", junk, MATRIX, v, VECTOR), np.linalg.solve(L, v)
    )
    np.testing.assert_allclose(
        call("mdivide_left_tri_low", junk, MATRIX, B, MATRIX), np.linalg.solve(L, B)
    )
    np.testing.assert_allclose(
        call("mdivide_right_tri_low", v, ROW_VECTOR, junk, MATRIX), np.linalg.solve(L.T, v)
    )
    np.testing.assert_allclose(
        call("mdivide_right_tri_low", B.T, MATRIX, junk, MATRIX), np.linalg.solve(L.T, B).T
    )
