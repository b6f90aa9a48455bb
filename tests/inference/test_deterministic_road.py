"""`auto`'s deterministic road: fixed-draw ELBO, Hessian-vector products, linear response."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from scipy.special import gammaln

import ppl.inference.auto as auto
import ppl.inference.flow_fit as flow_fit
import ppl.inference.linear_response as linear_response_module
import ppl.methods.escalation as escalation
from ppl.data.build import build
from ppl.inference.auto import CandidateFailed, fit_auto, linear_response
from ppl.inference.hessian import batched_hvp, hessian_by_hvp
from ppl.inference.saa import fit_fixed_draws, whitened_draws
from ppl.inference.sgvb import Block, MixedFamily
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

CORRELATED = """
data { int D; matrix[D, D] Sigma; }
parameters { vector[D] x; }
model { x ~ multi_normal(rep_vector(0, D), Sigma); }
"""
SPARSE_GAMMA_POISSON = """
data { int N; array[N] int y; }
parameters { real<lower=0> lambda; }
model { lambda ~ gamma(0.1, 0.1); y ~ poisson(lambda); }
"""
SCHOOLS = ["models/eight_schools/noncentered.model", "models/eight_schools/eight_schools.json"]


def _model(text: str, data: dict) -> CompiledModel:
    return CompiledModel(check(parse(text, "t.model")), {k: np.asarray(v) for k, v in data.items()})


def _correlated(D=4, rho=0.8):
    Sigma = np.full((D, D), rho) + (1 - rho) * np.eye(D)
    Sigma *= np.outer(np.arange(1, D + 1), np.arange(1, D + 1))  # sds 1..D
    return _model(CORRELATED, {"D": D, "Sigma": Sigma}), Sigma


def _gaussian_fit(model, seed=3):
    blocks = [Block(lat.name, "gaussian", lat.offset, lat.size) for lat in model.latents]
    rng = np.random.default_rng(seed)
    return fit_auto(model.log_joint, blocks, model.dim, model.random_init(rng), rng, seed=seed)


def test_fixed_draw_objective_and_fit_are_deterministic_for_a_seed():
    model = build(*SCHOOLS[:1], SCHOOLS[1:], seed=1)
    family = MixedFamily([Block("x", "gaussian", 0, model.dim)], model.dim)
    theta0 = family.from_gaussian(np.zeros(model.dim), np.ones(model.dim))
    one = fit_fixed_draws(model.log_joint, family, theta0, seed=4)
    two = fit_fixed_draws(model.log_joint, family, theta0, seed=4)
    assert np.array_equal(one.theta, two.theta) and one.grad_evals == two.grad_evals
    a, b = fit(model, "auto", seed=2, draws=50), fit(model, "auto", seed=2, draws=50)
    assert all(np.array_equal(a.draws[k], b.draws[k]) for k in a.draws)
    assert a.vi.grad_evals == b.vi.grad_evals


def test_whitened_draws_have_exact_first_and_second_moments():
    eps = whitened_draws(32, 5, seed=1)
    assert np.allclose(eps.mean(axis=0), 0, atol=1e-12)
    assert np.allclose(eps.T @ eps / len(eps), np.eye(5), atol=1e-12)
    few = whitened_draws(8, 20, seed=1)  # fewer draws than dimensions: per-column moments
    assert np.allclose(few.mean(axis=0), 0, atol=1e-12)
    assert np.allclose(np.mean(few**2, axis=0), 1, atol=1e-12)


def test_hessian_vector_products_match_finite_differences_of_the_gradient():
    """On a compiled model (eight schools, a gamma-free non-quadratic log joint): H v from
    reverse over reverse against central differences of autograd's gradient, step 1e-5."""
    model = build(SCHOOLS[0], SCHOOLS[1:], seed=1)
    rng = np.random.default_rng(0)
    x, v = rng.uniform(-1, 1, model.dim), rng.standard_normal(model.dim)

    def f(z):
        return model.log_joint(anp.reshape(z, (1, -1)))[0]

    from autograd import grad

    h = 1e-5
    fd = (grad(f)(x + h * v) - grad(f)(x - h * v)) / (2 * h)
    assert np.allclose(batched_hvp(model.log_joint, x[None], v[None])[0], fd, rtol=1e-5, atol=1e-6)
    # many points and vectors in one call; the dense Hessian from the unit vectors
    points, vectors = rng.uniform(-1, 1, (3, model.dim)), rng.standard_normal((3, model.dim))
    rows = batched_hvp(model.log_joint, points, vectors)
    for k in range(3):
        fd = (grad(f)(points[k] + h * vectors[k]) - grad(f)(points[k] - h * vectors[k])) / (2 * h)
        assert np.allclose(rows[k], fd, rtol=1e-5, atol=1e-6)
    H = hessian_by_hvp(model.log_joint, x)
    assert np.allclose(H @ v, batched_hvp(model.log_joint, x[None], v[None])[0], rtol=1e-8)


def test_linear_response_covariance_is_exact_on_a_gaussian_target():
    """Mean-field q of N(0, Sigma) has sds 1/sqrt(Sigma^-1_ii), too small; its linear-response
    covariance is Sigma itself (whitened draws make the fixed-draw ELBO exact for a quadratic
    log density, so only the finite-difference Hessian's rounding remains)."""
    model, Sigma = _correlated()
    first = _gaussian_fit(model)
    mean, sd = first.family.moments(first.theta)
    assert np.allclose(sd, 1 / np.sqrt(np.diag(np.linalg.inv(Sigma))), rtol=1e-5)
    q = linear_response(model.log_joint, first)
    assert np.allclose(q.mean, 0, atol=1e-6)
    assert np.allclose(q.cov, Sigma, rtol=1e-4, atol=1e-6)


def test_a_linear_response_covariance_that_cannot_be_formed_carries_the_work_it_spent(
    monkeypatch,
):
    """Where the fixed-draw optimum is not strict (GPFA's flat gamma blocks: 35,776 gradient
    evaluations, then H not positive definite) the attempt raises with its work, not a silent
    None."""

    def not_strict(objective, mean_map, theta):
        linear_response_module.elbo_hessian(objective, theta)  # the work, then the failure
        raise np.linalg.LinAlgError("Matrix is not positive definite")

    monkeypatch.setattr(linear_response_module, "lr_covariance", not_strict)
    model, _ = _correlated()
    with pytest.raises(CandidateFailed) as failed:
        linear_response(model.log_joint, _gaussian_fit(model))
    assert failed.value.grad_evals > 0


def test_auto_counts_and_names_the_gradients_of_candidates_that_failed(monkeypatch):
    def fails(spent):
        def candidate(*args, **kwargs):
            raise CandidateFailed("no", spent)

        return candidate

    monkeypatch.setattr(auto, "richer", fails(100))
    monkeypatch.setattr(auto, "linear_response", fails(30))
    monkeypatch.setattr(flow_fit, "fit_flow", fails(0))  # the flow after them (k-hat > 0.7)
    model, _ = _correlated(D=5, rho=0.9)
    result = fit(model, "auto", seed=1)
    assert "a full-rank Gaussian failed after 100 gradient evaluations (no)" in result.notes[0]
    assert "a linear-response covariance failed after 30 gradient evaluations" in result.notes[0]
    monkeypatch.setattr(escalation, "GOOD", np.inf)  # the road ends at the mean-field fit
    monkeypatch.setattr(escalation, "HIDDEN", np.inf)
    assert result.vi.grad_evals == fit(model, "auto", seed=1).vi.grad_evals + 130


def test_auto_turns_to_a_full_covariance_gaussian_when_khat_flags_mean_field():
    """D <= 100: a full-rank Gaussian by the fixed-draw road, exact here (Gaussian posterior,
    whitened draws); the linear-response covariance, exact too, is then not needed."""
    model, Sigma = _correlated(D=5, rho=0.9)
    result = fit(model, "auto", seed=1)
    assert result.diagnostics["khat"] < 0.5
    assert "full-rank Gaussian" in result.notes[0] and "was kept" in result.notes[0]
    assert "linear-response" not in result.notes[0]
    assert np.allclose(result.vi.cov, Sigma, rtol=1e-3, atol=1e-4)


def test_sparse_gamma_poisson_posterior_is_recovered_in_the_gamma_family():
    """Prior Gamma(0.1, 0.1), one zero count: the exact posterior Gamma(0.1, 1.1) is in the
    gamma family. The fixed draws' control variates (E_q[log x], E_q[x] exact) make the ELBO
    exact on the model's log x and x terms, so the fit is at the optimum, for every seed."""
    model = _model(SPARSE_GAMMA_POISSON, {"N": 1, "y": [0]})
    a, b = 0.1, 1.1
    log_evidence = 0.1 * np.log(0.1) - gammaln(0.1) + gammaln(a) - a * np.log(b)
    for seed in (1, 2, 3):
        result = fit(model, "auto", seed=seed)
        fitted = result.vi.family.describe(result.vi.theta)["lambda"]
        shape, rate = fitted["shape"][0], fitted["rate"][0]
        assert abs((shape / rate) / (a / b) - 1) < 0.02
        assert abs(np.sqrt(shape) / rate / (np.sqrt(a) / b) - 1) < 0.05
        assert abs(result.diagnostics["elbo"] - log_evidence) < 0.01
        assert abs(result.vi.elbo - log_evidence) < 0.01


@pytest.mark.parametrize("seed", [1, 2])
def test_default_fit_counts_thousands_of_gradients_not_tens_of_thousands(seed):
    """Eight schools took 14,472 gradient evaluations by stochastic ADVI then L-BFGS; the
    deterministic road needs 850-3,700 over seeds 1-6, the linear-response covariance it then
    tries about 1,000 more, and the collapse that ends it exact (mu and theta integrated out,
    a grid on log tau) 3,000-6,000 (Hessian-vector products counted as two gradients each):
    6,184 and 9,203 on seeds 1 and 2."""
    result = fit(build(SCHOOLS[0], SCHOOLS[1:], seed=seed), "auto", seed=seed)
    assert result.method == "auto" and result.vi.converged
    assert result.vi.grad_evals < 12_000


@pytest.mark.slow
def test_hierarchical_model_with_104_parameters_gets_every_sd_within_20_percent_of_nuts():
    """Varying intercepts for 100 groups (models/varying_intercepts, NumPyro NUTS reference of
    4 x 2000 draws stored beside it). Mean-field sds of mu and tau are 0.43 and 0.62 of NUTS's;
    k-hat flags that fit and auto keeps its linear-response covariance. Tolerances: 4000 draws
    of q estimate an sd to 1.1% and a mean to 0.016 sd; the reference's own error is smaller."""
    import json

    from ppl.outputs.summary import flatten_draws

    folder = "models/varying_intercepts/"
    model = build(folder + "varying_intercepts.model",
                  [folder + "varying_intercepts.csv", folder + "sizes.json"], seed=1)  # fmt: skip
    result = fit(model, "auto", seed=1, draws=4000)
    assert "linear-response covariance" in result.notes[0]
    assert result.diagnostics["khat"] <= 0.7
    ref = json.loads(open(folder + "nuts_reference.json").read())
    names, matrix = flatten_draws(result.draws)
    column = {n: i for i, n in enumerate(names)}
    ratios = {k: matrix[:, column[k]].std() / ref["sd"][k] for k in ref["sd"]}
    errors = {k: abs(matrix[:, column[k]].mean() - ref["mean"][k]) / ref["sd"][k]
              for k in ref["mean"]}  # fmt: skip
    assert all(0.8 <= r <= 1.2 for r in ratios.values()), min(ratios.items(), key=lambda kv: kv[1])
    assert max(errors.values()) < 0.3


@pytest.mark.slow
def test_auto_turns_to_a_low_rank_gaussian_above_the_full_rank_limit(monkeypatch):
    """D = 120 (beyond full rank's 100), the linear-response covariance switched off (as beyond
    its 300 parameters): a Gaussian target whose covariance is diagonal plus rank 2 flags the
    mean-field fit; the low-rank family holds the target, and on whitened draws the fixed-draw
    ELBO is exact for it, so q's own means and sds are the target's to the solve's precision
    (0.1%) and k-hat is good."""
    import ppl.inference.linear_response as lr

    monkeypatch.setattr(lr, "MAX_LR_PARAMETERS", 0)
    D = 120
    rng = np.random.default_rng(0)
    W = rng.normal(size=(D, 2)) * 2.0
    Sigma = W @ W.T + np.diag(np.exp(rng.normal(size=D) * 0.5))
    model = _model(CORRELATED, {"D": D, "Sigma": Sigma})
    result = fit(model, "auto", seed=1, draws=1000)
    note = result.notes[0]
    assert "low-rank-plus-diagonal Gaussian" in note and "was kept" in note, note
    assert "full-rank" not in note and "linear-response" not in note
    assert result.diagnostics["khat"] < 0.5
    sd = np.sqrt(np.diag(Sigma))
    assert np.allclose(np.sqrt(np.diag(result.vi.cov)), sd, rtol=1e-3)
    assert np.abs(result.vi.mean / sd).max() < 1e-3


def test_a_positive_latent_too_concentrated_for_the_gamma_family_gets_a_gaussian():
    """Poisson counts near 1e9 with a conjugate gamma prior: the posterior is Gamma(1 + sum y,
    1e-9 + N), whose shape (2e10) is beyond the gamma family's numerical limit (1e8); there the
    fit stopped at shape 1e8 with sds 14x too wide and a 'good' k-hat. auto sees the mode's
    curvature and fits a Gaussian on the log scale instead: mean and sd exact to 1000 draws'
    error (sd/sqrt(1000) and 2.2%)."""
    src = """data { int N; array[N] int y; }
parameters { real<lower=0> lambda; }
model { lambda ~ gamma(1, 1e-9); y ~ poisson(lambda); }"""
    y = np.random.default_rng(1).poisson(1e9, 20)
    model = CompiledModel(check(parse(src, "p.stan")), {"N": 20, "y": y})
    result = fit(model, "auto", seed=1, draws=1000)
    shape, rate = 1 + y.sum(), 1e-9 + 20
    mean, sd = shape / rate, np.sqrt(shape) / rate
    draws = result.draws["lambda"]
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(1000)
    assert abs(draws.std() / sd - 1) < 0.08
    assert any("too concentrated for the gamma family" in n for n in result.notes)


NAN_GRADIENT_BEYOND_3_8 = """
parameters { real<lower=0> l; }
model {
  l ~ normal(0, 1);
  target += -sqrt(exp(-50 * square(l)));  // exp underflows past l = 3.8: sqrt'(0) makes NaN
}
"""


@pytest.mark.parametrize("seed", [4, 10])
def test_a_start_with_a_finite_density_but_no_finite_gradient_is_drawn_again(seed):
    """Stan's rule for initial values: the gradient must be finite too. Seeds 4 and 10 start at
    l = 5.9 and 6.2 (uniform(-2, 2) on log l), where the density is finite and the gradient NaN:
    L-BFGS had no step and the fit ended 'the final ELBO is not finite' (accel_gp --seed 0 too)."""
    model = CompiledModel(check(parse(NAN_GRADIENT_BEYOND_3_8, "nan.model")), {})
    u = model.random_init(np.random.default_rng(seed))[0]
    assert np.exp(u) > 3.8  # the first start is in the NaN-gradient region
    result = fit(model, method="auto", seed=seed)
    draws = result.draws["l"]
    # the exact posterior (quadrature): mean 0.874, sd 0.588; mean-field on log l is within 0.1 sd
    assert np.isfinite(result.vi.elbo)
    assert abs(np.mean(draws) - 0.874) < 0.1 * 0.588


def test_a_road_that_ends_non_finite_restarts_from_another_initial_point():
    """Seed 5: a fixed draw lands beyond l = 3.8 where the gradient is NaN, the solve cannot
    move and the ELBO is not finite; `auto` starts again from another of Stan's initial points
    (it said 'the final ELBO is not finite' and stopped) and says so in a note."""
    model = CompiledModel(check(parse(NAN_GRADIENT_BEYOND_3_8, "nan.model")), {})
    result = fit(model, method="auto", seed=5)
    assert any("1 restart(s) from other initial points" in note for note in result.notes)
    assert np.isfinite(result.vi.elbo)
    assert abs(np.mean(result.draws["l"]) - 0.874) < 0.1 * 0.588


def test_preconditioned_coordinates_equal_the_dense_product_and_its_gradient():
    """theta(a) = theta0 + P a with P the identity but on the Gaussian means (their block of
    the mode's covariance factor): the gathered form and its gradient match the dense matrix."""
    from autograd import grad

    from ppl.inference.saa import Preconditioned

    blocks = [Block("a", "gaussian", 0, 3), Block("b", "gamma", 3, 2), Block("c", "gaussian", 5, 2)]
    family = MixedFamily(blocks, 7)
    rng = np.random.default_rng(0)
    A = rng.normal(size=(7, 7))
    coords = Preconditioned(family, rng.normal(size=family.size), A @ A.T + 7 * np.eye(7))
    assert not np.allclose(coords.P, np.eye(family.size))
    a, w = rng.normal(size=family.size), rng.normal(size=family.size)
    assert np.allclose(coords.theta(a), coords.theta0 + coords.P @ a, atol=1e-14)
    g = grad(lambda a: anp.sum(w * coords.theta(a)))(a)
    assert np.allclose(g, coords.P.T @ w, atol=1e-14)


def test_control_slopes_with_more_features_than_draws_are_the_primal_ridge_solution():
    """_control_slopes solves in the draws' space when the gamma features outnumber the draws:
    the same coefficients as the features' normal equations (to rounding)."""
    from ppl.inference.saa import _control_slopes

    family = MixedFamily([Block("x", "gamma", 0, 12)], 12)
    theta = family.from_gaussian(np.zeros(12), np.full(12, 0.5))
    w = np.linspace(-1, 1, 12)

    def log_joint(zeta):
        return anp.sum(w * zeta - anp.exp(zeta), axis=1)

    eps = whitened_draws(8, 12, 5)  # 24 features, 8 draws
    coef = _control_slopes(log_joint, family, eps, theta)
    zeta = np.asarray(family.draws(theta, eps)[0])
    F = np.asarray(family.control_features(zeta))
    F = F - F.mean(axis=0)
    scale = np.sqrt(np.mean(F**2, axis=0))
    G, lp = F / scale, log_joint(zeta)
    primal = np.linalg.solve(G.T @ G + 1e-3 * len(G) * np.eye(24), G.T @ (lp - lp.mean())) / scale
    assert coef.shape == (24,) and np.allclose(coef, primal, rtol=1e-8, atol=1e-10)
