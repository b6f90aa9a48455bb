"""A fixed-draw round whose ELBO runs away (ppl.inference.saa.RUNAWAY): the objective raises the
alarm, and the candidates of a round that ran away are compared on independent draws."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

from ppl.inference.saa import (
    RUNAWAY,
    NegativeElbo,
    _fresh_choice,
    _watch,
    elbo_on,
    whitened_draws,
)
from ppl.inference.sgvb import Block, MixedFamily

FAMILY = MixedFamily([Block("x", "gaussian", 0, 2)], 2)


def log_joint(zeta):
    """A standard normal in 2 dimensions, normalised: the exact q has ELBO 0."""
    return -0.5 * anp.sum(zeta**2, axis=1) - np.log(2 * np.pi)


def test_the_first_round_is_not_watched_and_a_later_one_against_the_last_optimum():
    counter = {"evals": 0}
    _watch(counter, [])
    assert counter["ceiling"] is None and not counter["ran_away"]
    _watch(counter, [{"elbo": -846.0}])
    assert np.isclose(counter["ceiling"], -846.0 + RUNAWAY * 847.0)


def test_an_elbo_above_the_ceiling_raises_the_alarm_and_the_best_below_it_is_kept():
    eps = whitened_draws(16, 2, seed=1)
    counter = {"evals": 0}
    objective = NegativeElbo(log_joint, FAMILY, eps, counter, None)
    near, far = np.zeros(4), np.array([3.0, 0.0, 0.0, 0.0])  # (means, log sds)
    _watch(counter, [{"elbo": -1.0}])
    objective(far)
    objective(near)
    assert not counter["ran_away"]
    assert np.array_equal(counter["sane"][1], near)  # the higher of the two
    counter["ceiling"] = -10.0  # now both are above it
    objective(far)
    assert counter["ran_away"]


def test_the_candidate_better_on_fresh_draws_wins_whatever_its_own_draws_said():
    exact, shifted = np.zeros(4), np.array([2.0, 0.0, 0.0, 0.0])
    theta, value = _fresh_choice(log_joint, FAMILY, [shifted, None, exact], seed=3)
    assert np.array_equal(theta, exact)
    assert abs(value) < 1e-8  # -ELBO of the exact q: 0 on whitened draws
    assert np.isclose(value, -elbo_on(log_joint, FAMILY, exact, whitened_draws(256, 2, 3)))
