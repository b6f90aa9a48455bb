"""Build the data files of models/gpfa/ (run from the repository root).

- data/cells_hcs_inten.csv: the 31 intensity columns (plus `case`, the original Train/Test split)
  of data/cells_hcs.csv (an unmodified copy of the source table), values unmodified; the subset
  that the source collection's README names for D in 10-40. Transformations (log1p,
  standardisation) are done by benchmarks/gpfa_cytof.py, not here.
- example.json: a small synthetic GPFA data set (N = 200, D = 10, K = 3) for the README's fit
  command, drawn as in Knowles (2015) section 4.2 (W ~ 0.8 delta_0 + 0.2 U[0, 1], noise var 0.1).
"""

import csv
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "data", "cells_hcs.csv")

with open(SOURCE, newline="") as f:
    reader = csv.reader(f)
    header = next(reader)
    rows = list(reader)
keep = [i for i, name in enumerate(header) if "inten" in name] + [header.index("case")]
assert len(keep) == 32, len(keep)
with open(os.path.join(HERE, "data", "cells_hcs_inten.csv"), "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow([header[i] for i in keep])
    for r in rows:
        w.writerow([r[i] for i in keep])

rng = np.random.default_rng(2015)
N, D, K = 200, 10, 3
W = np.where(rng.random((D, K)) < 0.2, rng.random((D, K)), 0.0)
# make sure every factor loads on something, so the example has K visible factors
for k in range(K):
    if not W[:, k].any():
        W[rng.integers(D), k] = rng.uniform(0.5, 1.0)
Y = rng.standard_normal((N, K)) @ W.T + np.sqrt(0.1) * rng.standard_normal((N, D))
with open(os.path.join(HERE, "example.json"), "w") as f:
    json.dump({"N": N, "D": D, "K": K, "y": np.round(Y, 6).tolist()}, f)
with open(os.path.join(HERE, "example_W.json"), "w") as f:
    json.dump({"W": W.round(6).tolist()}, f)
