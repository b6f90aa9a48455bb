"""The evaluator's fast paths give the same numbers as plain numpy/scipy: fused scalar kernels in
sequential loops (values, gradients, second derivatives), one-node stacking of element-wise
filled arrays, and the `ppl check` diagnosis of the first non-finite statement."""

from __future__ import annotations

import json

import autograd
import autograd.numpy as anp
import numpy as np
from scipy import stats
from scipy.special import expit

from ppl.cli import main
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

GARCH = """
data { int<lower=0> T; array[T] real y; real<lower=0> sigma1; }
parameters {
  real mu; real<lower=0> alpha0; real<lower=0, upper=1> alpha1;
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


def _garch_model():
    rng = np.random.default_rng(3)
    data = {"T": np.asarray(30), "y": rng.normal(size=30), "sigma1": np.asarray(0.8)}
    return CompiledModel(check(parse(GARCH, "garch.model")), data), data


def _garch_reference(z, data):
    """The same log joint written out in numpy (transforms and log-Jacobians included)."""
    mu, u0, u1, u2 = z
    alpha0 = np.exp(u0)
    alpha1 = expit(u1)
    beta1 = (1 - alpha1) * expit(u2)
    lj = u0 + np.log(alpha1) + np.log1p(-alpha1)
    lj += np.log(1 - alpha1) + np.log(expit(u2)) + np.log1p(-expit(u2))
    y = data["y"]
    sigma = [float(data["sigma1"])]
    for t in range(1, len(y)):
        sigma.append(np.sqrt(alpha0 + alpha1 * (y[t - 1] - mu) ** 2 + beta1 * sigma[-1] ** 2))
    return np.sum(stats.norm.logpdf(y, mu, np.array(sigma))) + lj


def test_recurrence_value_matches_numpy():
    model, data = _garch_model()
    z = np.random.default_rng(0).uniform(-2, 2, size=(6, model.dim))
    lp = model.log_joint(z)
    np.testing.assert_allclose(lp, [_garch_reference(row, data) for row in z], rtol=1e-10)


def test_recurrence_gradient_and_hessian_match_finite_differences():
    model, _ = _garch_model()
    z0 = np.random.default_rng(1).uniform(-1, 1, size=model.dim)

    def f(z):
        return anp.sum(model.log_joint(anp.reshape(z, (1, -1))))

    grad = autograd.grad(f)(z0)
    hess = autograd.hessian(f)(z0)
    h = 1e-6
    for i in range(model.dim):
        e = np.zeros(model.dim)
        e[i] = h
        fd = (f(z0 + e) - f(z0 - e)) / (2 * h)
        np.testing.assert_allclose(grad[i], fd, rtol=1e-5, atol=1e-6)
        fd_row = (autograd.grad(f)(z0 + e) - autograd.grad(f)(z0 - e)) / (2 * h)
        np.testing.assert_allclose(hess[i], fd_row, rtol=1e-4, atol=1e-5)


def test_batched_recurrence_gradient_is_per_sample():
    model, _ = _garch_model()
    z = np.random.default_rng(2).uniform(-2, 2, size=(4, model.dim))
    vjp, _ = autograd.make_vjp(model.log_joint)(z)
    batched = vjp(np.ones(4))
    for s in range(4):
        single = autograd.grad(lambda r: anp.sum(model.log_joint(r)))(z[s : s + 1])
        np.testing.assert_allclose(batched[s], single[0], rtol=1e-12)


def test_fused_kernel_falls_back_in_vectorised_loops():
    # the same scalar expression with the loop index as a batch axis (two batch axes)
    src = """
    data { int N; vector[N] x; vector[N] y; }
    parameters { real a; real<lower=0> b; }
    model { for (n in 1:N) y[n] ~ normal(sqrt(square(a) + b * square(x[n])) - a, 1); }
    """
    rng = np.random.default_rng(4)
    data = {"N": np.asarray(7), "x": rng.normal(size=7), "y": rng.normal(size=7)}
    fast = CompiledModel(check(parse(src, "v.model")), data)
    slow = CompiledModel(check(parse(src, "v.model")), data, vectorise=False)
    z = rng.normal(size=(5, 2))
    np.testing.assert_allclose(fast.log_joint(z), slow.log_joint(z), rtol=1e-12)
    gf = autograd.make_vjp(fast.log_joint)(z)[0](np.ones(5))
    gs = autograd.make_vjp(slow.log_joint)(z)[0](np.ones(5))
    np.testing.assert_allclose(gf, gs, rtol=1e-10)


def test_check_reports_first_non_finite_statement(tmp_path, capsys):
    model = tmp_path / "bad.model"
    model.write_text(
        "data { int N; array[N] int y; }\n"
        "parameters { real<lower=0> lambda; }\n"
        "model {\n"
        "  lambda ~ gamma(2, 1);\n"
        "  y ~ poisson(lambda - 100);\n"
        "}\n"
    )
    data = tmp_path / "d.json"
    data.write_text(json.dumps({"N": 3, "y": [1, 2, 3]}))
    assert main(["check", str(model), str(data)]) == 0
    err = capsys.readouterr().err
    assert (
        f"{model}:5: the log density is nan at the initial point: y ~ poisson(lambda - 100)" in err
    )
    assert err.startswith("warning: ")


def test_check_reports_non_finite_gradient(tmp_path):
    model = tmp_path / "grad.model"
    model.write_text(
        "parameters { real x; }\n"
        "model {\n"
        "  x ~ normal(0, 1);\n"
        "  target += sqrt(square(x) - square(x));\n"
        "}\n"
    )
    m = CompiledModel(check(parse(model.read_text(), str(model))), {})
    message = m.diagnose(np.array([0.5]))
    assert message is not None and ":4: the gradient of the log density is not finite" in message
    assert message.endswith("target += sqrt(square(x) - square(x))")


def test_check_is_quiet_for_a_good_model(capsys):
    folder = "models/posteriordb/garch-garch11"
    assert main(["check", f"{folder}/model.stan", f"{folder}/data.json"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_data_matrix_times_a_batch_of_vectors_is_one_product():
    """X * beta with data X and a batch of draws of beta: the GEMM path gives the stacked
    matrix-vector products, values and gradients (and row_vector * X likewise)."""
    from ppl.language.types import SType
    from ppl.library.functions import matmul

    rng = np.random.default_rng(3)
    X, B = rng.normal(size=(50, 4)), rng.normal(size=(6, 4))
    mat, vec, row = SType("real", "matrix", 0), SType("real", "vector", 0), \
        SType("real", "row_vector", 0)  # fmt: skip
    np.testing.assert_allclose(matmul(X, mat, B, vec), np.einsum("nk,sk->sn", X, B), rtol=1e-12)
    np.testing.assert_allclose(matmul(B, row, X.T, mat), B @ X.T, rtol=1e-12)
    W = rng.normal(size=(6, 50))
    g = autograd.grad(lambda b: anp.sum(W * matmul(X, mat, b, vec)))(B)
    np.testing.assert_allclose(g, W @ X, rtol=1e-12)
