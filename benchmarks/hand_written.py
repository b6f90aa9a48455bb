"""Hand-written numpy + autograd log joints, the yardstick of benchmarks/gradient_speed.py --hand.

Each case pairs a ppl model (a Stan program as a Stan user writes it: loops and all) with its data
and with the same log joint written by hand the way a numpy programmer would: vectorised with index
arrays, on the same unconstrained parameters (same transforms, same log-Jacobians, same constant
terms), so the two must agree to rounding (tests/models/test_hand_written.py checks it; the
benchmark
checks it again before timing).

    lp(zeta) -> (S,)   for zeta of shape (S, D)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import autograd.numpy as anp
import numpy as np
from autograd.scipy.special import logsumexp

ROOT = Path(__file__).resolve().parent.parent
HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


@dataclass
class Case:
    name: str
    source: str  # the ppl model
    data: dict
    hand: Callable  # zeta (S, D) -> log joint (S,)


def _normal(x, mu, sigma):
    z = (x - mu) / sigma
    return -0.5 * z * z - anp.log(sigma) - HALF_LOG_2PI


def _log_inv_logit(x):
    return -anp.logaddexp(0.0, -x)


def _log1m_inv_logit(x):
    return -anp.logaddexp(0.0, x)


# ---- ordered logistic, written as a loop over rows with if/else on the outcome ------------------

ORDERED_LOGISTIC_LOOP = """
data { int N; int K; vector[N] x; array[N] int<lower=1, upper=K> y; }
parameters { real beta; ordered[K - 1] c; }
model {
  beta ~ normal(0, 5);
  c ~ normal(0, 5);
  for (n in 1:N) {
    real eta = x[n] * beta;
    if (y[n] == 1) {
      target += log1m_inv_logit(eta - c[1]);
    } else if (y[n] == K) {
      target += log_inv_logit(eta - c[K - 1]);
    } else {
      target += log(inv_logit(eta - c[y[n] - 1]) - inv_logit(eta - c[y[n]]));
    }
  }
}
"""


def ordered_logistic(rows: int = 500, seed: int = 0) -> Case:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=rows)
    cuts = np.array([-1.0, 0.3, 1.5])
    y = 1 + np.searchsorted(cuts, 1.2 * x + rng.logistic(size=rows))
    k = len(cuts) + 1
    first, last = y == 1, y == k
    middle = ~(first | last)
    xm, upper = x[middle], y[middle] - 1  # c[y - 1] and c[y] as 0-based columns y - 2, y - 1

    def hand(zeta):
        beta, u = zeta[:, 0], zeta[:, 1:]
        c = anp.cumsum(anp.concatenate([u[:, :1], anp.exp(u[:, 1:])], axis=1), axis=1)
        lp = _normal(beta, 0, 5) + anp.sum(_normal(c, 0, 5), axis=1) + anp.sum(u[:, 1:], axis=1)
        eta = beta[:, None] * x[None, :]
        lp = lp + anp.sum(_log1m_inv_logit(eta[:, first] - c[:, :1]), axis=1)
        lp = lp + anp.sum(_log_inv_logit(eta[:, last] - c[:, -1:]), axis=1)
        em = beta[:, None] * xm[None, :]
        p = 1 / (1 + anp.exp(-(em - c[:, upper - 1]))) - 1 / (1 + anp.exp(-(em - c[:, upper])))
        return lp + anp.sum(anp.log(p), axis=1)

    data = {"N": rows, "K": k, "x": x, "y": y}
    return Case(f"ordered logistic loop (N={rows})", ORDERED_LOGISTIC_LOOP, data, hand)


# ---- posteriordb hmm_example: the forward algorithm -------------------------------------------


def hmm_example() -> Case:
    folder = ROOT / "models" / "posteriordb" / "hmm_example-hmm_example"
    data = json.loads((folder / "data.json").read_text())
    y = np.asarray(data["y"], dtype=float)

    def simplex2(u):  # Stan's stick-breaking for K = 2: x = (z, 1 - z), z = inv_logit(u)
        log_z, log_1mz = _log_inv_logit(u), _log1m_inv_logit(u)
        return anp.stack([anp.exp(log_z), anp.exp(log_1mz)], axis=1), log_z + log_1mz

    def hand(zeta):
        theta1, lj1 = simplex2(zeta[:, 0])
        theta2, lj2 = simplex2(zeta[:, 1])
        mu = anp.cumsum(anp.exp(zeta[:, 2:4]), axis=1)  # positive_ordered
        lp = lj1 + lj2 + anp.sum(zeta[:, 2:4], axis=1)
        lp = lp + _normal(mu[:, 0], 3, 1) + _normal(mu[:, 1], 10, 1)
        log_theta = anp.log(anp.stack([theta1, theta2], axis=1))  # (S, from j, to k)
        emit = _normal(y[None, :, None], mu[:, None, :], 1.0)  # (S, N, K), all steps at once
        gamma = emit[:, 0]
        for t in range(1, len(y)):
            gamma = logsumexp(gamma[:, :, None] + log_theta, axis=1) + emit[:, t]
        return lp + logsumexp(gamma, axis=1)

    source = (folder / "model.stan").read_text()
    return Case("hmm_example (N=100, K=2)", source, data, hand)


# ---- linear regression on 20,000 rows ------------------------------------------------------------


def linear_regression(rows: int = 20000, seed: int = 1) -> Case:
    rng = np.random.default_rng(seed)
    k = 4
    X = rng.normal(size=(rows, k)) * [1.0, 2.0, 0.5, 3.0] + [0.0, 1.0, -2.0, 5.0]
    y = 1.0 + X @ np.array([0.5, -1.0, 2.0, 0.3]) + rng.normal(0, 1.5, rows)
    Z = (X - X.mean(axis=0)) / X.std(axis=0, ddof=1)

    def hand(zeta):
        alpha, beta, u = zeta[:, 0], zeta[:, 1 : k + 1], zeta[:, k + 1]
        sigma = anp.exp(u)
        lp = _normal(alpha, 0, 10) + anp.sum(_normal(beta, 0, 10), axis=1) + (-sigma) + u
        mean = alpha[:, None] + beta @ Z.T
        return lp + anp.sum(_normal(y[None, :], mean, sigma[:, None]), axis=1)

    source = (ROOT / "models" / "linear_regression" / "vectorised.model").read_text()
    data = {"N": rows, "K": k, "X": X, "y": y}
    return Case(f"linear regression (N={rows})", source, data, hand)


# ---- eight schools (non-centred) ---------------------------------------------------------------


def eight_schools() -> Case:
    folder = ROOT / "models" / "eight_schools"
    data = json.loads((folder / "eight_schools.json").read_text())
    y, sigma = np.asarray(data["y"], float), np.asarray(data["sigma"], float)

    def hand(zeta):
        mu, u, tt = zeta[:, 0], zeta[:, 1], zeta[:, 2:]
        tau = anp.exp(u)
        lp = _normal(mu, 0, 5) - np.log(np.pi) - np.log(5) - anp.log1p((tau / 5) ** 2) + u
        theta = mu[:, None] + tau[:, None] * tt
        return lp + anp.sum(_normal(tt, 0, 1), axis=1) + anp.sum(_normal(y, theta, sigma), axis=1)

    source = (folder / "noncentered.model").read_text()
    return Case("eight schools (non-centred)", source, data, hand)


# ---- hierarchical logistic regression: 100 varying intercepts ----------------------------------


def varying_intercepts() -> Case:
    folder = ROOT / "models" / "varying_intercepts"
    data = json.loads((folder / "varying_intercepts.json").read_text())
    X, y = np.asarray(data["X"], float), np.asarray(data["y"], float)
    group = np.asarray(data["group"]) - 1
    k, j = data["K"], data["J"]
    sign = 2 * y - 1

    def hand(zeta):
        mu, u, beta, raw = zeta[:, 0], zeta[:, 1], zeta[:, 2 : 2 + k], zeta[:, 2 + k : 2 + k + j]
        tau = anp.exp(u)
        alpha = mu[:, None] + tau[:, None] * raw
        lp = _normal(mu, 0, 2.5) + _normal(tau, 0, 1) + u
        lp = lp + anp.sum(_normal(beta, 0, 2.5), axis=1) + anp.sum(_normal(raw, 0, 1), axis=1)
        eta = alpha[:, group] + beta @ X.T
        return lp + anp.sum(-anp.logaddexp(0.0, -sign * eta), axis=1)

    source = (folder / "varying_intercepts.model").read_text()
    return Case(f"varying intercepts (J={j}, N={len(y)})", source, data, hand)


# ---- posteriordb garch11: a recurrence over time ---------------------------------------------


def garch11() -> Case:
    folder = ROOT / "models" / "posteriordb" / "garch-garch11"
    data = json.loads((folder / "data.json").read_text())
    y, sigma1 = np.asarray(data["y"], dtype=float), float(data["sigma1"])

    def hand(zeta):
        mu, a0_raw, a1_raw, b1_raw = zeta[:, 0], zeta[:, 1], zeta[:, 2], zeta[:, 3]
        alpha0 = anp.exp(a0_raw)
        alpha1 = anp.exp(_log_inv_logit(a1_raw))
        beta1 = (1 - alpha1) * anp.exp(_log_inv_logit(b1_raw))  # upper bound 1 - alpha1
        lp = a0_raw + _log_inv_logit(a1_raw) + _log1m_inv_logit(a1_raw)
        lp = lp + anp.log(1 - alpha1) + _log_inv_logit(b1_raw) + _log1m_inv_logit(b1_raw)
        shock = alpha0[:, None] + alpha1[:, None] * (y[None, :-1] - mu[:, None]) ** 2
        variance, sigmas = sigma1**2, [anp.full(len(mu), sigma1)]
        for t in range(len(y) - 1):  # the recurrence, one step per time point over the draws
            variance = shock[:, t] + beta1 * variance
            sigmas.append(anp.sqrt(variance))
        sigma = anp.stack(sigmas, axis=1)
        return lp + anp.sum(_normal(y[None, :], mu[:, None], sigma), axis=1)

    source = (folder / "model.stan").read_text()
    return Case(f"garch11 (T={len(y)})", source, data, hand)


CASES = [ordered_logistic, hmm_example, linear_regression, eight_schools, varying_intercepts,
         garch11]  # fmt: skip
