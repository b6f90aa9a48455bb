"""Boston GP regression data: a fixed random 80/20 split, standardised with the training set.

    python models/gp_regression/make_data.py

Reads ../linear_regression/boston_mass.csv (MASS::Boston, provenance and licence in
models/linear_regression/README.md); writes boston_train.csv and boston_test.csv with columns
y, X.1..X.13 (y = medv; X = the 13 other columns), both scaled by the training means and sds.
"""

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent / "linear_regression" / "boston_mass.csv"


def main() -> None:
    table = np.loadtxt(SOURCE, delimiter=",", skiprows=1)
    X, y = table[:, :13], table[:, 13]
    order = np.random.default_rng(20140621).permutation(len(y))
    n_train = int(round(0.8 * len(y)))
    train, test = order[:n_train], order[n_train:]
    mx, sx = X[train].mean(axis=0), X[train].std(axis=0, ddof=1)
    my, sy = y[train].mean(), y[train].std(ddof=1)
    header = "y," + ",".join(f"X.{k + 1}" for k in range(13))
    for name, rows in (("boston_train.csv", train), ("boston_test.csv", test)):
        out = np.column_stack([(y[rows] - my) / sy, (X[rows] - mx) / sx])
        np.savetxt(HERE / name, out, delimiter=",", header=header, comments="", fmt="%.10g")


if __name__ == "__main__":
    main()
