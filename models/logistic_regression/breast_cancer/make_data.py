"""Build breast_cancer.csv (columns y, X.1..X.30) from breast_cancer_wdbc.csv, the copied
Wisconsin diagnostic breast cancer table.

Run from anywhere:  python models/logistic_regression/breast_cancer/make_data.py
Reads only the copy next to this script (never the workspace's shared data folder).

    y    = malignant (1 = malignant, 0 = benign)
    X.k  = the k-th of the 30 nucleus features, in the source's column order (mean_radius ...
           worst_fractal_dimension; the list is in README.md)

Values are copied as the source writes them; breast_cancer.model standardises the features in
its transformed data block.
"""

import csv
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "breast_cancer_wdbc.csv"
OUT = HERE / "breast_cancer.csv"


def main() -> None:
    with open(SOURCE, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    features = [j for j, name in enumerate(header) if name != "malignant"]
    target = header.index("malignant")
    assert len(features) == 30
    with open(OUT, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["y", *(f"X.{k}" for k in range(1, len(features) + 1))])
        for r in body:
            w.writerow([r[target], *(r[j] for j in features)])


if __name__ == "__main__":
    main()
