"""ppl.library.special: autograd primitives over scipy.special, without importing autograd.scipy.

Values are scipy's; first and second derivatives are autograd.scipy.special's to the last bit
(the same formulas) and agree with finite differences; VJPs sum over broadcast axes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import autograd.numpy as anp
import autograd.scipy.special as asp
import numpy as np
import pytest
import scipy.special as ss
from autograd import elementwise_grad, grad

from ppl.library import special

ROOT = Path(__file__).resolve().parents[2]

POSITIVE = np.array([0.05, 0.3, 1.0, 1.7, 4.5, 12.0, 80.0])
REAL = np.array([-30.0, -4.0, -1.1, -0.2, 0.0, 0.4, 2.5, 7.0, 35.0])
UNIT = np.array([1e-6, 0.01, 0.2, 0.5, 0.77, 0.99, 1 - 1e-6])
TWO = np.array([0.01, 0.3, 1.0, 1.6, 1.99])

# name -> points where it and its derivatives are finite
UNARY = {
    "gammaln": POSITIVE,
    "digamma": POSITIVE,
    "psi": POSITIVE,
    "gamma": POSITIVE[:-1],
    "erf": REAL[1:-1],
    "erfc": REAL[1:-1],
    "erfcinv": TWO,
    "expit": REAL,
    "logit": UNIT,
}


def _fd(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_values_are_scipys(name):
    x = UNARY[name]
    ours = getattr(special, name)(x)
    np.testing.assert_array_equal(ours, getattr(ss, name)(x))
    for v in x:  # scalars stay scalars
        assert np.shape(getattr(special, name)(float(v))) == ()


@pytest.mark.parametrize("name", sorted(UNARY))
def test_derivatives_are_autograds(name):
    x = UNARY[name]
    ours, theirs = getattr(special, name), getattr(asp, name)
    d1 = elementwise_grad(ours)(x)
    np.testing.assert_array_equal(d1, elementwise_grad(theirs)(x))
    d2 = elementwise_grad(elementwise_grad(ours))(x)
    np.testing.assert_array_equal(d2, elementwise_grad(elementwise_grad(theirs))(x))
    for v in x:
        assert grad(ours)(float(v)) == grad(theirs)(float(v))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_derivatives_match_finite_differences(name):
    x = UNARY[name]
    f = getattr(ss, name)
    h = 1e-6 * np.maximum(np.abs(x), 1e-3)
    if name in ("logit",):
        h = 1e-4 * np.minimum(x, 1 - x)
    if name == "erfcinv":
        h = 1e-4 * np.minimum(x, 2 - x)
    fd = (f(x + h) - f(x - h)) / (2 * h)
    ours = elementwise_grad(getattr(special, name))(x)
    np.testing.assert_allclose(ours, fd, rtol=2e-5, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma(n):
    x = POSITIVE
    np.testing.assert_array_equal(special.polygamma(n, x), ss.polygamma(n, x))
    ours = elementwise_grad(lambda x: special.polygamma(n, x))(x)
    np.testing.assert_array_equal(ours, elementwise_grad(lambda x: asp.polygamma(n, x))(x))
    np.testing.assert_allclose(ours, ss.polygamma(n + 1, x))
    # trigamma as ppl's function library writes it, and its derivative
    np.testing.assert_array_equal(special.polygamma(1, 2.5), ss.polygamma(1, 2.5))


def test_gammaln_third_derivative():
    f = special.gammaln
    d3 = grad(grad(grad(f)))(2.5)
    assert d3 == grad(grad(grad(asp.gammaln)))(2.5)
    np.testing.assert_allclose(d3, ss.polygamma(2, 2.5))


@pytest.mark.parametrize(
    "a_shape, b_shape", [((), ()), ((), (4,)), ((4,), ()), ((3, 1), (4,)), ((2, 3), (2, 3))]
)
def test_betaln_broadcasting(a_shape, b_shape):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.2, 5.0, a_shape)
    b = rng.uniform(0.2, 5.0, b_shape)
    np.testing.assert_array_equal(special.betaln(a, b), ss.betaln(a, b))

    def total(fn):
        return lambda a, b: anp.sum(
            fn(a, b) * anp.arange(1.0, 1.0 + np.size(fn(a, b))).reshape(np.shape(fn(a, b)))
        )

    for arg in (0, 1):
        ours = grad(total(special.betaln), arg)(a, b)
        theirs = grad(total(asp.betaln), arg)(a, b)
        assert np.shape(ours) == np.shape((a, b)[arg])
        np.testing.assert_array_equal(ours, theirs)
    # against finite differences at a scalar pair
    fd = _fd(lambda t: ss.betaln(t, 1.3), 0.8)
    np.testing.assert_allclose(grad(special.betaln)(0.8, 1.3), fd, rtol=1e-6)
    fd = _fd(lambda t: ss.betaln(0.8, t), 1.3)
    np.testing.assert_allclose(grad(special.betaln, 1)(0.8, 1.3), fd, rtol=1e-6)


def test_expit_broadcast_in_an_expression():
    """A scalar parameter times a vector: the gradient sums over the vector."""
    x = np.array([-1.0, 0.5, 2.0])
    ours = grad(lambda s: anp.sum(special.expit(s * x)))(0.7)
    theirs = grad(lambda s: anp.sum(asp.expit(s * x)))(0.7)
    assert ours == theirs
    np.testing.assert_allclose(ours, np.sum(x * ss.expit(0.7 * x) * (1 - ss.expit(0.7 * x))))


@pytest.mark.parametrize(
    "shape, kwargs",
    [
        ((5,), {}),
        ((5,), {"axis": -1}),
        ((3, 4), {}),
        ((3, 4), {"axis": -1}),
        ((3, 4), {"axis": 0}),
        ((3, 4), {"axis": -1, "keepdims": True}),
        ((2, 3, 4), {"axis": (0, 2)}),
        ((2, 3, 4), {"axis": (1, 2), "keepdims": True}),
    ],
)
def test_logsumexp(shape, kwargs):
    rng = np.random.default_rng(1)
    x = rng.normal(size=shape) * 3
    np.testing.assert_array_equal(special.logsumexp(x, **kwargs), ss.logsumexp(x, **kwargs))

    def weighted(fn):
        def f(x):
            out = fn(x, **kwargs)
            return anp.sum(out * (1.0 + anp.arange(np.size(out))).reshape(np.shape(out)))

        return f

    ours = grad(weighted(special.logsumexp))(x)
    np.testing.assert_array_equal(ours, grad(weighted(asp.logsumexp))(x))
    # finite differences, coordinate by coordinate
    f = weighted(ss.logsumexp)
    fd = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = 1e-6
        fd[i] = (f(x + e) - f(x - e)) / 2e-6
    np.testing.assert_allclose(ours, fd, rtol=1e-5, atol=1e-8)
    # the softmax that ppl's function library computes from it: second derivatives too
    hess = grad(
        lambda x: anp.sum(anp.exp(x - special.logsumexp(x, axis=-1, keepdims=True))[..., 0])
    )
    theirs = grad(lambda x: anp.sum(anp.exp(x - asp.logsumexp(x, axis=-1, keepdims=True))[..., 0]))
    np.testing.assert_array_equal(hess(x), theirs(x))


def test_logsumexp_forward_mode():
    from autograd.differential_operators import make_jvp

    x = np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5]])
    v = np.array([[1.0, 0.5, -2.0], [0.0, 1.0, 1.0]])
    for kwargs in ({}, {"axis": 1}, {"axis": (0, 1)}, {"axis": 0, "keepdims": True}):
        ours = make_jvp(lambda x, kw=kwargs: special.logsumexp(x, **kw))(x)(v)
        theirs = make_jvp(lambda x, kw=kwargs: asp.logsumexp(x, **kw))(x)(v)
        np.testing.assert_array_equal(ours[1], theirs[1])


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return set(out.stdout.split())


def test_fit_path_does_not_import_autograd_scipy_or_scipy_stats():
    loaded = _modules_after("import ppl.cli, ppl.pipeline, ppl.library.special, ppl.inference.sgvb")
    assert not {m for m in loaded if m.startswith("autograd.scipy")}
    assert "scipy.stats" not in loaded


def test_check_imports_no_scipy():
    loaded = _modules_after(
        "from ppl.cli import main\n"
        "main(['check', 'models/eight_schools/noncentered.model', "
        "'models/eight_schools/eight_schools.json'])"
    )
    assert not {m for m in loaded if m == "scipy" or m.startswith("scipy.")}
    assert "ppl.pipeline" not in loaded
