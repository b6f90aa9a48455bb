"""Simulate the varying-intercepts logistic data (fixed seed) and write it in ppl's formats.

Run from anywhere:  python models/varying_intercepts/make_data.py   (numpy only)

Generative model (the same as varying_intercepts.model, at fixed true values):
    J = 100 groups, n_j ~ uniform{10, ..., 30} rows in group j
    alpha_j = MU + TAU * alpha_raw_j,  alpha_raw_j ~ normal(0, 1)
    X[n, k] ~ normal(0, 1), k = 1, 2
    y[n] ~ bernoulli(logit^-1(alpha[group[n]] + X[n] . BETA))

Writes, next to this script:
    varying_intercepts.csv   columns y, group (1-based), X.1, X.2; one row per observation
    sizes.json               {"J": 100}: the number of groups, not a column length
    varying_intercepts.json  everything (N, J, K and the columns) as one Stan-JSON file
    truth.json               the simulated true values (mu, tau, beta, alpha) and the seed
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 20240611
J = 100
K = 2
N_MIN, N_MAX = 10, 30
MU = -0.5
TAU = 1.2
BETA = (0.7, -0.4)


def simulate() -> dict:
    rng = np.random.default_rng(SEED)
    sizes = rng.integers(N_MIN, N_MAX + 1, size=J)
    alpha_raw = rng.standard_normal(J)
    alpha = MU + TAU * alpha_raw
    group = np.repeat(np.arange(1, J + 1), sizes)
    n = int(sizes.sum())
    X = np.round(rng.standard_normal((n, K)), 4)  # 4 decimals, written exactly as used
    eta = alpha[group - 1] + X @ np.asarray(BETA)
    y = (rng.uniform(size=n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return {"N": n, "group": group, "X": X, "y": y, "alpha": alpha}


def main() -> None:
    s = simulate()
    n = s["N"]
    with open(HERE / "varying_intercepts.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["y", "group"] + [f"X.{k + 1}" for k in range(K)])
        for i in range(n):
            w.writerow([int(s["y"][i]), int(s["group"][i])] + [f"{v:.4f}" for v in s["X"][i]])
    with open(HERE / "sizes.json", "w") as f:
        json.dump({"J": J}, f)
        f.write("\n")
    everything = {
        "N": n,
        "J": J,
        "K": K,
        "group": s["group"].tolist(),
        "X": [[float(f"{v:.4f}") for v in row] for row in s["X"]],
        "y": s["y"].tolist(),
    }
    with open(HERE / "varying_intercepts.json", "w") as f:
        json.dump(everything, f)
        f.write("\n")
    truth = {
        "seed": SEED,
        "mu": MU,
        "tau": TAU,
        "beta": list(BETA),
        "alpha": [round(float(a), 6) for a in s["alpha"]],
    }
    with open(HERE / "truth.json", "w") as f:
        json.dump(truth, f, indent=1)
        f.write("\n")
    print(f"N = {n} rows in J = {J} groups; mean(y) = {s['y'].mean():.3f}")


if __name__ == "__main__":
    main()
