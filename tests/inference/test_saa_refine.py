"""The predicted move of a fixed-draw optimum near MOVE_TOL is re-predicted by preconditioned
conjugate gradients (ppl.inference.saa.REFINE_BAND): a stopping decision made from an L-BFGS
inverse-Hessian approximation, which depends on the solve's path, is made from the Newton step
on the larger set instead. Checked against closed forms: a quadratic's Newton step, and a
standard normal posterior whose mean-field optimum and ELBO Hessian are known."""

from __future__ import annotations

from types import SimpleNamespace

import autograd.numpy as anp
import numpy as np

from ppl.inference.saa import (
    MOVE_TOL,
    REFINE_BAND,
    _predicted_move,
    _refined_move,
    movement,
    whitened_draws,
)
from ppl.inference.sgvb import Block, MixedFamily

FAMILY = MixedFamily([Block("x", "gaussian", 0, 2)], 2)


class Diagonal:
    """An inverse-Hessian approximation: a fixed diagonal."""

    def __init__(self, diag):
        self.diag = np.asarray(diag, dtype=float)

    def matvec(self, v):
        return self.diag * np.asarray(v, dtype=float)


class Plain:
    """A family whose changes are the parameters' own."""

    @staticmethod
    def changes(before, after):
        return np.abs(np.asarray(after) - np.asarray(before))


def test_conjugate_gradients_reach_a_quadratics_newton_step_from_a_wrong_preconditioner():
    A, c = np.diag([1.0, 9.0]), np.array([0.05, -0.02])

    def objective(theta):
        d = theta - c
        return 0.5 * anp.dot(d, anp.dot(A, d))

    theta = np.zeros(2)
    g = A @ (theta - c)
    inverse = Diagonal([3.0, 3.0])  # a path's scaled identity: 3x and 1/3 of the true one
    lbfgs = movement(Plain.changes(theta, theta - inverse.matvec(g)))
    move, products = _refined_move(objective, Plain, theta, g, g, inverse, lbfgs, 3)
    assert np.isclose(move, movement(c), rtol=1e-9)
    assert not np.isclose(lbfgs, movement(c), rtol=0.2)
    assert products <= 3


def log_joint(zeta):
    """A standard normal in 2 dimensions: the mean-field optimum is means 0, log sds 0."""
    return -0.5 * anp.sum(zeta**2, axis=1)


def _prediction(mean: float, scale: float):
    """The predicted move from theta = (mean, mean, 0, 0) with an inverse Hessian `scale` times
    the exact one (on whitened draws the fixed-draw ELBO is exact: Hessian 1 in a mean, 2 in
    a log sd), and what it recorded."""
    eps = whitened_draws(32, 2, seed=3)
    theta = np.array([mean, mean, 0.0, 0.0])
    opt = SimpleNamespace(hess_inv=Diagonal(scale * np.array([1.0, 1.0, 0.5, 0.5])))
    record: dict = {}
    move = _predicted_move(log_joint, FAMILY, eps, {"evals": 0}, theta, opt, None, record)
    exact = movement(FAMILY.changes(theta, np.zeros(4)))
    return move, exact, record


def test_a_prediction_inflated_across_the_threshold_is_refined_to_the_newton_step():
    move, exact, record = _prediction(0.06, 2.5)
    assert exact < MOVE_TOL < record["lbfgs_move"] <= REFINE_BAND[1] * MOVE_TOL
    assert np.isclose(move, exact, rtol=1e-4)
    assert move <= MOVE_TOL  # the road stops here; the L-BFGS prediction alone went on


def test_a_prediction_far_from_the_threshold_is_taken_as_it_is():
    move, exact, record = _prediction(0.5, 2.5)
    assert move > REFINE_BAND[1] * MOVE_TOL and not record
    assert np.isclose(move, 2.5 * exact, rtol=1e-6)  # the L-BFGS step's, 2.5 times too far
    move, exact, record = _prediction(0.01, 1.0)
    assert move <= REFINE_BAND[0] * MOVE_TOL and not record
    assert np.isclose(move, exact, rtol=1e-6)
