"""ODE solvers: solutions and gradients (forward sensitivities) against the closed form of
exponential decay, against central finite differences on a Lotka-Volterra system, for every
solver name; the right-hand side's signature is checked at the call."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.checker import check
from ppl.compiler import CompiledModel
from ppl.errors import ModelError
from ppl.ode import Problem, SecondDerivativeError, solve
from ppl.parser import parse

TS = np.array([0.5, 1.0, 2.0, 3.5])


def _model(src: str, data: dict) -> CompiledModel:
    return CompiledModel(check(parse(src, "m.stan")), data, seed=0)


def test_exponential_decay_and_its_gradient_against_the_closed_form():
    # y' = -k y: y(t) = y0 exp(-k t); d/dy0 = exp(-k t), d/dk = -t y0 exp(-k t)
    x = np.array([[2.0, 0.7], [1.0, 0.3], [0.5, 1.4]])

    def total(x, method):
        problem = Problem(lambda t, y, p: -p * y, 1, 0.0, TS, method, 1e-10, 1e-10, 10**6)
        return anp.sum(anp.sin(solve(problem, x[:, :1], x[:, 1:])))

    y0, k = x[:, :1], x[:, 1:]
    y = y0 * np.exp(-k * TS)
    expected = np.stack(
        [(np.cos(y) * np.exp(-k * TS)).sum(1), (np.cos(y) * -TS * y).sum(1)], axis=1
    )
    for method in ("RK45", "BDF", "LSODA"):
        assert total(x, method) == pytest.approx(np.sin(y).sum(), rel=1e-8)
        # BDF's error control is the loosest of the three at equal tolerances
        np.testing.assert_allclose(grad(total)(x, method), expected, rtol=1e-6, atol=1e-8)


def test_second_derivatives_are_refused_with_a_value_error():
    problem = Problem(lambda t, y, p: -p * y, 1, 0.0, TS, "RK45", 1e-8, 1e-8, 10**6)

    def total(x):
        return anp.sum(solve(problem, x[:, :1], x[:, 1:]))

    with pytest.raises(SecondDerivativeError):
        grad(lambda x: anp.sum(grad(total)(x) ** 2))(np.array([[1.0, 0.5]]))


LV_FUNCTIONS = """
functions {
  vector lv(real t, vector z, real alpha, real beta, array[] real gd) {
    vector[2] dz;
    dz[1] = (alpha - beta * z[2]) * z[1];
    dz[2] = (-gd[1] + gd[2] * z[1]) * z[2];
    return dz;
  }
  array[] real lv_old(real t, array[] real z, array[] real th, array[] real x_r,
                      array[] int x_i) {
    return {(th[1] - th[2] * z[2]) * z[1], (-th[3] + th[4] * z[1]) * z[2]};
  }
}
data { int N; array[N] real ts; array[N, 2] real y; }
parameters {
  real<lower=0> alpha; real<lower=0> beta; array[2] real<lower=0> gd; vector<lower=0>[2] z0;
}
"""


@pytest.mark.parametrize(
    "call",
    [
        "ode_rk45(lv, z0, 0, ts, alpha, beta, gd)",
        "ode_rk45_tol(lv, z0, 0.0, ts, 1e-9, 1e-9, 100000, alpha, beta, gd)",
        "ode_bdf_tol(lv, z0, 0.0, ts, 1e-9, 1e-9, 100000, alpha, beta, gd)",
        "ode_adams_tol(lv, z0, 0.0, ts, 1e-9, 1e-9, 100000, alpha, beta, gd)",
        "integrate_ode_rk45(lv_old, to_array_1d(z0), 0, ts, {alpha, beta, gd[1], gd[2]},"
        " rep_array(0.0, 0), rep_array(0, 0), 1e-9, 1e-9, 5e2)",
        "integrate_ode_bdf(lv_old, to_array_1d(z0), 0, ts, {alpha, beta, gd[1], gd[2]},"
        " rep_array(0.0, 0), rep_array(0, 0), 1e-9, 1e-9, 1000)",
    ],
)
def test_lotka_volterra_gradient_against_finite_differences(call):
    old = call.startswith("integrate")
    z = "z[n, k]" if old else "z[n][k]"
    src = LV_FUNCTIONS + f"""
model {{
  alpha ~ normal(1, 0.5); beta ~ normal(0.05, 0.05); gd ~ normal(0.5, 0.5);
  z0 ~ lognormal(log(10), 1);
  {{
    {"array[N, 2] real" if old else "array[N] vector[2]"} z = {call};
    for (n in 1:N) for (k in 1:2) y[n, k] ~ lognormal(log({z}), 0.25);
  }}
}}
"""
    rng = np.random.default_rng(5)
    data = {"N": 4, "ts": TS, "y": rng.uniform(5, 20, size=(4, 2))}
    model = _model(src, data)
    zeta = np.log(np.array([[0.55, 0.028, 0.8, 0.024, 30.0, 4.0], [0.6, 0.03, 0.7, 0.02, 25, 5]]))

    def f(z):
        return anp.sum(model.log_joint(z))

    g = grad(f)(zeta)
    h = 1e-5
    fd = np.zeros_like(zeta)
    for s in range(zeta.shape[0]):
        for j in range(zeta.shape[1]):
            e = np.zeros_like(zeta)
            e[s, j] = h
            fd[s, j] = (f(zeta + e) - f(zeta - e)) / (2 * h)
    # the finite difference of a solution computed to 1e-9 carries ~1e-9/h = 1e-4 of noise
    np.testing.assert_allclose(g, fd, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize(
    "call, message",
    [
        ("ode_rk45(nope, z0, 0, ts, alpha, beta, gd)", "'nope' is not a user-defined function"),
        ("ode_rk45(lv, z0, 0, ts, alpha, beta)", r"lv takes 5 argument"),
        ("ode_rk45(lv, z0, 0, ts, alpha, beta, alpha)", r"argument 5 \('gd'\) of lv must be"),
        ("ode_rk45(lv_old, z0, 0, ts, alpha, beta, gd)", r"must return vector"),
        ("ode_rk45_tol(lv, z0, 0, ts, alpha, beta, gd)", r"argument 7 of ode_rk45_tol must be int"),
    ],
)
def test_ode_signature_errors_are_located(call, message):
    src = LV_FUNCTIONS + f"model {{ array[N] vector[2] z = {call}; }}"
    with pytest.raises(ModelError, match=message):
        check(parse(src, "m.stan"))
