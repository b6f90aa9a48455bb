"""ppl.diagnostics.settle: k-hat redrawn from MORE times the draws only near a threshold, the
output draws among them, and the road's settled k-hat handed to the verdict."""

from __future__ import annotations

import numpy as np
from scipy import stats

from ppl.diagnostics.psis import check_fit
from ppl.diagnostics.settle import MORE, SETTLED, khat_threshold, more_draws, near, settle


class Normal:
    """q = N(0, s^2) in one dimension."""

    def __init__(self, s: float):
        self.s = s

    def sample(self, rng, n):
        return rng.normal(0.0, self.s, size=(n, 1))

    def log_q(self, z):
        return stats.norm.logpdf(z[:, 0], scale=self.s)


def student(z):
    return stats.t.logpdf(z[:, 0], df=2)  # its tail against a normal q's: k-hat near 1


def test_threshold_and_near():
    assert np.isclose(khat_threshold(1000), 2 / 3) and khat_threshold(10_000) == 0.7
    assert near(0.45, 1000) and near(0.65, 1000) and not near(0.3, 1000)
    assert not near(0.45, 1000, (0.7,)) and not near(np.inf, 1000)


def test_more_draws_keep_the_given_draws():
    q, rng = Normal(1.0), np.random.default_rng(0)
    zeta = q.sample(rng, 200)
    checked = check_fit(student, q.log_q, zeta)
    everything, more = more_draws(q, student, rng, zeta, checked)
    assert everything.shape == (MORE * 200, 1) and np.array_equal(everything[:200], zeta)
    np.testing.assert_array_equal(more["log_p"][:200], checked["log_p"])
    again = check_fit(student, q.log_q, everything)
    assert again["khat"] == more["khat"]


def test_settle_only_near_a_threshold():
    rng = np.random.default_rng(1)
    exact = Normal(1.0)
    zeta = exact.sample(rng, 400)
    diag = check_fit(lambda z: stats.norm.logpdf(z[:, 0]), exact.log_q, zeta)
    assert not settle(diag, exact, lambda z: stats.norm.logpdf(z[:, 0]), rng, zeta)
    assert "khat_draws" not in diag and SETTLED not in diag
    q = Normal(1.0)
    zeta = q.sample(rng, 400)
    diag = check_fit(student, q.log_q, zeta)
    diag["khat"] = 0.45  # as a noisy k-hat near 0.5 would be
    assert settle(diag, q, student, rng, zeta)
    assert diag["khat_draws"] == MORE * 400 and diag["khat_output_draws"] == 0.45
    assert diag["khat"] > 0.7  # the heavy tail, seen from 1,600 draws
    assert diag[SETTLED][0].shape == (MORE * 400, 1)
    assert not settle(diag, q, student, rng, zeta)  # settled once
