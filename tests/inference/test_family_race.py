"""ppl.inference.family_race: a positive latent gets a Gaussian on the log scale where, at the
mode, it has the higher ELBO than the moment-matched gamma (a posterior leaning right on the log
scale, an inverse gamma's), and keeps its gamma where the gamma is the posterior's own shape."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

from ppl.families.registry import GAUSSIAN
from ppl.inference.family_race import gaussian_wins, log_scale_notes
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
    assert race == {"wins": [], "ties": [], "scores": {}}
    race = gaussian_wins(_log_joint("inv_gamma", 3.0, 2.0), [Block("x", GAMMA, 0, 1)], 1,
                         np.zeros(1), np.ones(1), 0, skip=["x"])  # fmt: skip
    assert race == {"wins": [], "ties": [], "scores": {}}


def _two_blocks(size_x: int, a_y: float):
    """x: size_x inverse-gamma(3, 2) coordinates (the Gaussian wins); y: one gamma(a_y, a_y)."""

    def log_joint(zeta):
        x, y = zeta[:, :size_x], zeta[:, size_x]
        return anp.sum(-3.0 * x - 2.0 * anp.exp(-x), axis=1) + a_y * y - a_y * anp.exp(y)

    mode = np.append(np.full(size_x, np.log(2 / 3)), 0.0)
    sd = np.append(np.full(size_x, 1 / np.sqrt(3)), 1 / np.sqrt(a_y))
    blocks = [Block("x", GAMMA, 0, size_x), Block("y", GAMMA, size_x, 1)]
    return gaussian_wins(log_joint, blocks, size_x + 1, mode, sd, 0)


def test_a_tie_follows_the_winners_when_they_hold_most_coordinates():
    race = _two_blocks(8, 400.0)  # y nearly Gaussian on the log scale: a tie
    gain, se = race["scores"]["y"]
    assert abs(gain) < 2 * se
    assert race["wins"] == ["x", "y"]  # q Gaussian throughout: one round of whitened draws
    assert race["ties"] == ["y"]


def test_a_tie_keeps_its_gamma_where_the_gamma_blocks_are_most():
    def log_joint(zeta):
        x, y = zeta[:, :8], zeta[:, 8:]
        return anp.sum(-3.0 * x - 2.0 * anp.exp(-x), axis=1) + anp.sum(
            400 * y - 400 * anp.exp(y), 1
        )

    mode = np.append(np.full(8, np.log(2 / 3)), np.zeros(9))
    sd = np.append(np.full(8, 1 / np.sqrt(3)), np.full(9, 0.05))
    blocks = [Block("x", GAMMA, 0, 8), Block("y", GAMMA, 8, 9)]
    assert gaussian_wins(log_joint, blocks, 17, mode, sd, 0)["wins"] == ["x"]


def test_the_notes_name_winners_ties_and_sharp_latents_apart():
    polish = {"gaussian_not_gamma": ["s", "rho", "alpha"],
              "family_race": {"wins": ["rho", "alpha"], "ties": ["alpha"]}}  # fmt: skip
    sharp, race = log_scale_notes(polish)
    assert sharp.startswith("auto: s: ") and "too concentrated" in sharp
    assert race.startswith("auto: rho: ") and "alpha too (a tie" in race
    assert log_scale_notes({}) == []
