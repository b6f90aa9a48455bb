"""Are the summaries' Monte Carlo estimates reliable? A Pareto k-hat per scalar of the output
draws (Vehtari, Simpson, Gelman, Yao & Gabry 2024, "Pareto smoothed importance sampling",
section on the Monte Carlo estimates of expectations; the `posterior` R package's pareto_khat).

A generalized Pareto fitted to a tail of draws says how many moments they behave as if they
had: shape k means moments up to 1 / k. The sd is the square root of the mean of (y - mean)^2,
whose right tail has twice y's shape, so it is the first summary to go: Neal's funnel, fitted
exactly, has x = exp(v / 2) x_raw, whose sd from 4000 draws was 0.65-1.2x the exact value over
six seeds (k-hat of (x - mean)^2 about 1.1), though every moment of x is finite. The verdict
uses the sd's check only (SD_KHAT): the mean of S draws is reliable whenever y has a finite
variance, and the k-hat of y's own tails said otherwise where it was not true (a gamma(0.01)
posterior: k-hat 1.2-1.35, yet the mean of 4000 draws is within 0.02 sd, being a gamma(40) / S).
Quantiles need no moments.

Draws with importance weights w (the summaries are PSIS-weighted) are judged on w (y - mean)^2
and w (y - mean), the terms of the self-normalised estimates (as loo's E_loo khat).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection

import numpy as np

from ppl.diagnostics.psis import fit_generalized_pareto

#: Over this many draws x columns of exceedances (x the candidate grid) at once, the GPD fit
#: works through the columns in chunks (memory, not speed).
CHUNK_ELEMENTS = 4_000_000
#: The draws of about this many values (S x scalars) are judged at once.
BLOCK_ELEMENTS = 2_000_000
#: The sd of a scalar whose (y - mean)^2 has a k-hat over this is not reliable: the draws behave
#: as if y had no finite variance (k of y over 1/2). Not Vehtari's min(1 - 1 / log10 S, 0.7),
#: which, applied to the sd, flagged 60 % of lognormal(0, 1) scalars at S = 4000 whose sd was
#: within [0.8, 1.25] of the exact one in 99 % (docs/diagnostics.md, the numbers).
SD_KHAT = 1.0
#: How the fault begins (the verdict's advice tells it from q's faults by this).
TAIL_SD = "sd from a tail too heavy"
#: Fewer distinct values than this in a tail: a discrete or bounded column, no tail to fit.
MIN_EXCEEDANCES = 5


def tail_length(draws: int) -> int:
    """Draws in a tail: 3 sqrt(S) (at most S / 5), as PSIS and pareto_khat."""
    return int(math.ceil(min(0.2 * draws, 3.0 * math.sqrt(draws))))


def gpd_shape(exceedances: np.ndarray) -> np.ndarray:
    """Per column of `exceedances` (n x C, each column sorted ascending, >= 0), the shape k of a
    generalized Pareto by Zhang & Stephens' empirical Bayes estimate with the weak prior towards
    0.5 (10 observations) of ppl.diagnostics.psis.fit_generalized_pareto, vectorised: the same
    number column by column. nan where a column has fewer than MIN_EXCEEDANCES positive values.
    A column where more than a quarter tie the cutoff (an atom: a discrete or bounded column, a
    point mass) has its positive exceedances fitted alone, as PSIS does, column by column."""
    return _gpd_rows(np.ascontiguousarray(np.asarray(exceedances, dtype=float).T))


def _gpd_rows(x: np.ndarray) -> np.ndarray:
    """gpd_shape with one row per scalar (C x n), the layout whose reductions are contiguous."""
    C, n = x.shape
    out = np.full(C, np.nan)
    if n == 0 or C == 0:
        return out
    m = 30 + int(np.sqrt(n))
    quartile = x[:, max(int(n / 4 + 0.5) - 1, 0)]
    usable = np.all(np.isfinite(x), axis=1) & (np.sum(x > 0, axis=1) >= MIN_EXCEEDANCES)
    ok = usable & (quartile > 0)
    for j in np.flatnonzero(usable & ~ok):
        out[j] = fit_generalized_pareto(x[j, x[j] > 0])[0]
    grid = np.sqrt(m / (np.arange(1, m + 1) - 0.5)) - 1.0
    step = max(1, CHUNK_ELEMENTS // (m * n))
    for start in range(0, C, step):
        rows = np.flatnonzero(ok[start : start + step]) + start
        if rows.size:
            out[rows] = _shape(x[rows], grid, quartile[rows], n)
    return out


def _shape(x: np.ndarray, grid: np.ndarray, quartile: np.ndarray, n: int) -> np.ndarray:
    """_gpd_rows for rows that have a tail: the profile likelihood of m candidate theta = k /
    sigma per row, their likelihood-weighted mean, its k, shrunk to 0.5."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        theta = -1.0 / x[:, -1:] + grid[None, :] / (3.0 * quartile[:, None])  # (C, m)
        terms = theta[:, :, None] * x[:, None, :]  # (C, m, n)
        np.log1p(terms, out=terms)
        k_profile = terms.mean(axis=2)
        log_lik = n * (np.log(theta / k_profile) - k_profile - 1.0)
        log_lik = np.where(np.isfinite(log_lik), log_lik, -np.inf)
        top = np.max(log_lik, axis=1, keepdims=True)
        weights = np.exp(log_lik - top)
        theta = np.where(weights > 0, theta, 0.0)
        theta_hat = np.sum(theta * weights, axis=1) / np.sum(weights, axis=1)
        k = np.mean(np.log1p(theta_hat[:, None] * x), axis=1)
    k = (n * k + 10 * 0.5) / (n + 10)
    return np.where(np.isfinite(top[:, 0]), k, np.inf)


def _right_tail(rows: np.ndarray, tail: int) -> np.ndarray:
    """The `tail` largest of each row minus the next largest (the cutoff), sorted."""
    S = rows.shape[1]
    part = np.partition(rows, S - tail - 1, axis=1)[:, S - tail - 1 :]
    part.sort(axis=1)
    return part[:, 1:] - part[:, :1]


def tail_khats(
    matrix: np.ndarray, log_weights: np.ndarray | None = None, mean: bool = True
) -> dict[str, np.ndarray]:
    """Per column of `matrix` (S draws x C scalars), Pareto k-hat of the sd's terms (the right
    tail of (y - mean)^2) and, with `mean`, of the mean's (both tails of y - mean, the larger),
    each multiplied by the draw's weight when `log_weights` (PSIS: the summaries are weighted).
    nan for a column with no continuous tail (constant, discrete, non-finite draws). Works
    through the columns in blocks of about BLOCK_ELEMENTS values, a block transposed to one row
    per scalar (partition and reductions along contiguous memory)."""
    y = np.asarray(matrix, dtype=float)
    S, C = y.shape
    out = {"sd": np.full(C, np.nan)} | ({"mean": np.full(C, np.nan)} if mean else {})
    tail = tail_length(S)
    if tail < MIN_EXCEEDANCES or tail + 1 > S // 2 or C == 0:
        return out
    w = np.full(S, 1.0 / S)
    if log_weights is not None:
        w = np.exp(np.asarray(log_weights, dtype=float) - np.max(log_weights))
        w /= w.sum()
    wS = w * S  # weights of mean 1: plain draws are unchanged
    finite = np.flatnonzero(np.all(np.isfinite(y), axis=0))
    step = max(1, BLOCK_ELEMENTS // S)
    for start in range(0, finite.size, step):
        cols = finite[start : start + step]
        rows = np.ascontiguousarray(y[:, cols].T)
        rows -= (rows @ w)[:, None]  # centred
        out["sd"][cols] = _gpd_rows(_right_tail(rows**2 * wS, tail))
        if mean:
            rows *= wS
            right, left = _right_tail(rows, tail), _right_tail(-rows, tail)
            out["mean"][cols] = np.fmax(_gpd_rows(right), _gpd_rows(left))
    return out


def _variables(draws: dict[str, np.ndarray]):
    """Per float output: (its name, its Stan element names, its S x n matrix), in Stan's element
    order (first index fastest, as ppl.outputs.summary). Integer outputs (counts, indicators)
    have no continuous tail."""
    for name, arr in draws.items():
        arr = np.asarray(arr)
        if arr.dtype.kind != "f" or arr.ndim == 0:
            continue
        S = arr.shape[0]
        axes = (0,) + tuple(reversed(range(1, arr.ndim)))
        yield name, element_names(name, arr.shape[1:]), np.transpose(arr, axes).reshape(S, -1)


def element_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """Stan's element names of a variable, first index fastest (as ppl.outputs.summary)."""
    if not shape:
        return [name]
    combos = itertools.product(*reversed([range(1, n + 1) for n in shape]))
    return [f"{name}[{','.join(str(i) for i in reversed(c))}]" for c in combos]


def scalar_columns(draws: dict[str, np.ndarray]) -> tuple[list[str], list[str], np.ndarray]:
    """(variable of each scalar, its Stan element name, the S x C matrix) of the float draws."""
    parts = list(_variables(draws))
    if not parts:
        return [], [], np.zeros((0, 0))
    variables = [v for v, elements, _ in parts for _ in elements]
    names = [n for _, elements, _ in parts for n in elements]
    return variables, names, np.concatenate([m for _, _, m in parts], axis=1)


def summary_tail_faults(
    draws: dict[str, np.ndarray],
    log_weights: np.ndarray | None = None,
    not_from_draws: Collection[str] = (),
) -> tuple[list[dict], dict]:
    """The scalars whose sd, estimated from these draws (weighted when `log_weights`), is not
    reliable: k-hat of (y - mean)^2 over SD_KHAT. (a fault {"parameters", "how", "detail",
    "scalars", "khat"} or none, and {"threshold", "scalars" judged, "max_khat_sd"}).
    `not_from_draws`: variable or element names whose summaries are computed otherwise (exact
    quadrature), exempt. One variable at a time: no copy of all the draws at once."""
    exempt = set(not_from_draws)
    judged, S, top = 0, 0, -np.inf
    picked: list[tuple[str, str, float]] = []  # (variable, element, k-hat) over SD_KHAT
    for variable, elements, matrix in _variables(draws):
        if variable in exempt:
            continue
        keep = [i for i, n in enumerate(elements) if n not in exempt]
        S = matrix.shape[0]
        if not keep or S < 2:
            continue
        judged += len(keep)
        k = tail_khats(matrix[:, keep], log_weights, mean=False)["sd"]
        if np.any(~np.isnan(k)):
            top = max(top, float(np.nanmax(k)))
        picked += [(variable, elements[keep[i]], float(k[i])) for i in np.flatnonzero(k > SD_KHAT)]
    info: dict = {"threshold": SD_KHAT, "scalars": judged,
                  "max_khat_sd": round(top, 4) if top > -np.inf else None}  # fmt: skip
    if not picked:
        return [], info
    worst = max(k for _, _, k in picked)
    variables = list(dict.fromkeys(v for v, _, _ in picked))
    variable = variables[0] if len(variables) == 1 else "y"
    fault = {
        "parameters": variables,
        "how": f"{TAIL_SD} for {S} draws",
        "detail": (f"{_span([n for _, n, _ in picked], judged)}: Pareto k-hat up to "
                   f"{worst:.2f} of the draws' ({variable} - mean)^2, over {SD_KHAT:g}: they "
                   f"behave as if {variable} had no finite variance, so its sd (and the mean's "
                   "MCSE, sd / sqrt(S)) rests on a few extreme draws; its quantiles are reliable"),
        "scalars": [n for _, n, _ in picked],
        "khat": round(worst, 4),
    }  # fmt: skip
    return [fault], info


def _span(names: list[str], judged: int, most: int = 6) -> str:
    """The scalars at fault: every name of up to `most`, else the first and last few, counted."""
    if len(names) <= most:
        return ", ".join(names)
    return f"{', '.join(names[:3])}, ..., {names[-1]} ({len(names)} of {judged} scalars)"


#: How the fault of an implicit q's sd begins (summary_batch_faults).
BATCH_SD = "sd from too few effective draws"
#: An implicit q's sd whose draws' (y - mean)^2 has an effective sample size (by batch means)
#: under this is not reliable: the minimum MCMC practice asks of a summary (Vehtari, Gelman,
#: Simpson, Carpenter & Buerkner 2021: 100 per chain, 400 for four). Independent draws have an
#: ESS of their number: an sd resting on a few draws of a rare component (a slab switched off
#: in 5 of 1000 draws) is imprecise (its relative MCSE, in the record), but not mistaken.
MIN_ESS_SD = 100
#: ... or, with fewer draws than 4 MIN_ESS_SD, under this fraction of them (the user asked for
#: few draws: a flag only when they are worth much less than their number; by about sqrt(S)
#: batch means the ESS of independent draws is S within 25 to 35 %).
MIN_ESS_FRACTION = 0.25


def sd_relative_mcse(matrix: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of `matrix` (S draws x C scalars): the Monte Carlo standard error of its sd
    over the sd, and the effective sample size of its (y - mean)^2, by batch means over the
    chains `groups` (draw j belongs to chain groups[j], in order): each chain's draws cut into
    consecutive batches, about sqrt(S) batches in all, as MCMC's batch-means MCSE. The sd's
    error is half the variance's relative error (delta method). nan for a constant column."""
    y = np.asarray(matrix, dtype=float)
    S = y.shape[0]
    sq = (y - y.mean(axis=0)) ** 2
    parts = []
    chains = np.unique(groups)
    per_chain = max(1, int(round(np.sqrt(S) / len(chains))))
    for c in chains:
        parts += [p for p in np.array_split(np.flatnonzero(groups == c), per_chain) if len(p)]
    means = np.array([sq[p].mean(axis=0) for p in parts])
    sizes = np.array([len(p) for p in parts])
    v = sq.mean(axis=0)
    # the variance of a batch mean times its size: the variance of one draw's term as if iid
    spread = np.sum(sizes[:, None] * (means - v) ** 2, axis=0) / max(len(means) - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mcse = np.sqrt(spread / S)
        relative = np.where(v > 0, mcse / (2.0 * v), np.nan)
        ess = np.where(spread > 0, S * sq.var(axis=0) / spread, np.nan)
    return relative, ess


def summary_batch_faults(
    draws: dict[str, np.ndarray], groups: np.ndarray, not_from_draws: Collection[str] = ()
) -> tuple[list[dict], dict]:
    """summary_tail_faults for draws of an implicit q made by Gibbs sweeps (--method svi): a
    tail rule made for iid draws of a parametric q reads the mixture a slab switched on and
    off makes (a narrow slab beside N(0, 1) draws of the prior) as a tail with no variance, but
    such a marginal has every moment; what can fail is the draws' number and autocorrelation,
    which batch means measure (sd_relative_mcse). A fault names the scalars whose sd's ESS is
    under MIN_ESS_SD (or MIN_ESS_FRACTION of the draws, if less)."""
    exempt = set(not_from_draws)
    groups = np.asarray(groups)
    judged, S, top, low = 0, 0, 0.0, np.inf
    picked: list[tuple[str, str, float, float]] = []  # (variable, element, ESS, relative MCSE)
    for variable, elements, matrix in _variables(draws):
        if variable in exempt:
            continue
        keep = [i for i, n in enumerate(elements) if n not in exempt]
        S = matrix.shape[0]
        if not keep or S < 4 or len(groups) != S:
            continue
        judged += len(keep)
        rel, ess = sd_relative_mcse(matrix[:, keep], groups)
        if np.any(np.isfinite(rel)):
            top, low = max(top, float(np.nanmax(rel))), min(low, float(np.nanmin(ess)))
        least = min(MIN_ESS_SD, MIN_ESS_FRACTION * S)
        picked += [(variable, elements[keep[i]], float(ess[i]), float(rel[i]))
                   for i in np.flatnonzero(ess < least)]  # fmt: skip
    info: dict = {"min_ess": min(MIN_ESS_SD, MIN_ESS_FRACTION * S), "scalars": judged,
                  "min_ess_sd": round(low, 1) if np.isfinite(low) else None,
                  "max_relative_mcse_sd": round(top, 4)}  # fmt: skip
    if not picked:
        return [], info
    fewest = min(e for _, _, e, _ in picked)
    fault = {
        "parameters": list(dict.fromkeys(v for v, _, _, _ in picked)),
        "how": f"{BATCH_SD} ({fewest:.0f} of {S})",
        "detail": (f"{_span([n for _, n, _, _ in picked], judged)}: the effective sample size "
                   "of the draws' (y - mean)^2, by batch means over the Gibbs chains, is down "
                   f"to {fewest:.0f}, under {info['min_ess']:.0f}: the chains are too "
                   "autocorrelated for their sd (its Monte Carlo error up to "
                   f"{max(r for _, _, _, r in picked):.0%} of it)"),
        "scalars": [n for _, n, _, _ in picked],
        "ess": round(fewest, 1),
    }  # fmt: skip
    return [fault], info
