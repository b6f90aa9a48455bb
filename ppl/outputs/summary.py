"""Posterior summaries with Stan-style scalar names (`beta[1]`, `W[2,3]`, 1-based)."""

from __future__ import annotations

import itertools

import numpy as np

#: mcse: the Monte Carlo standard error of the mean; q's draws are independent, so sd / sqrt(n)
#: (importance-weighted: the self-normalised estimator's, sqrt(sum w^2 (x - mean)^2)).
SUMMARY_HEADER = ["parameter", "mean", "mcse", "sd", "q5", "q50", "q95"]


def element_indices(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """1-based indices of an array's elements in Stan's output order (first index fastest,
    i.e. column-major): what the summary's names and draws.csv's columns are built from."""
    combos = itertools.product(*(range(1, n + 1) for n in reversed(shape)))
    return [tuple(reversed(c)) for c in combos]


def scalar_names(name: str, shape: tuple[int, ...]) -> list[str]:
    """Element names as Stan prints them (`W[1,2]`), in Stan's output order."""
    if not shape:
        return [name]
    return [f"{name}[{','.join(map(str, ix))}]" for ix in element_indices(shape)]


def flatten_draws(draws: dict[str, np.ndarray]) -> tuple[list[str], np.ndarray]:
    """(names, matrix of shape (n_draws, n_scalars)) in declaration then Stan element order."""
    names, columns = [], []
    for name, arr in draws.items():
        arr = np.asarray(arr)
        n = arr.shape[0]
        shape = arr.shape[1:]
        names.extend(scalar_names(name, shape))
        # column-major within each draw, as Stan writes its output
        axes = (0,) + tuple(reversed(range(1, arr.ndim)))
        columns.append(np.transpose(arr, axes).reshape(n, -1))
    if not columns:
        return [], np.zeros((0, 0))
    return names, np.concatenate([c.astype(float) for c in columns], axis=1)


def _weighted_quantiles(matrix: np.ndarray, weights: np.ndarray, probs) -> np.ndarray:
    """Per column, the smallest value whose weighted CDF reaches each probability."""
    order = np.argsort(matrix, axis=0)
    cdf = np.cumsum(weights[order], axis=0)
    out = []
    for p in probs:
        first = np.argmax(cdf >= p * cdf[-1], axis=0)  # per column, a position in `order`
        rows = np.take_along_axis(order, first[None, :], axis=0)[0]
        out.append(matrix[rows, np.arange(matrix.shape[1])])
    return np.array(out)


def summarise(
    draws: dict[str, np.ndarray], log_weights: np.ndarray | None = None
) -> list[tuple[str, float, float, float, float, float, float]]:
    """Mean, its MCSE, sd and quantiles of every scalar; importance-weighted when `log_weights`
    (PSIS)."""
    names, matrix = flatten_draws(draws)
    if not names:
        return []
    n = matrix.shape[0]
    if log_weights is not None:
        w = np.exp(log_weights - np.max(log_weights))
        w /= w.sum()
        mean = w @ matrix
        sd = np.sqrt(np.maximum(w @ (matrix - mean) ** 2, 0.0))
        mcse = np.sqrt(np.maximum(w**2 @ (matrix - mean) ** 2, 0.0))
        q5, q50, q95 = _weighted_quantiles(matrix, w, [0.05, 0.5, 0.95])
    else:
        mean = matrix.mean(axis=0)
        sd = matrix.std(axis=0, ddof=1) if n > 1 else np.zeros(len(names))
        mcse = sd / np.sqrt(n)
        q5, q50, q95 = np.quantile(matrix, [0.05, 0.5, 0.95], axis=0)
    columns = zip(mean, mcse, sd, q5, q50, q95, strict=True)
    return [(name, *map(float, row)) for name, row in zip(names, columns, strict=True)]


def exact_of(result, weighted: bool = False):
    """The moments the fit computes itself, where it can (a collapsed q's Rao-Blackwellised
    ones: ppl.methods.collapse), aligned with flatten_draws' columns; else None."""
    own = getattr(getattr(result, "how", None), "exact_summaries", None)
    return own(result, weighted=weighted) if own is not None else None


def fit_summary(result, log_weights: np.ndarray | None = None) -> list[tuple]:
    """The summaries the user reads (console, summary.csv, fit.summary()): the draws' own
    (importance-weighted with `log_weights`), each replaced by the fit's exact one where it has
    it (exact_of)."""
    rows = summarise(result.draws, log_weights)
    exact = exact_of(result, weighted=log_weights is not None)
    if exact is None:
        return rows
    for j in np.flatnonzero(exact.exact):
        q5, q50, q95 = (float(v) for v in exact.quantiles[:, j])
        rows[j] = (rows[j][0], float(exact.mean[j]), float(exact.mcse[j]), float(exact.sd[j]),
                   q5, q50, q95)  # fmt: skip
    return rows


def exact_text(result, weighted: bool = False) -> str | None:
    """The line that says which summaries are exact given q and how, or None."""
    exact = exact_of(result, weighted=weighted)
    if exact is None or not exact.exact.any():
        return None
    parts, at = [], 0
    for name, arr in result.draws.items():
        size = int(np.prod(np.shape(arr)[1:], dtype=int))
        done = int(exact.exact[at : at + size].sum())
        at += size
        if done:
            parts.append(name if done == size else f"{name} ({done} of {size})")
    names = ", ".join(parts) if len(parts) <= 8 else ", ".join(parts[:8]) + ", ..."
    how = exact.how or ("exact given q's grid (quadrature)" if exact.grid else
           "exact given q's draws of the coordinates it keeps, the rest integrated out "
           "(Rao-Blackwellised" + (", PSIS-weighted)" if weighted else ")"))  # fmt: skip
    return f"summaries: mean, sd and quantiles of {names}: {how}, not from draws"


#: Where the console's table points for the rows it leaves out (`ppl fit` says its own options).
FULL_TABLE = "fit.summary(), or summary.csv from fit.save(DIR)"


def _shown_per_variable(sizes: dict[str, int], scalars: set[str], max_rows: int) -> int:
    """How many leading elements of each vector, matrix or array the table shows: the most
    that keep the rows within `max_rows` once every scalar has its row (scalars are never
    hidden, so a table of many scalars can run longer)."""
    budget = max_rows - len(scalars)
    containers = [n for name, n in sizes.items() if name not in scalars]
    shown = 0
    while containers and shown < max(containers) and \
            sum(min(n, shown + 1) for n in containers) <= budget:  # fmt: skip
        shown += 1
    return shown


def format_table(rows, max_rows: int = 60, where: str = FULL_TABLE) -> str:
    """A fixed-width table for the terminal. Past `max_rows` rows (0: no limit) the long
    vectors, matrices and arrays show their first elements and one line saying how many more;
    every scalar keeps its row; a last line says where the full table is (`where`)."""
    header = f"{'parameter':<24}" + "".join(f"{h:>12}" for h in SUMMARY_HEADER[1:])
    lines = [header, "-" * len(header)]
    groups: dict[str, list] = {}
    for row in rows:
        groups.setdefault(row[0].split("[", 1)[0], []).append(row)
    scalars = {name for name, group in groups.items() if "[" not in group[0][0]}
    limited = 0 < max_rows < len(rows)
    shown = _shown_per_variable({k: len(g) for k, g in groups.items()}, scalars, max_rows) \
        if limited else len(rows)  # fmt: skip
    hidden = 0
    for name, group in groups.items():
        keep = group if name in scalars else group[:shown]
        for row in keep:
            label = row[0] if len(row[0]) <= 23 else row[0][:22] + "…"
            lines.append(f"{label:<24}" + "".join(f"{v:>12.4g}" for v in row[1:]))
        if len(keep) < len(group):
            more = len(group) - len(keep)
            hidden += more
            lines.append(f"{'':<24}... {name}: {more} more of {len(group)} rows")
    if hidden:
        lines.append(f"({hidden} rows of long vectors and matrices not shown; the full table: "
                     f"{where})")  # fmt: skip
    return "\n".join(lines)
