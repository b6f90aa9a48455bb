"""GPFA held-out perplexity for growing training sizes (Knowles 2015, section 4.2, Figure 5).

The paper fits GPFA to CyTOF data (5.3e5 cells, D = 40 markers) and reports the perplexity -- the
average negative log likelihood of held-out cells -- under the expected covariance

    Cov_hat = 1/S sum_s W_s W_s' + sigma2_s I,   (W_s, sigma2_s) ~ q, S = 100      (eq. 20)

against the empirical (maximum-likelihood) covariance and Ledoit-Wolf shrinkage, for training
sizes from 100 upwards. The CyTOF data are not available offline; the closest bundled analogue is
the high-content-screening cell data of Hill et al. (2007) (models/gpfa/data/cells_hcs_inten.csv,
see models/gpfa/README.md): 2019 cells x the 31 intensity features. Preprocessing (as that
data's README recommends): log1p of the non-negative heavy-tailed features (avg_, total_,
var_inten, diff_inten_density), then centring and scaling by the training rows' mean and sd.
Test set: the 1010 rows of the original `case == Test` split; training subsets of size N are the
first N rows of a fixed permutation of the 1009 `Train` rows.

Perplexity here = mean over test cells of -log N(y | 0, Cov_hat) (lower is better; +inf when the
covariance is singular, as the empirical covariance is for N <= D).

    python benchmarks/gpfa_cytof.py              # N = 25, 50, 100, 200, 500, 1009
    python benchmarks/gpfa_cytof.py --quick      # N = 50, 200; fewer iterations
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "models", "gpfa", "data", "cells_hcs_inten.csv")
MODEL = os.path.join(ROOT, "models", "gpfa", "gpfa.model")
LOG_PREFIXES = ("avg_inten", "total_inten", "var_inten", "diff_inten_density")


def load_cells(path: str = DATA):
    """(names, X_train_raw, X_test_raw) with log1p applied to the heavy-tailed columns."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    names = header[:-1]
    X = np.array([[float(v) for v in r[:-1]] for r in rows])
    case = np.array([r[-1] for r in rows])
    for j, name in enumerate(names):
        if name.startswith(LOG_PREFIXES):
            X[:, j] = np.log1p(X[:, j])
    return names, X[case == "Train"], X[case == "Test"]


def ledoit_wolf(X: np.ndarray) -> np.ndarray:
    """Ledoit & Wolf (2004) shrinkage of the covariance of centred rows X towards mu I.

    Sigma = (1 - s) S + s mu I with S = X'X / n, mu = tr(S) / p, and the optimal intensity
    s = min(b2, d2) / d2, d2 = ||S - mu I||_F^2 / p, b2 = 1/(n^2 p) sum_k ||x_k x_k' - S||_F^2
    ("A well-conditioned estimator for large-dimensional covariance matrices", J. Multivariate
    Analysis 88, 2004; the same estimator as sklearn.covariance.ledoit_wolf).
    """
    n, p = X.shape
    S = X.T @ X / n
    mu = np.trace(S) / p
    d2 = np.sum((S - mu * np.eye(p)) ** 2) / p
    row_sq = np.sum(X**2, axis=1)  # ||x_k x_k'||_F^2 = ||x_k||^4
    # sum_k ||x_k x_k' - S||_F^2 = sum_k ||x_k||^4 - 2 sum_k x_k' S x_k + n ||S||_F^2
    b2 = (np.sum(row_sq**2) - 2 * np.sum((X @ S) * X) + n * np.sum(S**2)) / (n**2 * p)
    s = 0.0 if d2 == 0 else min(b2, d2) / d2
    return (1 - s) * S + s * mu * np.eye(p)


def perplexity(Y: np.ndarray, Sigma: np.ndarray) -> float:
    """Mean over rows of -log N(y | 0, Sigma); inf if Sigma is not positive definite."""
    sign, logdet = np.linalg.slogdet(Sigma)
    if sign <= 0 or not np.isfinite(logdet):
        return float("inf")
    try:
        L = np.linalg.cholesky(Sigma)
    except np.linalg.LinAlgError:
        return float("inf")
    Z = np.linalg.solve(L, Y.T)
    D = Y.shape[1]
    return float(0.5 * (D * np.log(2 * np.pi) + logdet) + 0.5 * np.mean(np.sum(Z**2, axis=0)))


def gpfa_covariance(draws: dict, n: int = 100) -> np.ndarray:
    """Eq. 20: the average of W_s W_s' + sigma2_s I over the first n draws."""
    W = draws["W"][:n]
    s2 = draws["sigma2"][:n]
    D = W.shape[1]
    return np.mean(W @ np.swapaxes(W, 1, 2), axis=0) + np.mean(s2) * np.eye(D)


def run(sizes, methods, K, iterations, seed, out=sys.stdout):
    from ppl.data.build import build
    from ppl.pipeline import fit

    names, train_raw, test_raw = load_cells()
    perm = np.random.default_rng(seed).permutation(len(train_raw))
    tmp = tempfile.mkdtemp(prefix="gpfa_cells_")
    rows = []
    for N in sizes:
        tr = train_raw[perm[:N]]
        mean, sd = tr.mean(axis=0), tr.std(axis=0, ddof=1)
        sd[sd == 0] = 1.0
        Y = (tr - mean) / sd
        T = (test_raw - mean) / sd
        row = {
            "N": N,
            "empirical": perplexity(T, Y.T @ Y / N),
            "ledoit_wolf": perplexity(T, ledoit_wolf(Y)),
            "diagonal": perplexity(T, np.diag(np.mean(Y**2, axis=0))),
        }
        path = os.path.join(tmp, f"cells_N{N}.json")
        with open(path, "w") as f:
            json.dump({"N": N, "D": Y.shape[1], "K": K, "y": Y.tolist()}, f)
        model = build(MODEL, [path])
        for method in methods:
            start = time.perf_counter()
            res = fit(model, method, iterations=iterations, seed=seed, draws=100, refine_draws=0)
            row[f"gpfa_{method}"] = perplexity(T, gpfa_covariance(res.draws))
            row[f"seconds_{method}"] = time.perf_counter() - start
            row[f"iterations_{method}"] = int(res.vi.iterations)
        rows.append(row)
        print(json.dumps(row), file=out, flush=True)
    return rows


def print_table(rows, methods, out=sys.stdout):
    labels = {"auto": "GPFA gamma SGVB", "advi": "GPFA Gaussian ADVI"}
    head = "| N train | empirical | Ledoit-Wolf | diagonal | " + " | ".join(
        labels.get(m, m) for m in methods
    )
    print("\n" + head + " | " + " | ".join(f"s ({m})" for m in methods) + " |", file=out)
    print("|---:" * (4 + 2 * len(methods)) + "|", file=out)
    for r in rows:
        cells = [str(r["N"])] + [f"{r[k]:.2f}" for k in ("empirical", "ledoit_wolf", "diagonal")]
        cells += [f"{r['gpfa_' + m]:.2f}" for m in methods]
        cells += [f"{r['seconds_' + m]:.0f}" for m in methods]
        print("| " + " | ".join(cells) + " |", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sizes", type=int, nargs="*", default=None)
    p.add_argument("--methods", nargs="*", default=["auto", "advi"])
    p.add_argument(
        "--K",
        type=int,
        default=31,
        help="truncation level (default 31 = D, as the paper's K = D = 40)",
    )
    p.add_argument("--iter", type=int, default=None, help="maximum iterations (default 1000)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    sizes = a.sizes or ([50, 200] if a.quick else [25, 50, 100, 200, 500, 1009])
    iterations = a.iter or (300 if a.quick else 1000)
    print(
        f"GPFA cell-data perplexity: sizes={sizes} methods={a.methods} K={a.K} "
        f"max iterations={iterations} seed={a.seed}",
        flush=True,
    )
    rows = run(sizes, a.methods, a.K, iterations, a.seed)
    print_table(rows, a.methods)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
