"""Build boston13.csv (columns y, X.1..X.13) from boston_mass.csv, the copied MASS `Boston` data.

Run from anywhere:  python models/spike_slab/make_data.py
Reads only the copy next to this script.

    y    = log(medv)   log median home value
    X.k  = the 13 inputs in MASS's order: crim zn indus chas nox rm age dis rad tax ptratio
           black lstat, with lstat and crim logged (Harrison & Rubinfeld 1978)
"""

import csv
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
INPUTS = ["crim", "zn", "indus", "chas", "nox", "rm", "age", "dis", "rad", "tax", "ptratio",
          "black", "lstat"]  # fmt: skip
LOGGED = {"crim", "lstat"}


def main() -> None:
    with open(HERE / "boston_mass.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(HERE / "boston13.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["y"] + [f"X.{k + 1}" for k in range(len(INPUTS))])
        for r in rows:
            x = [math.log(float(r[c])) if c in LOGGED else float(r[c]) for c in INPUTS]
            w.writerow([repr(math.log(float(r["medv"])))] + [repr(v) for v in x])


if __name__ == "__main__":
    main()
