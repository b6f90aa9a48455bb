"""DSVI-ARD variable selection in wide logistic regression (D >> N), vs a fixed prior.

    OPENBLAS_NUM_THREADS=1 python benchmarks/ard.py [--data synthetic nci60] [--seed 1]

The paper's section 3.2 (Titsias & Lázaro-Gredilla 2014, Table 2). Models:
models/logistic_regression/ard.model (a prior sd per weight, type-II ML by its closed form) and
fixed_prior.model (N(0, 1) on every weight, the paper's CONCAV), both by diagonal DSVI.

- synthetic: N = 400 training and 1000 test rows, D = 1000 standard-normal inputs, of which the
  first 20 are relevant (weights +-1.5, alternating); reports test error and how many of the 20
  true features are among the 20 largest |posterior mean| weights.
- nci60: models/logistic_regression/data/nci60_carcinoma.csv (59 cell lines x 6830 genes,
  carcinoma vs not; provenance in that folder's README), a stratified random split of 39
  training and 20 test lines, genes standardised with the training lines.

Prediction: the posterior-mean probability over 1000 draws, classified at 0.5. Stopping: the
relative-ELBO rule at 1e-3 (Stan's 1e-2 stops these wide fits after a few hundred steps), at most
20000 iterations.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppl.language.checker import check  # noqa: E402
from ppl.language.parser import parse_file  # noqa: E402
from ppl.pipeline import fit  # noqa: E402
from ppl.runtime.compiler import CompiledModel  # noqa: E402

FOLDER = ROOT / "models" / "logistic_regression"
RELEVANT = 20


def synthetic(seed: int):
    rng = np.random.default_rng(seed)
    D, n_train, n_test = 1000, 400, 1000
    w = np.zeros(D)
    w[:RELEVANT] = 1.5 * np.where(np.arange(RELEVANT) % 2 == 0, 1.0, -1.0)
    X = rng.standard_normal((n_train + n_test, D))
    y = (rng.random(n_train + n_test) < 1 / (1 + np.exp(-X @ w))).astype(int)
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], np.arange(RELEVANT)


def nci60(seed: int):
    path = FOLDER / "data" / "nci60_carcinoma.csv"
    table = np.genfromtxt(path, delimiter=",", skip_header=1)[:, 1:]  # drop cancer_type
    y, X = table[:, 0].astype(int), table[:, 1:]
    rng = np.random.default_rng(seed)
    by_class = [rng.permutation(np.flatnonzero(y == c))[:k] for c, k in ((1, 13), (0, 7))]
    test = np.concatenate(by_class)  # 20 test lines, stratified
    train = np.setdiff1d(np.arange(len(y)), test)
    mean, sd = X[train].mean(axis=0), X[train].std(axis=0, ddof=1)
    sd[sd == 0] = 1.0
    X = (X - mean) / sd
    return X[train], y[train], X[test], y[test], None


def fit_one(model_file: str, X, y, seed: int):
    checked = check(parse_file(str(FOLDER / model_file)))
    model = CompiledModel(checked, {"N": len(y), "K": X.shape[1], "X": X, "y": y})
    start = time.perf_counter()
    result = fit(model, "dsvi", rank="diag", seed=seed, draws=1000, tol_rel_obj=1e-3,
                 iterations=20000)  # fmt: skip
    return result, time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["synthetic", "nci60"])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"{'data':<10} {'model':<12} {'N':>4} {'D':>5} {'train err':>9} {'test err':>9} "
          f"{'true in top 20':>14} {'iter':>6} {'s':>7}")  # fmt: skip
    for name in args.data:
        Xtr, ytr, Xte, yte, truth = {"synthetic": synthetic, "nci60": nci60}[name](args.seed)
        for label, model_file in (("ARD", "ard.model"), ("fixed N(0,1)", "fixed_prior.model")):
            result, seconds = fit_one(model_file, Xtr, ytr, args.seed)
            alpha, beta = result.draws["alpha"], result.draws["beta"]

            def errors(X, y, alpha=alpha, beta=beta):
                p = np.mean(expit(alpha[:, None] + beta @ X.T), axis=0)
                return int(np.sum((p > 0.5) != y))

            top = np.argsort(-np.abs(beta.mean(axis=0)))[:RELEVANT]
            hits = "" if truth is None else f"{len(np.intersect1d(top, truth))}/{RELEVANT}"
            print(f"{name:<10} {label:<12} {len(ytr):>4} {Xtr.shape[1]:>5} "
                  f"{errors(Xtr, ytr):>4}/{len(ytr):<4} {errors(Xte, yte):>4}/{len(yte):<4} "
                  f"{hits:>14} {result.vi.iterations:>6} {seconds:>7.1f}", flush=True)  # fmt: skip
            for w in result.warnings:
                print("    warning:", w[:160])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
