"""Did the fit work? Pareto-smoothed importance sampling of q against the log joint (Yao,
Vehtari, Simpson & Gelman 2018; Vehtari et al., "Pareto smoothed importance sampling").

The importance ratios p(zeta, y) / q(zeta) of draws from q have a right tail; the shape k of a
generalized Pareto distribution fitted to it says how many moments the ratios have. k <= 0.5:
q is close to the posterior and importance sampling converges fast; 0.5 < k <= 0.7: usable,
slower; k > 0.7: the ratios' variance is effectively infinite, so neither q nor its importance
reweighting can be trusted. The same draws give an ELBO estimate with its Monte Carlo error.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

GOOD, USABLE = 0.5, 0.7


def fit_generalized_pareto(x: np.ndarray) -> tuple[float, float]:
    """(k, sigma) of a generalized Pareto fitted to the exceedances `x` (> 0) by Zhang &
    Stephens' (2009) empirical Bayes estimate, with k shrunk towards 0.5 by a weak prior of 10
    observations (as in the PSIS paper), which steadies it for the tail sizes used here."""
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    if n == 0 or not x[-1] > 0:
        return np.inf, np.nan  # no exceedance to fit (every one zero, or none): no shape
    m = 30 + int(np.sqrt(n))
    quartile = x[max(int(n / 4 + 0.5) - 1, 0)]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # candidate theta = k / sigma (> -1 / max x), weighted by their profile likelihood
        theta = -1.0 / x[-1] + (np.sqrt(m / (np.arange(1, m + 1) - 0.5)) - 1.0) / (3.0 * quartile)
        k_profile = np.mean(np.log1p(theta[:, None] * x), axis=1)
        log_lik = n * (np.log(theta / k_profile) - k_profile - 1.0)
    ok = np.isfinite(log_lik)
    if not ok.any():
        # exceedances spanning more than the floating-point range (a few in the subnormals, as
        # a q far too narrow gives): no finite fit, a tail too heavy for any k; never a crash
        return np.inf, np.nan
    theta, log_lik = theta[ok], log_lik[ok]
    weights = np.exp(log_lik - log_lik.max())
    theta_hat = float(np.sum(theta * weights) / np.sum(weights))
    k = float(np.mean(np.log1p(theta_hat * x)))
    sigma = k / theta_hat
    k = (n * k + 10 * 0.5) / (n + 10)
    return k, sigma


def psis(log_ratios: np.ndarray) -> tuple[np.ndarray, float]:
    """Pareto-smoothed log weights (normalised) and k-hat for raw log importance ratios.

    Never raises: a tail no generalized Pareto fits (every exceedance zero, constant ratios,
    fewer than 5 distinct draws, +inf ratios) gives k = inf, i.e. 'not reliable'. A nan ratio
    (undefined density) weighs nothing, as a -inf one does; check_fit passes both as -inf."""
    lr = np.where(np.isnan(log_ratios), -np.inf, np.asarray(log_ratios, dtype=float))
    S = lr.size
    top = np.max(lr) if S else -np.inf
    if not np.isfinite(top):
        # no draw with a finite ratio to weigh (none, or all -inf): the plain draws, no verdict;
        # a +inf ratio puts all the weight on its draws
        lw = np.zeros(lr.shape) if top == -np.inf else np.where(lr == np.inf, 0.0, -np.inf)
        return lw - np.log(np.sum(np.exp(lw))) if S else lw, float(np.inf)
    lw = lr - top
    tail = int(np.ceil(min(0.2 * S, 3.0 * np.sqrt(S))))
    # the tail and its cutoff among the draws with a finite ratio: smoothing must not give a
    # -inf (zero-weight) draw a weight
    tail = min(tail, int(np.isfinite(lw).sum()) - 1)
    k = np.inf
    if tail >= 5:
        order = np.argsort(lw)
        cutoff = lw[order[-tail - 1]]
        largest = order[-tail:]
        exceed = np.exp(lw[largest]) - np.exp(cutoff)
        if np.all(exceed > 0) or np.sum(exceed > 0) >= 5:
            k, sigma = fit_generalized_pareto(exceed[exceed > 0])
            if np.isfinite(k) and np.isfinite(sigma) and sigma > 0:
                p = (np.arange(1, tail + 1) - 0.5) / tail
                quantiles = (
                    sigma * np.expm1(-k * np.log1p(-p)) / k if abs(k) > 1e-12
                    else -sigma * np.log1p(-p)
                )  # fmt: skip
                lw[largest] = np.minimum(np.log(np.exp(cutoff) + quantiles), 0.0)
    lw -= np.log(np.sum(np.exp(lw)))
    return lw, float(k)


def verdict(k: float) -> str:
    if k <= GOOD:
        return "good"
    if k <= USABLE:
        return "usable"
    return "not reliable"


#: Importance ratios spanning less than this (relative to log p's span) are constant to rounding.
EXACT_SPREAD = 1e-9
#: Log ratios spanning less than this many nats (and half log p's span): every weight within 10 %
#: of every other, so importance-weighted estimates are q's own to that, whatever the Pareto
#: fit says (the exceedances are then q's draws' own spread, not a tail: a gamma(0.01, 1.01)
#: posterior's q with its rate 1.4 % off, weights within 2.6 %, had k-hat 1.49).
BOUNDED_SPREAD = 0.1


def check_fit(
    log_joint: Callable[[np.ndarray], np.ndarray],
    log_q: Callable[[np.ndarray], np.ndarray],
    zeta: np.ndarray,
    chunk: int = 200,
) -> dict:
    """k-hat, the ELBO and its Monte Carlo standard error from draws `zeta` of q (the draws
    the summaries are made of), the smoothed log weights for --psis, and each draw's log p and
    log q (draws.csv's log_p__ and log_g__)."""
    log_p, log_g = [], []
    for start in range(0, zeta.shape[0], chunk):
        z = zeta[start : start + chunk]
        with np.errstate(all="ignore"):
            log_p.append(np.asarray(log_joint(z), dtype=float))
            log_g.append(np.asarray(log_q(z), dtype=float))
    return check_densities(np.concatenate(log_p), np.concatenate(log_g))


def check_densities(lp: np.ndarray, lq: np.ndarray) -> dict:
    """check_fit's numbers from each draw's log p and log q."""
    with np.errstate(invalid="ignore"):
        lr = lp - lq
    finite = np.isfinite(lr)
    S = lr.size
    # per draw, as CmdStan's log_p__ and log_g__ columns
    out = {"draws": S, "nonfinite_draws": int(S - finite.sum()), "log_p": lp, "log_q": lq}
    if finite.sum() < 2:
        return {**out, "khat": float("inf"), "verdict": verdict(np.inf), "elbo": None,
                "elbo_mcse": None, "log_weights": None}  # fmt: skip
    lr_ok = np.where(finite, lr, -np.inf)
    log_weights, k = psis(lr_ok)
    if finite.all() and np.ptp(lr) <= EXACT_SPREAD * max(1.0, np.ptp(lp)) and np.ptp(lp) > 1e-6:
        # the ratios are constant to rounding while log p varies over the draws: q is the
        # posterior up to its normalising constant and the weights have no tail to fit (the
        # Pareto fit would see rounding noise, or fewer than 5 exceedances, and say inf). A q
        # collapsed to a point (log p constant too) keeps the fit's verdict.
        k = 0.0
    elif finite.all() and np.ptp(lr) <= BOUNDED_SPREAD and np.ptp(lp) > max(1e-6, 2 * np.ptp(lr)):
        k = min(k, 0.0)  # log p varies more than the ratios do: q follows it
    return {
        **out,
        "khat": k,
        "verdict": verdict(k),
        "elbo": float(np.mean(lr[finite])) if finite.all() else None,
        "elbo_mcse": float(np.std(lr[finite], ddof=1) / np.sqrt(finite.sum())),
        "log_weights": log_weights,
    }
