"""GP regression on Boston: ML-II point estimate vs DSVI posterior over the kernel hyperparameters.

    OPENBLAS_NUM_THREADS=1 python benchmarks/gp_boston.py [--grad-samples 2] [--seed 1]

The paper's Table 5 (Titsias & Lázaro-Gredilla 2014, section 3.4). Model:
models/gp_regression/gp_regression.model (squared-exponential ARD kernel, 13 inputs, 15
hyperparameters); data: a fixed 80/20 split made by models/gp_regression/make_data.py, y and X
standardised with the training set. ML-II maximises the log marginal likelihood (no priors) by
L-BFGS from alpha = rho = 1, sigma = 0.5; DSVI fits a full-rank Gaussian over the log
hyperparameters (with the model's priors) and predicts with the mixture over 200 draws.
SMSE = test MSE / test variance of y; NLPD = mean negative log predictive density of the test
y's in standardised units (lower is better for both).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import autograd.numpy as anp  # noqa: E402
import numpy as np  # noqa: E402
from autograd import value_and_grad  # noqa: E402
from scipy.optimize import minimize  # noqa: E402
from scipy.special import logsumexp  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

FOLDER = ROOT / "models" / "gp_regression"


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    table = np.loadtxt(FOLDER / name, delimiter=",", skiprows=1)
    return table[:, 1:], table[:, 0]


def kernel(A, B, alpha, rho):
    A, B = A / rho, B / rho
    d2 = anp.sum(A**2, 1)[:, None] + anp.sum(B**2, 1)[None, :] - 2 * anp.dot(A, B.T)
    return alpha**2 * anp.exp(-0.5 * anp.maximum(d2, 0.0))


def log_marginal(X, y, alpha, rho, sigma):
    K = kernel(X, X, alpha, rho) + sigma**2 * anp.eye(len(y))
    L = anp.linalg.cholesky(K)
    a = anp.linalg.solve(L, y)
    return -0.5 * anp.dot(a, a) - anp.sum(anp.log(anp.diag(L))) - 0.5 * len(y) * np.log(2 * np.pi)


def ml_ii(X, y) -> tuple[float, np.ndarray, float]:
    D = X.shape[1]

    def negative(log_h):
        return -log_marginal(X, y, anp.exp(log_h[0]), anp.exp(log_h[1 : D + 1]), anp.exp(log_h[-1]))

    start = np.concatenate([[0.0], np.zeros(D), [np.log(0.5)]])
    res = minimize(value_and_grad(negative), start, jac=True, method="L-BFGS-B")
    h = np.exp(res.x)
    return h[0], h[1 : D + 1], h[-1]


def predict(X, y, Xs, alpha, rho, sigma) -> tuple[np.ndarray, np.ndarray]:
    """Predictive mean and variance of noisy test targets."""
    K = kernel(X, X, alpha, rho) + sigma**2 * np.eye(len(y))
    L = np.linalg.cholesky(K)
    Ks = kernel(X, Xs, alpha, rho)
    a = np.linalg.solve(L.T, np.linalg.solve(L, y))
    V = np.linalg.solve(L, Ks)
    return Ks.T @ a, alpha**2 - np.sum(V**2, axis=0) + sigma**2


def scores(ys, means, variances) -> tuple[float, float]:
    """SMSE of the mixture mean and NLPD of the equal-weight mixture of Gaussians."""
    means, variances = np.atleast_2d(means), np.atleast_2d(variances)
    smse = np.mean((ys - means.mean(axis=0)) ** 2) / np.var(ys)
    logp = -0.5 * (np.log(2 * np.pi * variances) + (ys - means) ** 2 / variances)
    nlpd = -np.mean(logsumexp(logp, axis=0) - np.log(len(means)))
    return float(smse), float(nlpd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--grad-samples", type=int, default=2)
    ap.add_argument("--draws", type=int, default=200)
    args = ap.parse_args(argv)
    X, y = load("boston_train.csv")
    Xs, ys = load("boston_test.csv")
    print(f"Boston GP regression: {len(y)} training, {len(ys)} test points, {X.shape[1]} inputs")

    start = time.perf_counter()
    alpha, rho, sigma = ml_ii(X, y)
    smse, nlpd = scores(ys, *predict(X, y, Xs, alpha, rho, sigma))
    rows = [("ML-II (L-BFGS)", smse, nlpd, time.perf_counter() - start, "")]

    model = build(str(FOLDER / "gp_regression.model"), [str(FOLDER / "boston_train.csv")])
    start = time.perf_counter()
    result = fit(model, "dsvi", seed=args.seed, draws=args.draws,
                 grad_samples=args.grad_samples)  # fmt: skip
    seconds = time.perf_counter() - start
    d = result.draws
    draws = zip(d["alpha"], d["rho"], d["sigma"], strict=True)
    preds = [predict(X, y, Xs, alpha_s, rho_s, sigma_s) for alpha_s, rho_s, sigma_s in draws]
    smse, nlpd = scores(ys, np.array([p[0] for p in preds]), np.array([p[1] for p in preds]))
    note = (f"{result.vi.iterations} it, ELBO {result.vi.elbo:.2f}, "
            f"{'converged' if result.vi.converged else 'NOT converged'}")  # fmt: skip
    rows.append(("DSVI (full rank)", smse, nlpd, seconds, note))

    print(f"\n{'method':<18} {'SMSE':>8} {'NLPD':>8} {'s':>8}  notes")
    for label, smse, nlpd, secs, note in rows:
        print(f"{label:<18} {smse:>8.4f} {nlpd:>8.4f} {secs:>8.1f}  {note}")
    print(f"\nML-II: alpha {alpha:.3g}, sigma {sigma:.3g}, rho {np.array2string(rho, precision=3)}")
    print(f"DSVI posterior means: alpha {d['alpha'].mean():.3g}, sigma {d['sigma'].mean():.3g}, "
          f"rho {np.array2string(d['rho'].mean(axis=0), precision=3)}")  # fmt: skip
    for w in result.warnings:
        print("warning:", w)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
