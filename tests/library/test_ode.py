"""ODE solvers: solutions and gradients (forward sensitivities) against the closed form of
exponential decay, against central finite differences on a Lotka-Volterra system, for every
solver name; the right-hand side's signature is checked at the call."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.errors import ModelError
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.library.ode import Problem, SecondDerivativeError, solve
from ppl.runtime.compiler import CompiledModel

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


@pytest.mark.slow
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


def test_per_draw_steps_against_the_closed_form_with_time_in_the_right_hand_side():
    """y' = k t + c (t used by the function: each draw's own time is passed): y = y0 + k t^2/2
    + c t; one draw's rate 50x another's, each on its own steps (ppl.library.dopri5 on a tape)."""
    src = """
functions { vector f(real t, vector y, real k, real c) { return [k * t + c * y[1] / y[1]]'; } }
data { int N; array[N] real ts; }
parameters { real<lower=0> k; real c; real<lower=0> y0; }
model { array[N] vector[1] y = ode_rk45_tol(f, [y0]', 0, ts, 1e-10, 1e-10, 100000, k, c);
        target += sum(to_array_1d(y)); }
"""
    model = _model(src, {"N": 4, "ts": TS})
    zeta = np.array([[np.log(0.2), 0.3, 0.0], [np.log(10.0), -1.0, np.log(3.0)]])
    k, c, y0 = np.exp(zeta[:, :1]), zeta[:, 1:2], np.exp(zeta[:, 2:])
    prior_free = (y0 + k * TS**2 / 2 + c * TS).sum(1) + zeta[:, 0] + zeta[:, 2]  # + log-Jacobians
    np.testing.assert_allclose(model.log_joint(zeta), prior_free, rtol=1e-9)
    expected = np.stack([(k * TS**2 / 2).sum(1) + 1, np.full(2, TS.sum()),
                         4 * y0[:, 0] + 1], axis=1)  # fmt: skip
    np.testing.assert_allclose(grad(lambda z: anp.sum(model.log_joint(z)))(zeta), expected,
                               rtol=1e-8)  # fmt: skip


def test_a_draw_over_max_num_steps_is_rejected_alone():
    """Stan rejects the draw whose solve takes more than max_num_steps steps: here NaN for that
    draw's solution, the other draws' solutions exact."""
    problem = Problem(lambda t, y, p: -p * y, 1, 0.0, TS, "RK45", 1e-10, 1e-10, 60, tapeable=True)
    x = np.array([[1.0, 0.5], [1.0, 400.0]])  # the second decays 800x faster: many more steps
    y = solve(problem, x[:, :1], x[:, 1:])
    np.testing.assert_allclose(y[0, :, 0], np.exp(-0.5 * TS), rtol=1e-8)
    assert np.isnan(y[1]).all()


def test_functions_with_branches_are_not_taped():
    """A tape freezes control flow, so a right-hand side with an `if` or a comparison runs
    through scipy's stacked solver instead."""
    from ppl.runtime.ode_calls import straight_line

    src = """
functions {
  vector branchy(real t, vector z, real a) { if (t > 1) return -a * z; return -z; }
  vector compare(real t, vector z, real a) { return -(a > 1) * z; }
  vector plain(real t, vector z, real a) { return -a * z; }
}
model { }
"""
    defs = {f.name: f for f in parse(src, "m.stan").functions}
    assert straight_line(defs["plain"])
    assert not straight_line(defs["branchy"]) and not straight_line(defs["compare"])


def test_tape_replays_and_refuses_a_branch_on_values():
    from autograd.tracer import getval

    from ppl.library.tape import TapeMismatch, record

    def f(t, v):
        return anp.exp(v) * t[:, None] + anp.sin(v[:, :1])

    t, v = np.array([0.5, 2.0]), np.array([[0.1, 0.2], [0.3, -1.0]])
    tape = record(f, (t, v), check=(t + 1, v * 2))
    np.testing.assert_allclose(tape(t * 3, v - 1), f(t * 3, v - 1), rtol=1e-15)

    def branchy(t, v):
        return v * 2 if getval(v)[0, 0] > 0 else v  # a value read outside autograd

    with pytest.raises(TapeMismatch):
        record(branchy, (t, v), check=(t, -v))


def test_curvature_through_an_ode_by_differences_of_gradients():
    """Hessian-vector products cannot go through the sensitivities; ppl.inference.hessian
    differences gradients instead: the Hessian of a decay model's log density against the same
    model written in closed form (autograd's exact Hessian)."""
    from ppl.inference.hessian import hessian_by_hvp

    body = """
data { int N; array[N] real ts; vector[N] y; }
parameters { real<lower=0> k; real<lower=0> y0; }
model { k ~ normal(1, 1); y0 ~ normal(2, 1); %s
        y ~ normal(to_vector(m), 0.1); }
"""
    ode = """functions { vector f(real t, vector y, real k) { return -k * y; } }""" + body % (
        "array[N] vector[1] s = ode_rk45_tol(f, [y0]', 0, ts, 1e-10, 1e-10, 100000, k);"
        " array[N] real m; for (n in 1:N) m[n] = s[n][1];")
    closed = body % "vector[N] m = y0 * exp(-k * to_vector(ts));"
    data = {"N": 4, "ts": TS, "y": 2 * np.exp(-0.8 * TS) + 0.05}
    point = np.log([0.8, 2.0])
    H_ode = hessian_by_hvp(_model(ode, data).log_joint, point)
    H_exact = hessian_by_hvp(_model(closed, data).log_joint, point)
    np.testing.assert_allclose(H_ode, H_exact, rtol=1e-5, atol=1e-3)
