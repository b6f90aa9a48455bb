"""10^6 rows of a 21-parameter logistic regression (20 standard-normal predictors, seed 7) as
4 Parquet files and one CSV file in a directory (default /tmp/m1), for the --engine dask
default road against the in-memory fit (docs/dask.md):

    python benchmarks/make_logistic_1e6.py [DIR]
    ppl fit models/logistic_regression/fixed_prior.model 'DIR/part-*.parquet' \\
        --engine dask --workers 2
    ppl fit models/logistic_regression/fixed_prior.model DIR/all.csv
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

ROWS, K, FILES = 1_000_000, 20, 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", default="/tmp/m1", type=Path, help="output directory")
    out = parser.parse_args().dir
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    beta, alpha = rng.normal(0, 0.5, K), -0.3
    for i in range(FILES):
        n = ROWS // FILES
        X = rng.standard_normal((n, K))
        y = (rng.random(n) < 1 / (1 + np.exp(-(alpha + X @ beta)))).astype(np.int64)
        frame = pd.DataFrame({"y": y, **{f"X.{j + 1}": X[:, j] for j in range(K)}})
        frame.to_parquet(out / f"part-{i}.parquet", index=False)
        frame.to_csv(out / "all.csv", index=False, mode="w" if i == 0 else "a", header=i == 0)


if __name__ == "__main__":
    main()
