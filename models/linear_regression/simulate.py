"""Write a simulated linear-regression table for linear_regression.model: columns y, X.1..X.4.

    python models/linear_regression/simulate.py OUT.csv [--rows 20000] [--seed 20000]

Used by benchmarks/end_to_end.py (20,000 rows; the file is made on demand, not kept in the
repository) and to measure the CSV reader at 10^6 rows. The same rows and seed give the same
file, byte for byte. The predictors are on different scales and correlated, so the model's
standardisation in transformed data does real work:

    X.1 ~ normal(5, 2),  X.2 ~ normal(-3, 0.5) + 0.1 X.1,  X.3 ~ uniform(0, 100),
    X.4 ~ exponential(mean 2)
    y = 1.5 + 0.8 X.1 - 2 X.2 + 0.01 X.3 + 0 X.4 + normal(0, 3)

Numbers are written with 10 significant digits. The rows are written in blocks, so 10^6 rows do
not need the whole text in memory. Generated here; no licence restrictions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

ALPHA = 1.5
BETA = (0.8, -2.0, 0.01, 0.0)
SIGMA = 3.0
BLOCK = 50_000


def block(rng: np.random.Generator, n: int) -> np.ndarray:
    """n rows (y, X.1..X.4) from the generator's stream."""
    x1 = rng.normal(5.0, 2.0, n)
    x2 = rng.normal(-3.0, 0.5, n) + 0.1 * x1
    x3 = rng.uniform(0.0, 100.0, n)
    x4 = rng.exponential(2.0, n)
    X = np.column_stack([x1, x2, x3, x4])
    y = ALPHA + X @ np.asarray(BETA) + rng.normal(0.0, SIGMA, n)
    return np.column_stack([y, X])


def write(path: Path, rows: int, seed: int = 20000) -> Path:
    """Write the table to `path` (its folder must exist); returns `path`."""
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="") as f:
        f.write("y,X.1,X.2,X.3,X.4\n")
        done = 0
        while done < rows:
            n = min(BLOCK, rows - done)
            np.savetxt(f, block(rng, n), fmt="%.10g", delimiter=",")
            done += n
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=20000)
    args = ap.parse_args()
    write(args.out, args.rows, args.seed)


if __name__ == "__main__":
    main()
