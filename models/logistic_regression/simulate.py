"""Simulated logistic regression with many rows, for fixed_prior.model (21 parameters at K = 20).

    python models/logistic_regression/simulate.py OUT.csv [--rows 200000] [--seed 11]

Columns y, X.1..X.K; predictors standard normal, alpha = -0.3, beta ~ N(0, 0.5^2) drawn from the
same seed. The 200,000-row file (seed 11) is the one simulated_200k_nuts_reference.json was made
for (benchmarks/reference/big_logistic_nuts.py); it is not stored (42 MB): this script remakes
it exactly.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

K = 20


def simulate(rows: int, seed: int = 11, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """(X (rows, k), y (rows,)) with the true alpha = -0.3 and beta drawn first from the seed."""
    rng = np.random.default_rng(seed)
    beta = rng.normal(0.0, 0.5, k)
    X = rng.standard_normal((rows, k))
    y = (rng.random(rows) < 1.0 / (1.0 + np.exp(-(-0.3 + X @ beta)))).astype(np.int64)
    return X, y


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    header = ",".join(["y"] + [f"X.{j + 1}" for j in range(X.shape[1])])
    table = np.column_stack([y, X])
    formats = ["%d"] + ["%.17g"] * X.shape[1]
    np.savetxt(path, table, delimiter=",", header=header, comments="", fmt=formats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the CSV file to write")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    write_csv(args.out, *simulate(args.rows, args.seed))


if __name__ == "__main__":
    main()
