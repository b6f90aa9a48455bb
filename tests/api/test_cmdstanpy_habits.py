"""CmdStanPy's habits on ppl.Model and ppl.Fit (issue 34): optimize against closed-form modes
(both jacobian settings), laplace_sample against the inverse Hessian in closed form,
generate_quantities against numpy on the same draws, inits honoured and checked, draws_pd and
to_arviz's groups, progress and warnings."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ppl
from ppl.errors import PplWarning, UnreliableFitWarning

# Gamma-Poisson: lambda | y ~ gamma(a + S, b + N), S = sum(y)
GAMMA_POISSON = """
data { int<lower=0> N; array[N] int<lower=0> y; real<lower=0> a; real<lower=0> b; }
parameters { real<lower=0> lambda; }
model { lambda ~ gamma(a, b); y ~ poisson(lambda); }
"""
GP_DATA = {"N": 6, "y": [3, 5, 2, 4, 6, 1], "a": 2.0, "b": 0.5}
SHAPE, RATE = 2.0 + 21, 0.5 + 6  # the posterior's

# Beta-Bernoulli: p | y ~ beta(a + k, b + n - k)
BETA_BERNOULLI = """
data { int<lower=0> N; array[N] int<lower=0, upper=1> y; }
parameters { real<lower=0, upper=1> p; }
model { p ~ beta(2, 3); y ~ bernoulli(p); }
"""
BB_DATA = {"N": 10, "y": [1, 1, 1, 0, 1, 1, 0, 1, 1, 1]}  # k = 8: beta(10, 5)

# Linear regression with a known noise sd: the posterior of (alpha, beta) is Gaussian
REGRESSION = """
data { int<lower=0> N; vector[N] x; vector[N] y; real<lower=0> sigma; }
parameters { real alpha; real beta; }
model { alpha ~ normal(0, 10); beta ~ normal(0, 10); y ~ normal(alpha + beta * x, sigma); }
generated quantities {
  vector[N] mu = alpha + beta * x;
  array[N] real y_rep = normal_rng(mu, sigma);
  vector[N] log_lik;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | mu[n], sigma);
}
"""


def _regression_data(n=12, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": 1.0 + 2.0 * x + rng.normal(scale=0.5, size=n), "sigma": 0.5}


def _gaussian_posterior(data):
    """Precision and mean of (alpha, beta): X'X / sigma^2 + I / 10^2, X'y / sigma^2."""
    X = np.column_stack([np.ones(data["N"]), data["x"]])
    precision = X.T @ X / data["sigma"] ** 2 + np.eye(2) / 100.0
    return precision, np.linalg.solve(precision, X.T @ data["y"] / data["sigma"] ** 2)


@pytest.fixture(scope="module")
def regression():
    return ppl.Model(REGRESSION, "regression.stan")


# ---- optimize -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "data", "name", "without", "with_jacobian"),
    [
        # gamma(s, r): mode (s - 1) / r; with the log transform's Jacobian lambda: s / r
        (GAMMA_POISSON, GP_DATA, "lambda", (SHAPE - 1) / RATE, SHAPE / RATE),
        # beta(10, 5): mode 9 / 13; with the logit's Jacobian p (1 - p): beta(11, 6), 10 / 15
        (BETA_BERNOULLI, BB_DATA, "p", 9 / 13, 10 / 15),
    ],
)
def test_optimize_finds_the_closed_form_mode(code, data, name, without, with_jacobian):
    model = ppl.Model(code)
    mode = model.optimize(data)
    assert not mode.jacobian and mode.converged
    assert mode.stan_variable(name) == pytest.approx(without, rel=1e-6)
    assert isinstance(mode.stan_variable(name), float)
    assert model.optimize(data, jacobian=True).stan_variable(name) == pytest.approx(
        with_jacobian, rel=1e-6
    )
    params = mode.optimized_params_dict
    assert list(params) == ["lp__", name] and params[name] == mode.stan_variable(name)
    assert mode.optimized_params_pd.shape == (1, 2)


def test_optimize_evaluates_generated_quantities_at_the_mode(regression):
    data = _regression_data()
    mode = regression.optimize(data)
    _, mean = _gaussian_posterior(data)
    alpha, beta = mode.stan_variable("alpha"), mode.stan_variable("beta")
    np.testing.assert_allclose([alpha, beta], mean, rtol=1e-6)
    np.testing.assert_allclose(mode.stan_variable("mu"), alpha + beta * data["x"], rtol=1e-12)
    assert mode.stan_variable("mu").shape == (12,)
    assert "mu[12]" in mode.optimized_params_dict


# ---- laplace_sample -------------------------------------------------------------------------


def test_laplace_sample_covariance_is_the_inverse_hessian(regression):
    data = _regression_data()
    precision, mean = _gaussian_posterior(data)
    fit = regression.laplace_sample(data, draws=4000)
    np.testing.assert_allclose(fit.result.vi.mean, mean, rtol=1e-6)
    np.testing.assert_allclose(fit.result.vi.cov, np.linalg.inv(precision), rtol=1e-5)
    draws = np.column_stack([fit.stan_variable("alpha"), fit.stan_variable("beta")])
    cov = np.linalg.inv(precision)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert np.all(np.abs(np.cov(draws.T) - cov) < 0.1 * scale)  # 4000 draws: ~0.02-0.03 sd
    assert fit.method == "laplace" and fit.verdict == "good" and fit.khat < 0.5
    assert fit.mode is not None and fit.mode.jacobian
    assert "Laplace approximation" in str(fit)
    assert fit.families["alpha"] == "full-rank Gaussian"


def test_laplace_fit_saves_and_reads_back(regression, tmp_path):
    pytest.importorskip("arviz")
    fit = regression.laplace_sample(_regression_data(), draws=200, quiet=True)
    fit.save(tmp_path)
    info = json.loads((tmp_path / "fit.json").read_text())
    assert info["method"] == "laplace" and info["draws"] == 200
    again = ppl.to_arviz(tmp_path)
    np.testing.assert_allclose(again.posterior["beta"].values[0], fit.stan_variable("beta"))


def test_laplace_sample_on_the_log_scale_of_a_gamma_posterior():
    """log lambda's density (a + S) u - (b + N) e^u: mode log(s / r), variance 1 / s."""
    model = ppl.Model(GAMMA_POISSON)
    fit = model.laplace_sample(GP_DATA, draws=2000)
    assert fit.result.vi.mean[0] == pytest.approx(np.log(SHAPE / RATE), rel=1e-6)
    assert fit.result.vi.cov[0, 0] == pytest.approx(1 / SHAPE, rel=1e-5)
    u = np.log(fit.stan_variable("lambda"))
    assert np.var(u) == pytest.approx(1 / SHAPE, rel=0.1)
    # a mode found without the Jacobian: the Gaussian of the MLE's scale, with a warning
    mle = model.optimize(GP_DATA)
    with pytest.warns(PplWarning, match="jacobian"):
        off = model.laplace_sample(GP_DATA, mode=mle, draws=200)
    assert off.result.vi.mean[0] == pytest.approx(np.log((SHAPE - 1) / RATE), rel=1e-6)
    # a mode given as values
    given = model.laplace_sample(GP_DATA, mode={"lambda": SHAPE / RATE}, draws=200)
    assert given.result.vi.cov[0, 0] == pytest.approx(1 / SHAPE, rel=1e-5)


# ---- inits ----------------------------------------------------------------------------------


def test_inits_are_the_optimisers_first_point():
    model = ppl.Model(BETA_BERNOULLI)
    assert model.optimize(BB_DATA, inits={"p": 0.3}).init == pytest.approx([np.log(0.3 / 0.7)])
    assert model.optimize(BB_DATA, inits=0).init == pytest.approx([0.0])
    start = model.optimize(BB_DATA, inits=0.5).init
    assert abs(start[0]) <= 0.5 and start[0] != 0.0


def test_fit_starts_its_mode_search_at_the_inits(monkeypatch):
    import ppl.inference.auto as road

    starts = []
    original = road.find_mode

    def recording(log_joint, init, rng, **kw):
        starts.append(np.array(init, dtype=float))
        return original(log_joint, init, rng, **kw)

    monkeypatch.setattr(road, "find_mode", recording)
    model = ppl.Model("parameters { real a; real<lower=a> b; } model { a ~ normal(0, 1); "
                      "b ~ normal(0, 1); }")  # fmt: skip
    model.fit(None, inits={"a": 1.0, "b": 1.5}, quiet=True)
    np.testing.assert_allclose(starts[0], [1.0, np.log(0.5)])  # b's bound seen at a = 1


def test_inits_are_checked_with_the_parameter_named(regression):
    model = ppl.Model("parameters { real a; real<lower=a> b; vector[2] v; } model { a ~ "
                      "normal(0, 1); b ~ normal(0, 1); v ~ normal(0, 1); }")  # fmt: skip
    with pytest.raises(ppl.PplError, match=r"'b' is outside its declared constraint"):
        model.optimize(None, inits={"a": 1.0, "b": 0.5})
    with pytest.raises(ppl.PplError, match=r"'v' has shape \(3,\); the model declares \(2,\)"):
        model.optimize(None, inits={"v": [1, 2, 3]})
    with pytest.raises(ppl.PplError, match=r"'c' not a parameter of the model"):
        model.fit(None, inits={"c": 1.0})
    with pytest.raises(ppl.PplError, match="radius"):
        model.optimize(None, inits=-1)
    # a fit's own variables (transformed parameters, generated quantities) are accepted
    data = _regression_data()
    mode = regression.optimize(data, inits={"alpha": 0.5, "beta": 1.0, "mu": np.zeros(12)})
    assert mode.init == pytest.approx([0.5, 1.0])


# ---- draws ----------------------------------------------------------------------------------


def test_stan_variable_and_draws_pd(regression):
    pytest.importorskip("pandas")
    fit = regression.fit(_regression_data(), quiet=True)
    np.testing.assert_array_equal(fit.stan_variable("mu"), fit.draws("mu"))
    frame = fit.draws_pd()
    assert list(frame.columns[:5]) == ["lp__", "log_p__", "log_g__", "alpha", "beta"]
    np.testing.assert_array_equal(frame["mu[3]"], fit.stan_variable("mu")[:, 2])
    assert frame.shape == (1000, 5 + 3 * 12)
    assert list(fit.draws_pd("beta").columns) == ["beta"]
    with pytest.raises(ppl.PplError, match="no variable 'gamma'"):
        fit.draws_pd(["gamma"])
    ints = ppl.Model("parameters { real<lower=0> l; } model { l ~ gamma(2, 1); } "
                     "generated quantities { array[2, 3] int k; for (i in 1:2) for (j in 1:3) "
                     "k[i, j] = poisson_rng(l); }").fit(None, quiet=True)  # fmt: skip
    frame = ints.draws_pd("k")
    assert frame.columns[1] == "k[2,1]" and frame["k[2,3]"].dtype.kind == "i"
    np.testing.assert_array_equal(frame["k[1,2]"], ints.stan_variable("k")[:, 0, 1])


def test_generate_quantities_on_new_data_against_numpy(regression):
    fit = regression.fit(_regression_data(), quiet=True)
    new = {"N": 3, "x": np.array([-1.0, 0.0, 2.5]), "y": np.zeros(3), "sigma": 0.5}
    gq = regression.generate_quantities(new, fit)
    alpha, beta = fit.stan_variable("alpha"), fit.stan_variable("beta")
    np.testing.assert_array_equal(gq.stan_variable("alpha"), alpha)
    np.testing.assert_allclose(gq.stan_variable("mu"), alpha[:, None] + beta[:, None] * new["x"],
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    z = (gq.stan_variable("y_rep") - gq.stan_variable("mu")) / 0.5
    assert z.shape == (1000, 3)
    assert abs(z.mean()) < 4 / np.sqrt(z.size) and abs(z.std() - 1) < 0.05
    same = fit.generate_quantities(new)
    np.testing.assert_array_equal(same.stan_variable("y_rep"), gq.stan_variable("y_rep"))
    with pytest.raises(ppl.PplError, match="no generated quantities"):
        ppl.Model(GAMMA_POISSON).generate_quantities(GP_DATA, ppl.Model(GAMMA_POISSON).fit(
            GP_DATA, quiet=True))  # fmt: skip


def test_to_arviz_groups_observed_data_and_ppc(regression, tmp_path):
    az = pytest.importorskip("arviz")
    data = _regression_data()
    fit = regression.fit(data, quiet=True)
    idata = fit.to_arviz(observed_data=["y"], posterior_predictive={"y": "y_rep"})
    assert set(idata.groups()) >= {"posterior", "posterior_predictive", "observed_data",
                                   "log_likelihood", "sample_stats"}  # fmt: skip
    assert idata.posterior_predictive["y"].shape == (1, 1000, 12)
    np.testing.assert_array_equal(idata.posterior_predictive["y"].values[0],
                                  fit.stan_variable("y_rep"))  # fmt: skip
    np.testing.assert_array_equal(idata.observed_data["y"].values, data["y"])
    assert idata.log_likelihood["log_lik"].shape == (1, 1000, 12)
    assert "y_rep" not in idata.posterior and "log_lik" not in idata.posterior
    assert idata.posterior["mu"].shape == (1, 1000, 12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.isfinite(az.loo(idata).elpd_loo)
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    az.plot_ppc(idata, num_pp_samples=20)
    # by the generated quantity's own name, observed data given as values
    other = fit.to_arviz(observed_data={"y_obs": data["y"]}, posterior_predictive="y_rep")
    assert other.posterior_predictive["y_rep"].shape == (1, 1000, 12)
    with pytest.raises(ppl.PplError, match="'z' not in the fit's data"):
        fit.to_arviz(observed_data=["z"])


# ---- progress and warnings ------------------------------------------------------------------


def test_progress_false_true_and_callable(regression):
    data = _regression_data()
    regression.fit(data, progress=False, quiet=True)
    regression.fit(data, progress=True, quiet=True)
    seen = []
    regression.fit(data, progress=lambda it, value=None: seen.append(it))
    assert seen
    with pytest.raises(ppl.PplError, match="progress"):
        regression.fit(data, progress="yes")


def test_warnings_are_python_warnings_unless_quiet():
    model = ppl.Model(BETA_BERNOULLI)  # the Gaussian's tails against a beta's: k-hat over 0.7
    with pytest.warns(UnreliableFitWarning) as caught:
        fit = model.fit(BB_DATA)
    assert caught[0].filename == __file__  # at the caller's line, where a notebook shows it
    assert any(w.startswith("the fit is not reliable") for w in fit.warnings)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PplWarning)
        quiet = model.fit(BB_DATA, quiet=True)
    assert quiet.warnings == fit.warnings
    assert issubclass(UnreliableFitWarning, ppl.PplWarning)


# every constraint kind, and a bound on another parameter, through inits and generate_quantities
EVERY_CONSTRAINT = """
data { int K; }
parameters {
  simplex[K] s; ordered[K] o; positive_ordered[2] po; cov_matrix[K] S; corr_matrix[K] R;
  cholesky_factor_corr[K] L; cholesky_factor_cov[K, 2] C; real lo;
  real<lower=lo, upper=lo + 2> mid; array[2] vector<lower=0>[K] av;
  matrix<offset=1, multiplier=2>[2, K] M; unit_vector[K] u; sum_to_zero_vector[K] z;
}
model {
  s ~ dirichlet(rep_vector(2, K)); o ~ normal(0, 3); po ~ exponential(1);
  S ~ wishart(K + 2, diag_matrix(rep_vector(1, K))); R ~ lkj_corr(2);
  L ~ lkj_corr_cholesky(2); to_vector(C) ~ normal(0, 2); lo ~ normal(0, 1);
  for (i in 1:2) av[i] ~ exponential(1);
  to_vector(M) ~ normal(1, 2); z ~ normal(0, 1);
}
generated quantities {
  real t = sum(s) + sum(o) + sum(po) + sum(S) + sum(R) + sum(L) + sum(C) + mid + sum(av[2])
           + sum(M) + sum(u) + sum(z);
}
"""


def test_every_constraint_round_trips_through_inits_and_generate_quantities():
    from ppl.api_point import initial_point

    model = ppl.Model(EVERY_CONSTRAINT)
    fit = model.fit(
        {"K": 3}, method="advi", draws=100, iterations=20, eta=0.1, refine_draws=0, quiet=True
    )  # any draws will do
    again = fit.generate_quantities({"K": 3})
    for name, draws in fit.stan_variables().items():
        np.testing.assert_allclose(again.stan_variable(name), draws, rtol=1e-12, atol=1e-12)
    values = {k: v[0] for k, v in fit.stan_variables().items() if k != "t"}
    compiled = model.compile({"K": 3})
    start = initial_point(compiled, values, np.random.default_rng(0))
    back = compiled.constrained_draws(start[None], np.random.default_rng(0))
    for name, value in values.items():
        np.testing.assert_allclose(back[name][0], value, rtol=1e-10, atol=1e-12)
    with pytest.raises(ppl.PplError, match="'R' is outside its declared constraint"):
        initial_point(compiled, {"R": 2 * np.eye(3)}, np.random.default_rng(0))
