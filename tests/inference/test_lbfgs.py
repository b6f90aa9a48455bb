"""ppl/inference/lbfgs.py against known minima, a wall of non-finite values, and the secant
equation its inverse-Hessian product must satisfy."""

from __future__ import annotations

import numpy as np

from ppl.inference.lbfgs import lbfgs


def rosenbrock(x):
    value = 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2
    grad = np.array([-400 * x[0] * (x[1] - x[0] ** 2) - 2 * (1 - x[0]), 200 * (x[1] - x[0] ** 2)])
    return value, grad


def test_reaches_the_rosenbrock_minimum():
    opt = lbfgs(rosenbrock, np.array([-1.2, 1.0]), ftol=0, gtol=1e-10)
    assert opt.success and np.allclose(opt.x, [1, 1], atol=1e-8)
    assert opt.nit < 100  # textbook L-BFGS takes about 35 iterations here


def test_backs_off_from_non_finite_values():
    """f(x) = sum(x - log x) is +inf for x <= 0; from near the wall with a long first step the
    line search must come back inside and find the minimum at 1."""

    def f(x):
        if np.any(x <= 0):
            return np.inf, np.full_like(x, np.nan)
        return float(np.sum(x - np.log(x))), 1 - 1 / x

    opt = lbfgs(f, np.array([0.05, 3.0, 0.5]), ftol=0, gtol=1e-9)
    assert opt.success and np.allclose(opt.x, 1, atol=1e-8)


def test_inverse_hessian_product_satisfies_the_last_secant_equation():
    """On a quadratic with Hessian A, the two-loop product maps the last gradient change y to
    the last step s exactly (the BFGS update's defining property), and y = A s."""
    rng = np.random.default_rng(0)
    M = rng.normal(size=(6, 6))
    A = M @ M.T + 6 * np.eye(6)
    b = rng.normal(size=6)

    def f(x):
        return 0.5 * x @ A @ x - b @ x, A @ x - b

    opt = lbfgs(f, np.zeros(6), max_iter=4, ftol=0, gtol=0)
    s, y = opt.hess_inv.pairs[-1]
    assert np.allclose(y, A @ s)
    assert np.allclose(opt.hess_inv.matvec(y), s, rtol=1e-10, atol=1e-12)
    final = lbfgs(f, np.zeros(6), ftol=0, gtol=1e-10)
    assert np.allclose(final.x, np.linalg.solve(A, b), atol=1e-9)


def test_stall_rule_ends_a_creep_that_ftol_does_not_see():
    """f = sum(x^4): the minimum's flat bottom is crept to (each gain above ftol = 0); with
    stall = (5, 1e-3) it stops, converged, once 5 iterations gained less than 1e-3 in all."""

    def f(x):
        return float(np.sum(x**4)), 4 * x**3

    x0 = np.array([3.0, -2.0, 1.0])
    full = lbfgs(f, x0, ftol=0, gtol=1e-12, max_iter=500)
    cut = lbfgs(f, x0, ftol=0, gtol=1e-12, max_iter=500, stall=(5, 1e-3))
    assert full.success and cut.success and "5 iterations" in cut.message
    assert cut.nit < full.nit / 2
    assert cut.fun < 1e-3  # within the stall's total of the minimum, 0
