"""Spike-and-slab regression on Boston housing: fitted inclusion probabilities vs exact enumeration.

models/spike_slab/spike_slab.model has 13 binary inclusion indicators, so its posterior can be
computed exactly: for each of the 2^13 subsets the slab weights and the intercept integrate out in
closed form (Gaussian), the noise sd on a fine grid, the inclusion probability pi analytically
(Beta(1, 1) prior: p(z) = k! (K - k)! / (K + 1)!). The table gives, per predictor, the exact
posterior inclusion probability and the fitted q(z = 1) of each run, and each run's ELBO beside
the exact log evidence (their difference is KL(q || p), the price of the mean-field family).

    python benchmarks/spike_slab.py [--methods auto bbvi] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import gammaln, logsumexp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

MODEL = ROOT / "models" / "spike_slab" / "spike_slab.model"
DATA = ROOT / "models" / "spike_slab" / "boston13.csv"
NAMES = ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio",
         "black", "lstat"]  # fmt: skip


def exact_posterior(X: np.ndarray, y: np.ndarray, sigmas: np.ndarray):
    """(inclusion probabilities, log evidence) by enumerating every subset of the K columns."""
    N, K = X.shape
    A = np.column_stack([np.ones(N), X])  # intercept, always in; prior N(0, 1) on every weight
    G, b, yy = A.T @ A, A.T @ y, float(y @ y)
    s2 = sigmas**2
    # half-normal(0, 1) prior on sigma, trapezoid weights on the grid
    log_prior_sigma = np.log(2) - 0.5 * np.log(2 * np.pi) - 0.5 * s2
    widths = np.gradient(sigmas)
    log_w = log_prior_sigma + np.log(widths)
    log_joint, subsets = [], []
    for z in itertools.product([0, 1], repeat=K):
        cols = np.concatenate([[0], 1 + np.flatnonzero(z)])
        lam, V = np.linalg.eigh(G[np.ix_(cols, cols)])
        c = (V.T @ b[cols]) ** 2
        # log N(y; 0, s2 I + A A') through the eigenbasis of A'A (Woodbury)
        logdet = N * np.log(s2) + np.sum(np.log1p(lam[:, None] / s2), axis=0)
        quad = yy / s2 - np.sum(c[:, None] / (s2 * (s2 + lam[:, None])), axis=0)
        log_lik = -0.5 * (N * np.log(2 * np.pi) + logdet + quad)
        k = int(sum(z))
        log_pz = gammaln(k + 1) + gammaln(K - k + 1) - gammaln(K + 2)
        log_joint.append(log_pz + logsumexp(log_lik + log_w))
        subsets.append(z)
    log_joint, subsets = np.array(log_joint), np.array(subsets)
    log_evidence = float(logsumexp(log_joint))
    weights = np.exp(log_joint - log_evidence)
    return weights @ subsets, log_evidence


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=["auto", "bbvi"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    args = ap.parse_args()

    model = build(str(MODEL), [str(DATA)])
    X, y = np.asarray(model.data["Xs"]), np.asarray(model.data["ys"])
    start = time.perf_counter()
    exact, log_evidence = exact_posterior(X, y, np.linspace(0.3, 0.8, 501))
    print(
        f"exact posterior by enumeration of 2^{X.shape[1]} subsets: log evidence "
        f"{log_evidence:.3f} ({time.perf_counter() - start:.1f} s)"
    )
    runs = []
    for method in args.methods:
        for seed in args.seeds:
            result = fit(build(str(MODEL), [str(DATA)]), method, seed=seed, draws=10)
            p = np.array(result.vi.family.describe(result.vi.theta)["z"]["p"])
            runs.append((f"{method} s{seed}", p, result.vi.elbo, result.seconds))
            print(f"  {method} seed {seed}: ELBO {result.vi.elbo:.3f}, {result.seconds:.1f} s")
    print()
    head = f"{'predictor':<10}{'exact':>8}" + "".join(f"{label:>11}" for label, *_ in runs)
    print(head)
    print("-" * len(head))
    for k, name in enumerate(NAMES):
        print(f"{name:<10}{exact[k]:>8.3f}" + "".join(f"{p[k]:>11.3f}" for _, p, *_ in runs))
    print("-" * len(head))
    errors = [np.max(np.abs(p - exact)) for _, p, *_ in runs]
    print(f"{'max |err|':<18}" + "".join(f"{e:>11.3f}" for e in errors))
    print(f"{'ELBO':<18}" + "".join(f"{e:>11.2f}" for *_, e, _ in runs))
    print(f"{'log p(y) - ELBO':<18}" + "".join(f"{log_evidence - e:>11.2f}" for *_, e, _ in runs))
    print(f"{'seconds':<18}" + "".join(f"{s:>11.1f}" for *_, s in runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
