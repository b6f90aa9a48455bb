"""The mixture of Gaussians on the fixed-draw road (ppl.inference.mixture_fit) and the default
road's use of it where its mode searches find a second mode (ppl.methods.mixture), against
exact posteriors: mixtures of Gaussians, equal and unequal weights, in one and two dimensions.
Where no second mode was found the mixture never runs; where one Gaussian is the posterior the
mixture is not kept."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd.scipy.special import logsumexp

import ppl.inference.mixture_fit as mixture_fit
from ppl.families.mixture import MIXTURE
from ppl.inference.auto import CandidateFailed
from ppl.inference.mixture_fit import fit_mixture
from ppl.inference.result import VIResult
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

LOG_2PI = np.log(2 * np.pi)


def _gaussian(mean, L) -> VIResult:
    mean, L = np.atleast_1d(np.asarray(mean, float)), np.atleast_2d(np.asarray(L, float))
    return VIResult("fullrank", mean, L, [], 0.0, 0, 0, True, 0.0, 0.0)


def _mixture_log_joint(weights, means, scales):
    """log sum_k w_k N(z; m_k, L_k L_k') for rows z (autograd)."""
    weights = np.asarray(weights, float)
    means = [np.atleast_1d(np.asarray(m, float)) for m in means]
    inverses = [np.linalg.inv(np.atleast_2d(np.asarray(L, float))) for L in scales]
    logdets = [float(np.sum(np.log(np.abs(np.diag(np.atleast_2d(L)))))) for L in scales]

    def log_joint(z):
        terms = []
        for w, m, inv, logdet in zip(weights, means, inverses, logdets, strict=True):
            u = anp.dot(z - m, inv.T)
            terms.append(np.log(w) - 0.5 * anp.sum(u**2, axis=1) - logdet
                         - 0.5 * len(m) * LOG_2PI)  # fmt: skip
        return logsumexp(anp.stack(terms, axis=1), axis=1)

    return log_joint


def _exact_moments(weights, means, scales):
    weights = np.asarray(weights, float)
    means = [np.atleast_1d(np.asarray(m, float)) for m in means]
    covs = [np.atleast_2d(L) @ np.atleast_2d(L).T for L in scales]
    mean = sum(w * m for w, m in zip(weights, means, strict=True))
    cov = sum(w * (c + np.outer(m - mean, m - mean))
              for w, m, c in zip(weights, means, covs, strict=True))  # fmt: skip
    return mean, np.sqrt(np.diag(cov))


def test_unequal_weights_and_scales_are_found_from_wrong_starts():
    """0.3 N(-10, 1) + 0.7 N(10, 2^2), started at -9 and 9 with sd 1 and equal weights: the
    stratified ELBO's optimum is the posterior itself (ELBO = log Z = 0)."""
    log_joint = _mixture_log_joint([0.3, 0.7], [-10.0, 10.0], [[[1.0]], [[2.0]]])
    single = _gaussian([10.0], [[2.0]])
    q = fit_mixture(log_joint, single, [np.array([-9.0]), np.array([9.0])],
                    [np.eye(1), np.eye(1)], seed=0)  # fmt: skip
    np.testing.assert_allclose(q.family.weights(q.theta), [0.3, 0.7], atol=1e-3)
    (m1, L1), (m2, L2) = q.family.mean_scales(q.theta)
    np.testing.assert_allclose([m1[0], m2[0]], [-10.0, 10.0], atol=1e-3)
    np.testing.assert_allclose([L1[0, 0], L2[0, 0]], [1.0, 2.0], atol=1e-3)
    assert abs(q.elbo) < 1e-3
    assert abs(q.polish["gain"] + np.log(0.7)) < 0.01  # the single Gaussian's ELBO: log 0.7
    assert q.method == MIXTURE and q.grad_evals < 2000


def test_two_correlated_components_in_two_dimensions():
    """0.4 N((-5, 2), S1) + 0.6 N((5, -2), S2), S1 with correlation 0.77, S2 with -0.5: each
    component and the weights recovered, and q's moments the mixture's exact ones."""
    weights = [0.4, 0.6]
    means = [np.array([-5.0, 2.0]), np.array([5.0, -2.0])]
    scales = [np.array([[1.0, 0.0], [0.8, 0.66]]), np.array([[1.5, 0.0], [-0.5, 0.866]])]
    log_joint = _mixture_log_joint(weights, means, scales)
    single = _gaussian(means[1], np.eye(2))
    q = fit_mixture(log_joint, single, [means[0] + 0.5, means[1] - 0.5], [np.eye(2), np.eye(2)],
                    weights=[0.5, 0.5], seed=0)  # fmt: skip
    np.testing.assert_allclose(q.family.weights(q.theta), weights, atol=0.01)
    for (mu, L), m, S in zip(q.family.mean_scales(q.theta), means, scales, strict=True):
        np.testing.assert_allclose(mu, m, atol=0.02)
        np.testing.assert_allclose(L @ L.T, S @ S.T, atol=0.03)
    mean, sd = _exact_moments(weights, means, scales)
    zeta = q.sample(np.random.default_rng(0), 100_000)
    assert np.all(np.abs(zeta.mean(axis=0) - mean) < 0.05 * sd)
    np.testing.assert_allclose(zeta.std(axis=0), sd, rtol=0.02)
    np.testing.assert_allclose(q.log_q(zeta), log_joint(zeta), atol=0.02)


def test_on_a_gaussian_posterior_the_mixture_is_not_kept():
    """One Gaussian is exact: a second component gains nothing on independent draws, and the
    gradients spent are counted."""

    def log_joint(z):
        return -0.5 * anp.sum(z**2, axis=1) - LOG_2PI

    with pytest.raises(CandidateFailed) as failed:
        starts = [np.zeros(2), np.array([3.0, 0.0])]
        fit_mixture(log_joint, _gaussian(np.zeros(2), np.eye(2)), starts, [np.eye(2)] * 2, seed=0)
    assert failed.value.grad_evals > 0


# -- the default road ------------------------------------------------------------------------


def _model(text: str) -> CompiledModel:
    return CompiledModel(check(parse(text)), {})


def _fit_moments(result):
    x = np.concatenate([np.asarray(v, float).reshape(len(v), -1) for v in result.draws.values()],
                       axis=1)  # fmt: skip
    return x.mean(axis=0), x.std(axis=0, ddof=1)


MIXTURES = {
    "equal, +-10": (
        "parameters { real x; } model { target += log_mix(0.5, normal_lpdf(x | -10, 1), "
        "normal_lpdf(x | 10, 1)); }",
        ([0.5, 0.5], [[-10.0], [10.0]], [[[1.0]], [[1.0]]]),
    ),
    "0.3 / 0.7, sds 1 and 2": (
        "parameters { real x; } model { target += log_mix(0.3, normal_lpdf(x | -10, 1), "
        "normal_lpdf(x | 10, 2)); }",
        ([0.3, 0.7], [[-10.0], [10.0]], [[[1.0]], [[2.0]]]),
    ),
    "2-D, 0.3 / 0.7, one component correlated": (
        "parameters { vector[2] z; } model { target += log_mix(0.3, normal_lpdf(z[1] | -6, 1) "
        "+ normal_lpdf(z[2] | 3 + 0.8 * (z[1] + 6), 0.5), normal_lpdf(z[1] | 6, 2) "
        "+ normal_lpdf(z[2] | -3, 1)); }",
        ([0.3, 0.7], [[-6.0, 3.0], [6.0, -3.0]],
         [[[1.0, 0.0], [0.8, 0.5]], [[2.0, 0.0], [0.0, 1.0]]]),
    ),
    "2-D, three equal modes (the road's probe finds two; more mode searches the third)": (
        "parameters { vector[2] z; } model { target += log_sum_exp({normal_lpdf(z | -8, 1), "
        "normal_lpdf(z | 8, 1), normal_lpdf(z[1] | 8, 1) + normal_lpdf(z[2] | -8, 1)}); }",
        ([1 / 3] * 3, [[-8.0, -8.0], [8.0, 8.0], [8.0, -8.0]], [np.eye(2)] * 3),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MIXTURES))
def test_the_default_road_fits_a_mixture_where_it_finds_two_modes(name):
    """Every mean within 0.1 exact sd, every sd within [0.8, 1.25] of the exact one, and the
    verdict good: the second-mode fault is answered by a q that covers both modes."""
    text, exact = MIXTURES[name]
    result = fit(_model(text), "auto", seed=1, draws=4000)
    mean, sd = _exact_moments(*exact)
    got_mean, got_sd = _fit_moments(result)
    assert result.method == MIXTURE
    assert np.all(np.abs(got_mean - mean) < 0.1 * sd)
    assert np.all((0.8 < got_sd / sd) & (got_sd / sd < 1.25))
    assert result.diagnostics["verdict"] in ("good", "usable")
    assert not result.diagnostics["faults"]
    assert result.vi.grad_evals < 1000
    assert result.vi.family.K == len(exact[0])  # a component per mode
    assert any(f"mixture of {len(exact[0])} Gaussians" in note for note in result.notes)


def test_without_a_second_mode_the_mixture_never_runs(monkeypatch):
    """A unimodal posterior: the probe finds nothing, and no mixture is fitted."""

    def refuse(*args, **kwargs):
        raise AssertionError("the mixture ran without a second mode")

    monkeypatch.setattr(mixture_fit, "fit_mixture", refuse)
    rng = np.random.default_rng(3)
    model = CompiledModel(check(parse("data { int N; vector[N] y; } parameters { real mu; "
                                      "real<lower=0> s; } model { y ~ normal(mu, s); }")),
                          {"N": 40, "y": rng.normal(1.0, 2.0, 40)})  # fmt: skip
    result = fit(model, "auto", seed=1)
    assert result.method != MIXTURE
    assert not any("mixture" in note for note in result.notes)


def test_above_its_dimension_limit_the_second_mode_stays_a_fault(monkeypatch):
    """Over MIXTURE_MAX_DIM parameters (here the limit lowered to 0) no mixture is tried: the
    verdict names the second mode and a note says why."""
    import ppl.methods.mixture as mixture_method

    monkeypatch.setattr(mixture_method, "MIXTURE_MAX_DIM", 0)
    result = fit(_model(MIXTURES["equal, +-10"][0]), "auto", seed=1)
    assert result.method != MIXTURE
    assert result.diagnostics["verdict"] == "not reliable"
    assert any(f["how"] == "second mode" for f in result.diagnostics["faults"])
    assert any("no mixture of Gaussians was tried" in note for note in result.notes)
