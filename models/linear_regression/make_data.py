"""Build boston.csv (columns y, X.1..X.4) from boston_mass.csv, the copied MASS `Boston` data.

Run from anywhere:  python models/linear_regression/make_data.py
Reads only the copy next to this script (never the workspace's shared data folder).

    y   = log(medv)    log median home value (medv in $1000s)
    X.1 = rm           average number of rooms per dwelling
    X.2 = log(lstat)   log % lower-status population
    X.3 = ptratio      pupil-teacher ratio by town
    X.4 = nox          nitric-oxide concentration (parts per 10 million)

The logs follow Harrison & Rubinfeld (1978), who modelled log(medv) and log(lstat).
Predictors are left on their natural scale here; linear_regression.model standardises them
in its transformed data block.
"""

import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    with open(HERE / "boston_mass.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(HERE / "boston.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["y", "X.1", "X.2", "X.3", "X.4"])
        for r in rows:
            w.writerow(
                [
                    repr(math.log(float(r["medv"]))),
                    r["rm"],
                    repr(math.log(float(r["lstat"]))),
                    r["ptratio"],
                    r["nox"],
                ]
            )


if __name__ == "__main__":
    main()
