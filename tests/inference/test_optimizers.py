"""Tests of the stochastic-gradient ascent optimisers (ppl/inference/optimizers.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppl.errors import PplError
from ppl.inference.optimizers import (
    DEFAULTS,
    OPTIMIZERS,
    NonFiniteGradientError,
    OptimizerError,
    make_optimizer,
)

NAMES = sorted(OPTIMIZERS)
D = 10


def _quadratic(seed: int):
    """f(x) = -(x - x*)' A (x - x*) / 2 in 10 dims, eigenvalues of A spread over [0.5, 2]."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((D, D)))
    a = q @ np.diag(np.linspace(0.5, 2.0, D)) @ q.T
    x_star = rng.standard_normal(D)
    return rng, a, x_star


def test_registry_and_defaults():
    assert set(OPTIMIZERS) == {"adadelta", "adagrad", "rmsprop", "sgd", "adam"}
    assert set(DEFAULTS) == set(OPTIMIZERS)
    assert DEFAULTS["adadelta"] == {"rho": 0.9, "eps": 1e-4, "momentum": 0.9}
    assert DEFAULTS["adagrad"] == {"eta": 0.1, "eps": 1e-6}
    assert DEFAULTS["rmsprop"] == {"eta": 0.01, "decay": 0.9, "eps": 1e-6}
    assert DEFAULTS["sgd"] == {"eta": 0.1, "tau": 1.0, "kappa": 0.7}
    assert DEFAULTS["adam"] == {"eta": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    for name in NAMES:
        opt = make_optimizer(name, 3)
        assert opt.options == DEFAULTS[name]
        assert make_optimizer(name.upper(), 3).name == name


@pytest.mark.parametrize("name", NAMES)
def test_maximises_noisy_concave_quadratic(name):
    # Gradient -A(x - x*) + N(0, 0.1^2 I), start at 0 (||x*|| is about 3), 4000 steps, defaults
    # except SGD's eta: the default 0.1 with kappa = 0.7 contracts the slowest direction (eigenvalue
    # 0.5) only by exp(-0.05 * T^0.3 / 0.3), about 0.1 after 4000 steps; eta = 0.5 is still stable
    # (eta * max eigenvalue < 2).
    # Tolerance 0.06 on the average of the last 400 iterates: the noise alone limits any method
    # that sees 400 gradients near x* to an error of about sigma ||A^-1||_F / sqrt(400) = 0.017, so
    # 0.06 is ~3.5 times that floor and a 50-fold reduction of the initial distance (over 20 seeds
    # the largest error was 0.036). The last iterate itself jitters with the constant-scale
    # adaptive steps (up to 0.09 over 20 seeds), hence 0.25 for it.
    rng, a, x_star = _quadratic(seed=3)
    options = {"eta": 0.5} if name == "sgd" else {}
    opt = make_optimizer(name, D, **options)
    x = np.zeros(D)
    steps, tail = 4000, 400
    avg = np.zeros(D)
    for t in range(steps):
        grad = -a @ (x - x_star) + 0.1 * rng.standard_normal(D)
        x = x + opt.step(grad)
        if t >= steps - tail:
            avg += x / tail
    assert opt.t == steps
    assert np.linalg.norm(avg - x_star) < 0.06
    assert np.linalg.norm(x - x_star) < 0.25


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip_continues_identically(name):
    rng = np.random.default_rng(7)
    grads = rng.standard_normal((60, 5)) * np.array([1e-3, 0.1, 1.0, 10.0, 1e3])
    opt = make_optimizer(name, 5)
    for g in grads[:25]:
        opt.step(g)
    saved = opt.state_dict()
    for value in saved.values():
        assert isinstance(value, (int, float, np.ndarray))
    reference = [opt.step(g) for g in grads[25:]]

    # restore into a fresh optimiser whose options differ: the state dict carries them
    other = {k: v * 0.5 for k, v in DEFAULTS[name].items()}
    if name == "sgd":
        other["kappa"] = 0.9
    fresh = make_optimizer(name, 5, **other)
    fresh.load_state_dict(saved)
    again = [fresh.step(g) for g in grads[25:]]
    np.testing.assert_array_equal(np.array(again), np.array(reference))

    # the saved dict was not changed by the later steps, and survives np.savez-style 0-d arrays
    as_arrays = {k: np.asarray(v) for k, v in saved.items()}
    third = make_optimizer(name, 5)
    third.load_state_dict(as_arrays)
    np.testing.assert_array_equal(np.array([third.step(g) for g in grads[25:]]), reference)


@pytest.mark.parametrize("name", NAMES)
def test_load_state_dict_rejects_mismatches(name):
    saved = make_optimizer(name, 4).state_dict()
    with pytest.raises(OptimizerError, match="size"):
        make_optimizer(name, 3).load_state_dict(saved)
    wrong = next(n for n in NAMES if n != name)
    with pytest.raises(OptimizerError, match="does not belong"):
        make_optimizer(wrong, 4).load_state_dict(saved)


def test_adadelta_first_two_steps_by_hand():
    rho, eps, lam = 0.9, 1e-4, 0.9
    g1 = np.array([1.0, -2.0, 0.5])
    g2 = np.array([0.5, -1.0, -3.0])
    # step 1, all statistics start at zero
    eg1 = (1 - rho) * g1**2
    v1 = (1 - lam) * g1
    d1 = np.sqrt(0.0 + eps) / np.sqrt(eg1 + eps) * v1
    ed1 = (1 - rho) * d1**2
    # step 2
    eg2 = rho * eg1 + (1 - rho) * g2**2
    v2 = lam * v1 + (1 - lam) * g2
    d2 = np.sqrt(ed1 + eps) / np.sqrt(eg2 + eps) * v2
    # first component written out in numbers: E[g^2] = 0.1, v = 0.1, gamma = 0.01 / sqrt(0.1001)
    assert d1[0] == pytest.approx(0.1 * 0.01 / math.sqrt(0.1001), rel=1e-12)

    opt = make_optimizer("adadelta", 3)
    np.testing.assert_allclose(opt.step(g1), d1, rtol=1e-14)
    np.testing.assert_allclose(opt.step(g2), d2, rtol=1e-14)
    state = opt.state_dict()
    np.testing.assert_allclose(state["sq_grad"], eg2, rtol=1e-14)
    np.testing.assert_allclose(state["velocity"], v2, rtol=1e-14)
    np.testing.assert_allclose(state["sq_delta"], rho * ed1 + (1 - rho) * d2**2, rtol=1e-14)


def test_adagrad_rmsprop_adam_first_step_by_hand():
    g = np.array([2.0, -0.5])
    np.testing.assert_allclose(make_optimizer("adagrad", 2).step(g), 0.1 * g / (1e-6 + abs(g)))
    np.testing.assert_allclose(
        make_optimizer("rmsprop", 2).step(g), 0.01 * g / (1e-6 + np.sqrt(0.1) * abs(g))
    )
    # bias-corrected Adam's first step is eta * sign(g) up to eps
    np.testing.assert_allclose(make_optimizer("adam", 2).step(g), 0.01 * np.sign(g), rtol=1e-7)


def test_sgd_robbins_monro_schedule():
    eta, tau, kappa = 0.3, 2.0, 0.7
    opt = make_optimizer("sgd", 2, eta=eta, tau=tau, kappa=kappa)
    g = np.array([1.0, -2.0])
    for t in range(5):  # the steps use rho_t = eta (t + tau)^-kappa, t = 0, 1, ...
        np.testing.assert_allclose(opt.step(g), eta * (t + tau) ** -kappa * g, rtol=1e-15)
    t = np.arange(2_000_000)
    rates = opt.rate(t)
    np.testing.assert_allclose(rates, eta * (t + tau) ** -kappa, rtol=1e-15)
    assert np.all(np.diff(rates) < 0) and rates[0] == pytest.approx(eta * tau**-kappa)
    # sum rho_t diverges: the partial sums keep growing like T^(1 - kappa) (no plateau) ...
    partial = np.cumsum(rates)
    for n in (10_000, 100_000, 1_000_000):
        # above the integral lower bound eta ((n + tau)^(1-kappa) - tau^(1-kappa)) / (1 - kappa),
        # which is unbounded in n ...
        lower = eta * ((n + tau) ** (1 - kappa) - tau ** (1 - kappa)) / (1 - kappa)
        assert partial[n - 1] > lower
        # ... and doubling the horizon multiplies the sum by about 2^(1-kappa) = 1.23 (a
        # convergent series would give a ratio tending to 1)
        assert partial[2 * n - 1] / partial[n - 1] > 1.2
    # ... while sum rho_t^2 converges: the tail beyond T is below the integral bound
    # eta^2 (T - 1 + tau)^(1 - 2 kappa) / (2 kappa - 1), which goes to 0.
    squares = np.cumsum(rates**2)
    for n in (1_000, 10_000, 100_000):
        tail = squares[-1] - squares[n - 1]
        bound = eta**2 * (n - 1 + tau) ** (1 - 2 * kappa) / (2 * kappa - 1)
        assert tail < bound
    assert squares[-1] - squares[999_999] < 0.01 * squares[-1]  # second million adds < 1%
    for bad in (0.5, 0.3, 1.01):
        with pytest.raises(OptimizerError, match="kappa"):
            make_optimizer("sgd", 2, kappa=bad)


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError) as info:
        make_optimizer("lbfgs", 3)
    message = str(info.value)
    assert "lbfgs" in message
    for name in NAMES:
        assert name in message
    assert isinstance(info.value, PplError)


def test_bad_options_raise_value_error():
    with pytest.raises(ValueError, match="valid options: rho, eps, momentum"):
        make_optimizer("adadelta", 3, eta=0.1)
    for name, key, value in [
        ("adadelta", "rho", 1.0),
        ("adadelta", "momentum", -0.1),
        ("adagrad", "eta", 0.0),
        ("rmsprop", "eps", float("nan")),
        ("adam", "beta2", 1.5),
        ("sgd", "tau", 0.0),
    ]:
        with pytest.raises(ValueError, match=key):
            make_optimizer(name, 3, **{key: value})
    with pytest.raises(ValueError):
        make_optimizer("sgd", -1)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_gradient_raises_and_leaves_state(name, bad):
    opt = make_optimizer(name, 3)
    opt.step(np.array([1.0, 2.0, 3.0]))
    before = opt.state_dict()
    with pytest.raises(ValueError, match="non-finite") as info:
        opt.step(np.array([1.0, bad, 3.0]))
    assert isinstance(info.value, NonFiniteGradientError)
    after = opt.state_dict()
    assert after.keys() == before.keys()
    for k in before:
        np.testing.assert_array_equal(after[k], before[k])
    # recovery: the next good gradient gives the same update as if the bad call never happened
    twin = make_optimizer(name, 3)
    twin.load_state_dict(before)
    g = np.array([0.5, -1.0, 2.0])
    np.testing.assert_array_equal(opt.step(g), twin.step(g))


@pytest.mark.parametrize("name", NAMES)
def test_wrong_gradient_shape(name):
    opt = make_optimizer(name, 3)
    with pytest.raises(ValueError, match="shape"):
        opt.step(np.ones(4))
    with pytest.raises(ValueError, match="shape"):
        opt.step(np.ones((3, 1)))


@pytest.mark.parametrize("name", NAMES)
def test_ascent_direction_and_no_aliasing(name):
    opt = make_optimizer(name, 4)
    g = np.array([3.0, -2.0, 1e-3, 0.0])
    step = opt.step(g)
    assert step.shape == (4,) and step.dtype == np.float64
    assert np.all(np.sign(step) == np.sign(g))  # the first update points up the gradient
    step[:] = 99.0  # the caller owning the returned array must not corrupt the state
    for value in opt.state_dict().values():
        if isinstance(value, np.ndarray):
            assert not np.any(value == 99.0)
