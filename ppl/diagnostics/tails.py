"""Whether a sd computed from draws can be trusted: the Pareto k-hat of the right tail of
(y - mean)^2 per scalar, as the `posterior` R package's pareto_khat judges a draw-based
estimate. k > 0.5: (y - mean)^2 has no finite variance, so the sd from S draws converges slower
than 1 / sqrt(S); past min(1 - 1 / log10 S, 0.7) it is not reliable at all (Neal's funnel: x =
exp(v / 2) x_raw with v ~ N(0, 9) puts a quarter of E[x^2] beyond the largest of 4000 draws, and
any 4000 draws understate sd(x) by about 20 %; k-hat about 1.0)."""

from __future__ import annotations

import numpy as np

#: Columns fitted at once (memory: candidates x tail x columns floats).
CHUNK = 512


def reliable_threshold(draws: int) -> float:
    """The k-hat above which a draw-based estimate from `draws` draws is not reliable."""
    return float(min(1.0 - 1.0 / np.log10(max(draws, 11)), 0.7))


def sd_tail_khat(matrix: np.ndarray) -> np.ndarray:
    """Per column of (draws, scalars), the Pareto k-hat of the right tail of (y - mean)^2 (the
    largest min(20 %, 3 sqrt(S)) values above the next one; Zhang & Stephens' estimate with the
    same weak prior towards 0.5 as ppl.diagnostics.psis), vectorised over columns; -inf where
    a column has no spread (a constant), +inf where it is not finite."""
    matrix = np.asarray(matrix, dtype=float)
    S, C = matrix.shape
    out = np.full(C, -np.inf)
    tail = int(np.ceil(min(0.2 * S, 3.0 * np.sqrt(S))))
    if S < 10 or tail < 5 or C == 0:
        return out
    finite = np.all(np.isfinite(matrix), axis=0)
    out[~finite] = np.inf
    for start in range(0, C, CHUNK):
        cols = np.arange(start, min(start + CHUNK, C))
        cols = cols[finite[cols]]
        if len(cols):
            out[cols] = _khat_columns(matrix[:, cols], tail)
    return out


def _khat_columns(y: np.ndarray, tail: int) -> np.ndarray:
    sq = np.sort((y - y.mean(axis=0)) ** 2, axis=0)
    x = sq[-tail:] - sq[-tail - 1]  # (tail, C), sorted, >= 0
    top = x[-1]
    flat = ~(top > 0)
    x = np.where(flat, 1.0, x / np.where(flat, 1.0, top))  # scale-free: k does not depend on it
    n = tail
    m = 30 + int(np.sqrt(n))
    quartile = np.maximum(x[max(int(n / 4 + 0.5) - 1, 0)], 1e-300)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        steps = np.sqrt(m / (np.arange(1, m + 1) - 0.5)) - 1.0  # (m,)
        theta = -1.0 / x[-1] + steps[:, None] / (3.0 * quartile)  # (m, C)
        k_profile = np.mean(np.log1p(theta[:, None, :] * x[None, :, :]), axis=1)  # (m, C)
        log_lik = n * (np.log(theta / k_profile) - k_profile - 1.0)
        log_lik = np.where(np.isfinite(log_lik), log_lik, -np.inf)
        weights = np.exp(log_lik - log_lik.max(axis=0))
        theta_hat = np.sum(theta * weights, axis=0) / np.sum(weights, axis=0)
        k = np.mean(np.log1p(theta_hat * x), axis=0)
    k = (n * k + 10 * 0.5) / (n + 10)
    k = np.where(np.isfinite(k), k, np.inf)
    return np.where(flat, -np.inf, k)
