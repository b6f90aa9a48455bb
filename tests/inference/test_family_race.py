"""ppl.inference.family_race: a positive latent gets a Gaussian on the log scale where, at the
mode, it has the higher ELBO than the moment-matched gamma (a posterior leaning right on the log
scale, an inverse gamma's), and keeps its gamma where the gamma is the posterior's own shape."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

from ppl.families.registry import GAUSSIAN
from ppl.inference.family_race import gaussian_wins
from ppl.inference.sgvb import Block

GAMMA = "gamma"


def _log_joint(kind: str, a: float, b: float):
    """log p(u) of x = e^u (independent coordinates), Jacobian included: gamma(a, b) or
    inv_gamma(a, b) in x."""

    def log_joint(zeta):
        if kind == "gamma":
            return anp.sum(a * zeta - b * anp.exp(zeta), axis=1)
        return anp.sum(-a * zeta - b * anp.exp(-zeta), axis=1)

    return log_joint


def _race(kind: str, a: float, b: float, size: int = 8):
    mode = np.full(size, np.log(a / b) if kind == "gamma" else np.log(b / a))
    sd = np.full(size, 1 / np.sqrt(a))  # the Laplace sds on the log scale, both cases
    race = gaussian_wins(_log_joint(kind, a, b), [Block("x", GAMMA, 0, size)], size, mode, sd, 0)
    return race["wins"], race["scores"]


def test_an_inverse_gamma_posterior_gets_the_gaussian():
    wins, scores = _race("inv_gamma", 3.0, 2.0)
    assert wins == ["x"]
    gain, se = scores["x"]
    assert gain > 2 * se > 0
    # one coordinate alone: the gain (0.11 nats) is within 2 standard errors of the paired
    # difference on 64 draws: a tie, which keeps the gamma (the rule is conservative)
    assert _race("inv_gamma", 3.0, 2.0, size=1)[0] == []


def test_a_gamma_posterior_keeps_the_gamma():
    wins, scores = _race("gamma", 3.0, 2.0)
    assert wins == []
    assert scores["x"][0] < 0  # the gamma is exact here: the Gaussian is worse


def test_only_gamma_blocks_are_raced():
    race = gaussian_wins(_log_joint("inv_gamma", 3.0, 2.0), [Block("x", GAUSSIAN, 0, 1)], 1,
                         np.zeros(1), np.ones(1), 0)  # fmt: skip
    assert race == {"wins": [], "scores": {}}
    race = gaussian_wins(_log_joint("inv_gamma", 3.0, 2.0), [Block("x", GAMMA, 0, 1)], 1,
                         np.zeros(1), np.ones(1), 0, skip=["x"])  # fmt: skip
    assert race == {"wins": [], "scores": {}}
