"""The per-family classes of ppl.families against closed forms, and the composite built from them;
the one stopping rule of the stochastic loop."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import digamma, polygamma

from ppl.families.composite import Block, MixedFamily
from ppl.families.gamma import GammaFamily
from ppl.families.gaussian import MeanFieldGaussian
from ppl.inference.stopping import StoppingRule

MEAN = np.array([-1.0, 0.3, 2.5])
SD = np.array([0.2, 1.0, 3.0])


@pytest.mark.parametrize("cls", [MeanFieldGaussian, GammaFamily])
def test_from_gaussian_matches_the_moments(cls):
    """Moment-matching from a Gaussian on zeta gives a q with that mean and sd of zeta (a gamma:
    of log x, digamma(a) - log b and sqrt(trigamma(a)))."""
    fam = cls(3)
    theta = fam.from_gaussian(MEAN, SD)
    mean, sd = fam.moments(theta)
    np.testing.assert_allclose(mean, MEAN, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(sd, SD, rtol=1e-8)


@pytest.mark.parametrize("cls", [MeanFieldGaussian, GammaFamily])
def test_draws_entropy_and_log_q_agree(cls):
    """The draws from noise follow q (their mean and sd are q's moments) and the entropy is
    -E_q[log q(zeta)], estimated on 200,000 draws (4 standard errors)."""
    fam = cls(3)
    theta = fam.from_gaussian(MEAN, SD)
    eps = np.random.default_rng(0).standard_normal((200_000, 3))
    zeta, entropy = fam.draws(theta, eps)
    zeta = np.asarray(zeta)
    mean, sd = fam.moments(theta)
    np.testing.assert_allclose(zeta.mean(axis=0), mean, atol=4 * np.max(sd) / np.sqrt(len(eps)))
    np.testing.assert_allclose(zeta.std(axis=0), sd, rtol=0.01)
    minus_log_q = -fam.log_q_terms(theta, zeta).sum(axis=1)
    se = minus_log_q.std() / np.sqrt(len(eps))
    assert abs(minus_log_q.mean() - float(entropy)) < 4 * se


def test_gamma_log_q_is_the_density_of_log_x():
    """log q(zeta) of a gamma block = log Gamma(e^zeta; a, b) + zeta (the Jacobian of e^zeta)."""
    fam = GammaFamily(2)
    theta = fam.init(mean=[0.5, 4.0], shape=[0.3, 20.0])
    a, b = fam.shape_rate(theta)
    zeta = np.log(np.array([[0.1, 3.0], [2.0, 5.5]]))
    expected = stats.gamma(a, scale=1 / b).logpdf(np.exp(zeta)) + zeta
    np.testing.assert_allclose(fam.log_q_terms(theta, zeta), expected, rtol=1e-12)
    mean, sd = fam.moments(theta)
    np.testing.assert_allclose(mean, digamma(a) - np.log(b), rtol=1e-12)
    np.testing.assert_allclose(sd, np.sqrt(polygamma(1, a)), rtol=1e-12)


def test_composite_is_its_blocks_side_by_side():
    """The composite's draws, entropy and log q are its blocks', each on its own columns and in
    its own slice of theta (blocks given out of coordinate order)."""
    blocks = [Block("g", "gamma", 2, 2), Block("m", "gaussian", 0, 2)]
    family = MixedFamily(blocks, 4)
    rng = np.random.default_rng(1)
    theta = rng.normal(size=family.size)
    eps = rng.standard_normal((5, 4))
    zeta, entropy = family.draws(theta, eps)
    g, m = GammaFamily(2), MeanFieldGaussian(2)
    zg, hg = g.draws(theta[:4], eps[:, 2:])
    zm, hm = m.draws(theta[4:], eps[:, :2])
    np.testing.assert_allclose(np.asarray(zeta), np.hstack([zm, zg]), rtol=1e-14)
    assert float(entropy) == pytest.approx(float(hg + hm), rel=1e-14)
    log_q = g.log_q_terms(theta[:4], zg).sum(1) + m.log_q_terms(theta[4:], zm).sum(1)
    np.testing.assert_allclose(family.log_q(theta, np.asarray(zeta)), log_q, rtol=1e-13)
    np.testing.assert_allclose(family.log_q_terms(theta, np.asarray(zeta)).sum(1), log_q,
                               rtol=1e-13)  # fmt: skip
    assert family.describe(theta)["g"]["family"] == "gamma"
    # a Gaussian fit moved to this family: the Gaussian block kept, the gamma moment-matched
    gaussian = MixedFamily([Block("g", "gaussian", 2, 2), Block("m", "gaussian", 0, 2)], 4)
    start = gaussian.from_gaussian(np.arange(4.0), np.full(4, 0.5))
    moved = family.moved_from(gaussian, start)
    np.testing.assert_array_equal(moved[4:], start[4:])
    np.testing.assert_allclose(family.moments(moved)[0], np.arange(4.0), rtol=1e-9)


def test_stopping_rule_is_stans_relative_change():
    """|new - old| / max(|old|, 1) into a window; converged when its mean or median is below
    the tolerance, never before two changes."""
    rule = StoppingRule(max_iter=1000, eval_elbo=100, tol_rel_obj=0.01, start=-100.0)
    assert not rule.update(-100.5)  # one change (0.005) is not enough
    assert rule.update(-100.4)  # changes 0.005, 0.001
    near_zero = StoppingRule(1000, 100, 0.01, start=0.001)
    near_zero.update(0.002)
    assert near_zero.buffer[0] == pytest.approx(0.001)  # divided by 1, not by 0.001
    falls = StoppingRule(1000, 100, 0.01, start=-100.0)
    assert falls.fell(-102.0) and not falls.fell(-100.5) and not falls.fell(-90.0)
