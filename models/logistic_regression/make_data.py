"""Build pima_train.csv and pima_test.csv (columns y, X.1..X.7) from pima_mass.csv.

pima_mass.csv is the copied MASS `Pima.tr` + `Pima.te` data (column `split` = train / test,
Ripley 1996). Run from anywhere:  python models/logistic_regression/make_data.py
Reads only the copy next to this script (never the workspace's shared data folder).

    y   = diabetes (1 = diabetic by WHO criteria)
    X.1 = npreg   X.2 = glu   X.3 = bp   X.4 = skin   X.5 = bmi   X.6 = ped   X.7 = age

Predictors are left on their natural scale; pima.model standardises them in transformed data.
"""

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
PREDICTORS = ["npreg", "glu", "bp", "skin", "bmi", "ped", "age"]


def main() -> None:
    with open(HERE / "pima_mass.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    header = ["y"] + [f"X.{k}" for k in range(1, len(PREDICTORS) + 1)]
    for split in ("train", "test"):
        with open(HERE / f"pima_{split}.csv", "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(header)
            for r in rows:
                if r["split"] == split:
                    w.writerow([r["diabetes"]] + [r[c] for c in PREDICTORS])


if __name__ == "__main__":
    main()
