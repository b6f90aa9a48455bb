"""Build liver.json (the Gamma-Normal factor model's data) from liver_lab.csv.

liver_lab.csv is the copied texmex `liver` table: 606 patients, 8 strictly positive lab values
(ALP, ALT, AST, TBL at baseline `_B` and after treatment `_M`). The labs span two orders of
magnitude, so each column is log-transformed and standardised (mean 0, sd 1).
Run from anywhere:  python models/gamma_normal/make_data.py [--factors L]
"""

import argparse
import csv
import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABS = ["ALP_B", "ALT_B", "AST_B", "TBL_B", "ALP_M", "ALT_M", "AST_M", "TBL_M"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factors", type=int, default=3)
    args = ap.parse_args()
    with open(HERE / "liver_lab.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cols = []
    for lab in LABS:
        v = [math.log(float(r[lab])) for r in rows]
        mean = sum(v) / len(v)
        sd = math.sqrt(sum((a - mean) ** 2 for a in v) / (len(v) - 1))
        cols.append([(a - mean) / sd for a in v])
    y = [[round(cols[j][n], 6) for j in range(len(LABS))] for n in range(len(rows))]
    data = {"N": len(rows), "J": len(LABS), "L": args.factors, "y": y}
    with open(HERE / "liver.json", "w") as f:
        json.dump(data, f)
    print(f"wrote {HERE / 'liver.json'}: N = {len(rows)}, J = {len(LABS)}, L = {args.factors}")


if __name__ == "__main__":
    main()
