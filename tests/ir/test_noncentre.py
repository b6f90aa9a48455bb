"""The non-centring pass (ppl.ir.passes.noncentre): the rewritten log joint is the original's by
an exact change of variables, the user's parameters come back under their own names, `ppl ir`
shows the rewrite, and statements that do not qualify are left as written."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.ir.graph import build_graph
from ppl.ir.passes import ALL, lowered, parse
from ppl.language.frontend import model_from_text
from ppl.runtime.compiler import CompiledModel

NONCENTRED = ALL + ("noncentre",)

SCHOOLS = {"J": 8, "y": np.array([28.0, 8, -3, 7, -1, 1, 18, 12]),
           "sigma": np.array([15.0, 10, 16, 11, 9, 11, 10, 18])}  # fmt: skip

EIGHT_SCHOOLS = """
data { int<lower=0> J; array[J] real y; array[J] real<lower=0> sigma; }
parameters { real mu; real<lower=0> tau; array[J] real theta; }
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
generated quantities { real first = theta[1]; }
"""

EIGHT_SCHOOLS_LOOP = """
data { int<lower=0> J; array[J] real y; array[J] real<lower=0> sigma; }
parameters { real mu; real<lower=0> tau; vector[J] theta; }
model {
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  for (j in 1:J) {
    theta[j] ~ normal(mu, tau);
    y[j] ~ normal(theta[j], sigma[j]);
  }
}
"""

FUNNEL = """
parameters { real v; vector[9] x; }
model {
  v ~ normal(0, 3);
  x ~ normal(0, exp(v / 2));
}
"""

# lognormal on a positive parameter, student_t with a parameter nu, cauchy, double_exponential
# and logistic, and a chain: g's location reads a, itself non-centred
FAMILIES = """
data { int<lower=0> J; array[J] real y; }
parameters {
  real m;
  real<lower=0> s;
  real<lower=1> nu;
  vector<lower=0>[J] w;
  vector[J] t;
  real c;
  real d;
  real l;
  real a;
  vector[J] g;
}
transformed parameters { real twice = 2 * m; }
model {
  m ~ normal(0, 1);
  s ~ normal(0, 1);
  nu ~ gamma(2, 0.1);
  w ~ lognormal(m, s);
  t ~ student_t(nu, m, s);
  c ~ cauchy(twice, s);
  d ~ double_exponential(m, s);
  l ~ logistic(m, 2 * s);
  a ~ normal(m, s);
  g ~ normal(a, s);
  y ~ normal(t + g + log(w), 1);
}
"""


def _models(source: str, data: dict):
    checked = model_from_text(source, "test.stan")
    return CompiledModel(checked, data), CompiledModel(checked, data, passes=NONCENTRED)


def _centred_point(centred, draws: dict, S: int) -> np.ndarray:
    """The centred model's unconstrained point of the same constrained values."""
    z = np.zeros((S, centred.dim))
    for lat in centred.latents:
        v = np.asarray(draws[lat.name], dtype=float).reshape(S, -1)
        if lat.kind == "lower":
            lower = 1.0 if lat.name == "nu" else 0.0
            v = np.log(v - lower)
        z[:, lat.offset : lat.offset + lat.size] = v
    return z


def _check_change_of_variables(source, data, log_jacobian, seed=0):
    centred, rewritten = _models(source, data)
    assert [lat.size for lat in centred.latents] == [lat.size for lat in rewritten.latents]
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(7, rewritten.dim))
    draws = rewritten.constrained_draws(z, rng)
    zc = _centred_point(centred, draws, 7)
    expected = centred.log_joint(zc) + log_jacobian(draws)
    np.testing.assert_allclose(rewritten.log_joint(z), expected, rtol=1e-10, atol=1e-9)
    return centred, rewritten, draws


def test_eight_schools_log_joint_is_the_centred_one_by_change_of_variables():
    # theta = mu + tau * theta_raw: log |d theta / d theta_raw| = J log tau
    _check_change_of_variables(EIGHT_SCHOOLS, SCHOOLS, lambda d: 8 * np.log(d["tau"]))
    _check_change_of_variables(EIGHT_SCHOOLS_LOOP, SCHOOLS, lambda d: 8 * np.log(d["tau"]))


def test_funnel_log_joint_by_change_of_variables():
    # x = exp(v / 2) * x_raw: log |J| = 9 v / 2
    _check_change_of_variables(FUNNEL, {}, lambda d: 9 * d["v"] / 2)


def test_location_scale_families_and_a_chain_by_change_of_variables():
    data = {"J": 3, "y": np.array([0.5, -1.0, 2.0])}

    def log_jacobian(d):
        s = d["s"]
        # w: log w = m + s * w_raw (the centred coordinate is log w); t, d, a: s; g: 3 log s;
        # c: s; l: 2 s
        return 3 * np.log(s) * 3 + np.log(s) * 3 + np.log(2 * s)

    centred, rewritten, draws = _check_change_of_variables(FAMILIES, data, log_jacobian)
    assert [lat.name for lat in rewritten.latents] == [
        "m", "s", "nu", "w_raw", "t_raw", "c_raw", "d_raw", "l_raw", "a_raw", "g_raw"]  # fmt: skip
    assert list(draws) == list(centred.constrained_draws(np.zeros((1, centred.dim)),
                                                         np.random.default_rng(0)))  # fmt: skip
    assert draws["w"].shape == (7, 3) and np.all(draws["w"] > 0)


def test_the_user_sees_their_own_parameters_in_their_own_order():
    centred, rewritten = _models(EIGHT_SCHOOLS, SCHOOLS)
    rng = np.random.default_rng(1)
    z = rng.normal(size=(4, rewritten.dim))
    draws = rewritten.constrained_draws(z, rng)
    assert list(draws) == ["mu", "tau", "theta", "first"]
    assert draws["theta"].shape == (4, 8)
    theta = draws["mu"][:, None] + draws["tau"][:, None] * z[:, 2:]
    np.testing.assert_allclose(draws["theta"], theta)
    np.testing.assert_allclose(draws["first"], theta[:, 0])


def test_ppl_ir_shows_the_rewrite():
    checked = model_from_text(EIGHT_SCHOOLS_LOOP, "schools.stan")
    text = build_graph(lowered(checked, parse("all,noncentre"))).to_text()
    assert "passes: noncentre, constant_folding" in text
    assert ("noncentre             line 8     theta[j] ~ normal(mu, tau): non-centred: "
            "theta_raw[j] ~ normal(0, 1), theta[j] = mu + tau * theta_raw[j] for j in 1:J"
            ) in text  # fmt: skip
    assert "theta_raw  vector[J]      (J,)   real      identity" in text  # the latent
    assert "theta  vector[J]  (J,)   transformed parameters  mu, tau, theta_raw" in text
    assert "for (j in 1:J): vectorised over j" in text  # both loops still vectorised
    default = build_graph(lowered(checked, parse("all"))).to_text()
    assert "noncentre" not in default and "theta_raw" not in default


@pytest.mark.parametrize(
    "statement, declaration, why",
    [
        ("theta ~ normal(mu, tau);", "vector<lower=-50>[J] theta;", "'theta' has bounds"),
        ("theta ~ normal(mu, tau); theta ~ normal(0, 100);", "vector[J] theta;",
         "'theta' is on the left of 2 '~' statements"),
        ("theta ~ normal(mu, tau) T[-50, ];", "vector[J] theta;", "truncated"),
        ("{ real m2 = 2 * mu; theta ~ normal(m2, tau); }", "vector[J] theta;", None),
        ("for (j in 2:J) theta[j] ~ normal(mu, tau); theta[1] ~ normal(0, 5);",
         "vector[J] theta;", None),
        ("theta ~ lognormal(mu, tau);", "vector[J] theta;", "'theta' is not declared <lower=0>"),
    ],
)  # fmt: skip
def test_statements_that_do_not_qualify_are_left_as_written(statement, declaration, why):
    source = f"""
data {{ int<lower=0> J; array[J] real y; array[J] real<lower=0> sigma; }}
parameters {{ real mu; real<lower=0> tau; {declaration} }}
model {{
  mu ~ normal(0, 5);
  tau ~ cauchy(0, 5);
  {statement}
  y ~ normal(theta, sigma);
}}
"""
    checked = model_from_text(source, "x.stan")
    program = lowered(checked, parse("all,noncentre"))
    assert [d.name for d in program.ast.parameters] == ["mu", "tau", "theta"]
    texts = [d.text for d in program.decisions if d.pass_name == "noncentre"]
    assert not any("non-centred:" in t for t in texts)
    if why is not None:
        assert any(f"left centred ({why})" in t for t in texts), texts
    centred = CompiledModel(checked, SCHOOLS)
    same = CompiledModel(checked, SCHOOLS, passes=NONCENTRED)
    z = np.random.default_rng(2).normal(size=(3, centred.dim))
    np.testing.assert_allclose(same.log_joint(z), centred.log_joint(z))


def test_fixed_location_and_scale_are_left_alone():
    checked = model_from_text("parameters { vector[3] b; } model { b ~ normal(0, 2); }", "b")
    program = lowered(checked, parse("all,noncentre"))
    assert [d.name for d in program.ast.parameters] == ["b"]
    assert not [d for d in program.decisions if d.pass_name == "noncentre"]


LATE = """
data { int<lower=0> J; array[J] real y; array[J] real<lower=0> sigma; }
parameters { real mu; real log_tau; vector[J] theta; }
transformed parameters { real<lower=0> tau = exp(log_tau); }
model {
  mu ~ normal(0, 5);
  log_tau ~ normal(1, 1);
  theta ~ normal(mu, tau);
  y ~ normal(theta, sigma);
}
"""


def test_a_scale_from_a_transformed_parameter_puts_x_after_it():
    centred, rewritten, draws = _check_change_of_variables(
        LATE, SCHOOLS, lambda d: 8 * d["log_tau"]
    )
    tps = rewritten.program.transformed_parameters
    assert [getattr(s, "name", None) for s in tps] == ["tau", "theta"]
    assert list(draws) == ["mu", "log_tau", "theta", "tau"]
    # ... and stays centred when a transformed parameter reads x
    read = LATE.replace("exp(log_tau);", "exp(log_tau); real t1 = theta[1];")
    program = lowered(model_from_text(read, "t"), parse("all,noncentre"))
    assert [d.name for d in program.ast.parameters] == ["mu", "log_tau", "theta"]
