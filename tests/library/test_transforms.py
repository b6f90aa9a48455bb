"""Tests for ppl.library.transforms: round trips, supports, log-Jacobians, batching, gradients."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad, jacobian
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ppl.errors import ModelError
from ppl.library.transforms import (
    CholeskyFactorCov,
    Identity,
    LowerBound,
    LowerUpperBound,
    OffsetMultiplier,
    UpperBound,
    make_transform,
)

# (kind, bounds, constrained event shape)
CASES = [
    ("identity", {}, (3,)),
    ("lower", {"lower": 0.0}, (3,)),
    ("lower", {"lower": -2.5}, (3,)),
    ("upper", {"upper": 1.5}, (3,)),
    ("lower_upper", {"lower": -3.0, "upper": 5.0}, (3,)),
    ("lower_upper", {"lower": 0.0, "upper": 1.0}, (3,)),
    (
        "lower_upper",
        {"lower": np.array([-1.0, -np.inf, 0.0]), "upper": np.array([2.0, 1.0, np.inf])},
        (3,),
    ),
    ("lower", {"lower": np.array([-np.inf, 1.0, 0.0])}, (3,)),
    ("offset_multiplier", {"offset": 1.5, "multiplier": 2.5}, (3,)),
    ("simplex", {}, (1,)),
    ("simplex", {}, (2,)),
    ("simplex", {}, (5,)),
    ("ordered", {}, (1,)),
    ("ordered", {}, (4,)),
    ("positive_ordered", {}, (4,)),
    ("positive_ordered", {}, (1,)),
    ("sum_to_zero_vector", {}, (2,)),
    ("sum_to_zero_vector", {}, (5,)),
    ("cholesky_factor_corr", {}, (1, 1)),
    ("cholesky_factor_corr", {}, (2, 2)),
    ("cholesky_factor_corr", {}, (4, 4)),
    ("cholesky_factor_cov", {}, (3, 3)),
    ("cov_matrix", {}, (1, 1)),
    ("cov_matrix", {}, (3, 3)),
    ("corr_matrix", {}, (2, 2)),
    ("corr_matrix", {}, (3, 3)),
    ("corr_matrix", {}, (4, 4)),
]
IDS = [f"{k}-{i}" for i, (k, _, _) in enumerate(CASES)]


#: constants of the log-Jacobian that Stan (and ppl) leave out, as functions of the shape: the
#: sum-to-zero map x = H u has |det H[:-1]| = 1 / sqrt(K), H's columns and 1 / sqrt(K) being an
#: orthonormal basis of R^K
OMITTED_CONSTANT = {"sum_to_zero_vector": lambda shape: -0.5 * np.log(shape[-1])}


def _expected_log_jacobian(kind, shape, log_jacobian):
    return log_jacobian + OMITTED_CONSTANT.get(kind, lambda shape: 0.0)(shape)


def _free(kind: str, x: np.ndarray) -> np.ndarray:
    """The free coordinates of a constrained value (its image is locally a bijection)."""
    if kind in ("simplex", "sum_to_zero_vector"):
        return x[..., :-1]
    if kind in ("cholesky_factor_corr", "corr_matrix"):
        r, c = np.tril_indices(x.shape[-1], -1)
        return x[..., r, c]
    if kind in ("cholesky_factor_cov", "cov_matrix"):
        r, c = np.tril_indices(x.shape[-2], 0, x.shape[-1])
        return x[..., r, c]
    return x


def _ushape(kind, bounds, shape):
    return make_transform(kind, **bounds).unconstrained_shape(shape)


# ---------------------------------------------------------------- round trip and support


@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_roundtrip_and_support(kind, bounds, shape, data):
    t = make_transform(kind, **bounds)
    ushape = t.unconstrained_shape(shape)
    # matrix kinds square exp(u) values: keep their round trip within float64 precision
    lim = 3.0 if kind in ("cholesky_factor_corr", "corr_matrix", "cov_matrix") else 6.0
    u = data.draw(arrays(float, ushape, elements=st.floats(-lim, lim)))
    x, lj = t.forward(u, len(shape))
    assert x.shape == shape
    assert np.ndim(lj) == 0 and np.isfinite(lj)
    assert t.in_support(x)
    np.testing.assert_allclose(t.inverse(x), u, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
def test_log_jacobian_matches_autograd_determinant(kind, bounds, shape):
    t = make_transform(kind, **bounds)
    rng = np.random.default_rng(0)
    u = rng.normal(size=t.unconstrained_shape(shape))
    if u.size == 0:
        assert float(t.forward(u, len(shape))[1]) == 0.0
        return
    flat = u.ravel()

    def free_map(v):
        return _free(kind, t.forward(anp.reshape(v, u.shape), len(shape))[0]).ravel()

    jac = jacobian(free_map)(flat)
    assert jac.shape == (flat.size, flat.size)
    _, logdet = np.linalg.slogdet(jac)
    lj = _expected_log_jacobian(kind, shape, t.forward(u, len(shape))[1])
    np.testing.assert_allclose(lj, logdet, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
def test_log_jacobian_matches_finite_differences(kind, bounds, shape):
    t = make_transform(kind, **bounds)
    u = np.random.default_rng(1).normal(size=t.unconstrained_shape(shape)).ravel()
    h = 1e-6
    cols = []
    for i in range(u.size):
        e = np.zeros(u.size)
        e[i] = h
        xp = _free(kind, t.forward((u + e).reshape(t.unconstrained_shape(shape)), len(shape))[0])
        xm = _free(kind, t.forward((u - e).reshape(t.unconstrained_shape(shape)), len(shape))[0])
        cols.append((xp - xm).ravel() / (2 * h))
    if not cols:
        return
    _, logdet = np.linalg.slogdet(np.stack(cols, axis=1))
    lj = t.forward(u.reshape(t.unconstrained_shape(shape)), len(shape))[1]
    np.testing.assert_allclose(
        _expected_log_jacobian(kind, shape, lj), logdet, rtol=1e-6, atol=1e-7
    )


# ---------------------------------------------------------------- batching


@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
def test_batched_equals_single(kind, bounds, shape):
    t = make_transform(kind, **bounds)
    s = 7
    u = np.random.default_rng(2).normal(size=(s,) + t.unconstrained_shape(shape))
    x, lj = t.forward(u, len(shape))
    assert x.shape == (s,) + shape and lj.shape == (s,)
    for i in range(s):
        xi, lji = t.forward(u[i], len(shape))
        np.testing.assert_allclose(x[i], xi, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(lj[i], lji, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("kind", "bounds"), [("simplex", {}), ("cholesky_factor_corr", {})])
def test_extra_type_axes_are_summed(kind, bounds):
    """array[3] simplex[4]: event_ndim counts the array axis too."""
    t = make_transform(kind, **bounds)
    core = (4,) if kind == "simplex" else (3, 3)
    u = np.random.default_rng(3).normal(size=(5, 3) + t.unconstrained_shape(core))
    x, lj = t.forward(u, 1 + len(core))
    assert x.shape == (5, 3) + core and lj.shape == (5,)
    np.testing.assert_allclose(lj, t.forward(u, len(core))[1].sum(axis=1))


def test_elementwise_event_ndim():
    t = make_transform("lower", lower=0.0)
    u = np.random.default_rng(4).normal(size=(6, 5))
    x, lj = t.forward(u, 1)
    assert x.shape == (6, 5) and lj.shape == (6,)
    np.testing.assert_allclose(lj, u.sum(axis=1))
    x0, lj0 = t.forward(u, 0)
    assert lj0.shape == (6, 5)


def test_bounds_with_sample_axis():
    s = 4
    rng = np.random.default_rng(5)
    alpha = rng.uniform(0.1, 0.9, size=s)
    upper = 1.0 - alpha
    t = make_transform("lower_upper", lower=0.0, upper=upper)
    u = rng.normal(size=s)
    x, lj = t.forward(u, 0)
    assert x.shape == (s,) and lj.shape == (s,)
    assert np.all((x > 0) & (x < upper))
    for i in range(s):
        xi, lji = make_transform("lower_upper", lower=0.0, upper=upper[i]).forward(u[i], 0)
        np.testing.assert_allclose([x[i], lj[i]], [xi, lji], rtol=1e-12)
    np.testing.assert_allclose(t.inverse(x), u, rtol=1e-9)
    # vector<lower=L>[n] with L of shape (S, n), (1, n) and (S, 1)
    u2 = rng.normal(size=(s, 3))
    for lshape in [(s, 3), (1, 3), (s, 1)]:
        low = rng.normal(size=lshape)
        x2, lj2 = make_transform("lower", lower=low).forward(u2, 1)
        assert x2.shape == (s, 3) and lj2.shape == (s,)
        np.testing.assert_allclose(x2, np.exp(u2) + low)
        np.testing.assert_allclose(lj2, u2.sum(axis=1))


# ---------------------------------------------------------------- gradients


def _fd_grad(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
def test_gradient_wrt_u(kind, bounds, shape):
    t = make_transform(kind, **bounds)
    u = np.random.default_rng(6).normal(size=(2,) + t.unconstrained_shape(shape))

    def f(v):
        x, lj = t.forward(v, len(shape))
        return anp.sum(lj) + anp.sum(anp.sin(x))  # exercise both outputs

    np.testing.assert_allclose(grad(f)(u), _fd_grad(f, u), rtol=1e-5, atol=1e-6)


BOUND_GRAD_CASES = [
    ("lower", ("lower",), {"lower": np.array([0.3, -1.0])}),
    ("upper", ("upper",), {"upper": np.array([0.3, 2.0])}),
    (
        "lower_upper",
        ("lower", "upper"),
        {"lower": np.array([-1.0, 0.2]), "upper": np.array([2.0, 0.9])},
    ),
    (
        "offset_multiplier",
        ("offset", "multiplier"),
        {"offset": np.array([1.0, -2.0]), "multiplier": np.array([0.5, 3.0])},
    ),
]


@pytest.mark.parametrize(("kind", "names", "bounds"), BOUND_GRAD_CASES)
def test_gradient_wrt_bounds(kind, names, bounds):
    u = np.array([[0.4, -1.2], [2.0, 0.1], [-3.0, 0.7]])
    for name in names:

        def f(b, name=name):
            t = make_transform(kind, **{**bounds, name: b})
            x, lj = t.forward(u, 1)
            return anp.sum(lj) + anp.sum(x**2)

        b0 = bounds[name]
        np.testing.assert_allclose(grad(f)(b0), _fd_grad(f, b0), rtol=1e-5, atol=1e-6)


def test_gradient_wrt_sample_dependent_upper():
    """garch: real<lower=0, upper=(1 - alpha1)> beta1, gradient flows back to alpha1."""
    u = np.array([0.3, -0.5, 1.1, 2.0])

    def f(alpha):
        t = make_transform("lower_upper", lower=0.0, upper=1.0 - alpha)
        x, lj = t.forward(u, 0)
        return anp.sum(lj + x)

    a0 = np.array([0.1, 0.5, 0.2, 0.7])
    np.testing.assert_allclose(grad(f)(a0), _fd_grad(f, a0), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- stability and reductions


@pytest.mark.filterwarnings("ignore:Output seems independent of input")
@pytest.mark.parametrize(("kind", "bounds", "shape"), CASES, ids=IDS)
def test_extreme_u_gives_no_nan(kind, bounds, shape):
    t = make_transform(kind, **bounds)
    for val in (-700.0, 700.0):
        u = np.full((2,) + t.unconstrained_shape(shape), val)
        with np.errstate(over="ignore"):
            x, lj = t.forward(u, len(shape))
            g = grad(lambda v: anp.sum(t.forward(v, len(shape))[1]))(u)
        assert not np.any(np.isnan(x)) and not np.any(np.isnan(lj)) and not np.any(np.isnan(g))


def test_lower_upper_log_jacobian_closed_form():
    u = np.array([-40.0, -1.0, 0.0, 3.0, 40.0])
    _, lj = make_transform("lower_upper", lower=-3.0, upper=5.0).forward(u, 0)
    sig = 1 / (1 + np.exp(-u))
    with np.errstate(divide="ignore"):
        expected = np.log(8.0) + np.log(sig) + np.log1p(-sig)
    expected[[0, -1]] = np.log(8.0) - 40.0 - 2 * np.log1p(np.exp(-40.0))
    np.testing.assert_allclose(lj, expected, rtol=1e-12)


def test_simplex_matches_stan_loop():
    u = np.array([0.3, -1.0, 2.0])
    k = 4
    x, stick, lp = np.zeros(k), 1.0, 0.0
    for i in range(k - 1):
        adj = u[i] - np.log(k - 1 - i)
        z = 1 / (1 + np.exp(-adj))
        x[i] = stick * z
        lp += np.log(stick) + np.log(z) + np.log1p(-z)
        stick -= x[i]
    x[-1] = stick
    xt, lj = make_transform("simplex").forward(u, 1)
    np.testing.assert_allclose(xt, x, rtol=1e-12)
    np.testing.assert_allclose(lj, lp, rtol=1e-12)
    np.testing.assert_allclose(make_transform("simplex").forward(np.zeros(3), 1)[0], 0.25)


def test_cholesky_corr_matches_stan_loop():
    u = np.array([0.3, -1.0, 0.5, 0.8, -0.2, 1.1])
    k = 4
    z = np.tanh(u)
    lp = np.sum(np.log1p(-(z**2)))
    x = np.zeros((k, k))
    x[0, 0] = 1.0
    pos = 0
    for i in range(1, k):
        x[i, 0] = z[pos]
        pos += 1
        ss = x[i, 0] ** 2
        for j in range(1, i):
            lp += 0.5 * np.log1p(-ss)
            x[i, j] = z[pos] * np.sqrt(1 - ss)
            pos += 1
            ss += x[i, j] ** 2
        x[i, i] = np.sqrt(1 - ss)
    xt, lj = make_transform("cholesky_factor_corr").forward(u, 2)
    np.testing.assert_allclose(xt, x, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lj, lp, rtol=1e-12)


def test_reductions_and_supports():
    inf = np.inf
    assert isinstance(make_transform("lower", lower=-inf), Identity)
    assert isinstance(make_transform("lower_upper", lower=-inf, upper=inf), Identity)
    assert isinstance(make_transform("lower_upper", lower=-inf, upper=2.0), UpperBound)
    assert isinstance(make_transform("lower_upper", lower=1.0, upper=inf), LowerBound)
    assert isinstance(make_transform("lower_upper", lower=1.0, upper=2.0), LowerUpperBound)
    assert isinstance(make_transform("offset_multiplier", multiplier=2.0), OffsetMultiplier)
    assert make_transform("lower", lower=0.0).support == "positive"
    assert make_transform("lower", lower=1.0).support == "lower"
    assert make_transform("upper", upper=1.0).support == "upper"
    assert make_transform("lower_upper", lower=0.0, upper=1.0).support == "unit"
    assert make_transform("lower_upper", lower=0.0, upper=2.0).support == "interval"
    assert make_transform("identity").support == "real"
    assert make_transform("simplex").support == "simplex"
    assert make_transform("ordered").support == "ordered"
    u = np.array([0.5, -700.0, 700.0])
    x, lj = make_transform("lower", lower=-inf).forward(u, 1)
    np.testing.assert_array_equal(x, u)
    assert lj == 0.0


def test_shapes():
    assert make_transform("simplex").unconstrained_shape((7, 5)) == (7, 4)
    assert make_transform("cholesky_factor_corr").unconstrained_shape((4, 4)) == (6,)
    assert make_transform("corr_matrix").unconstrained_shape((2, 4, 4)) == (2, 6)
    assert make_transform("cov_matrix").unconstrained_shape((4, 4)) == (10,)
    assert make_transform("cholesky_factor_cov").unconstrained_shape((5, 3)) == (12,)
    assert make_transform("lower", lower=0.0).unconstrained_shape((3, 2)) == (3, 2)
    assert make_transform("cholesky_factor_corr").constrained_shape((7, 6)) == (7, 4, 4)
    assert make_transform("simplex").constrained_shape((3,)) == (4,)


def test_nonsquare_cholesky_factor_cov():
    t = make_transform("cholesky_factor_cov", shape=(4, 2))
    assert isinstance(t, CholeskyFactorCov)
    u = np.random.default_rng(7).normal(size=(3, t.unconstrained_shape((4, 2))[-1]))
    x, lj = t.forward(u, 2)
    assert x.shape == (3, 4, 2) and t.in_support(x)
    np.testing.assert_allclose(t.inverse(x), u, rtol=1e-12)
    np.testing.assert_allclose(lj, u[:, [0, 2]].sum(axis=1))


def test_user_errors():
    with pytest.raises(ModelError):
        make_transform("lower_upper", lower=2.0, upper=1.0)
    with pytest.raises(ModelError):
        make_transform("offset_multiplier", multiplier=0.0)
    with pytest.raises(ModelError):
        make_transform("nonsense")
    with pytest.raises(ModelError):
        make_transform("simplex", lower=0.0)


# ---------------------------------------------------------------- unit and sum-to-zero vectors


def test_unit_vector_is_stans_normalisation_with_a_normal_kernel():
    t = make_transform("unit_vector")
    u = np.random.default_rng(8).normal(size=(6, 3))
    x, lj = t.forward(u, 1)
    np.testing.assert_allclose(x, u / np.linalg.norm(u, axis=1, keepdims=True))
    np.testing.assert_allclose(lj, -0.5 * np.sum(u**2, axis=1))
    assert t.in_support(x) and not t.in_support(2 * x)
    np.testing.assert_allclose(t.inverse(x), x)
    assert t.unconstrained_shape((4, 3)) == (4, 3)

    def f(v):
        y, j = t.forward(v, 1)
        return anp.sum(j) + anp.sum(anp.sin(y))

    np.testing.assert_allclose(grad(f)(u), _fd_grad(f, u), rtol=1e-5, atol=1e-7)


def test_sum_to_zero_basis_is_orthonormal_and_stans():
    t = make_transform("sum_to_zero_vector")
    n = 4
    u = np.random.default_rng(9).normal(size=n)
    x, lj = t.forward(u, 1)
    assert abs(x.sum()) < 1e-12 and lj == 0.0
    # Stan's inverse transform, written from the reference manual's recursion
    expected = np.zeros(n + 1)
    for k in range(n + 1):
        expected[k] = sum(u[i - 1] / np.sqrt(i * (i + 1)) for i in range(k + 1, n + 1))
        if k >= 1:
            expected[k] -= k * u[k - 1] / np.sqrt(k * (k + 1))
    np.testing.assert_allclose(x, expected, atol=1e-12)
    # an isometry: |x| = |u|, so every x_k has the same variance when u is standard normal
    np.testing.assert_allclose(np.linalg.norm(x), np.linalg.norm(u))
