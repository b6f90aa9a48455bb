"""DSVI on the Pima logistic regression against a NUTS reference (issue: DSVI acceptance).

    OPENBLAS_NUM_THREADS=1 python benchmarks/dsvi_pima.py [--seeds 5] [--tol 1e-4]

Fits models/logistic_regression/pima.model on pima_train.csv with full-rank and diagonal DSVI
(and ppl's ADVI for comparison, polish off so every method is purely stochastic) and prints, per
method and seed, the worst parameter's |mean error| / reference sd, |sd ratio - 1| and the worst
posterior-correlation error, against models/logistic_regression/pima_nuts_reference.json
(made by benchmarks/reference/pima_nuts.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

FOLDER = ROOT / "models" / "logistic_regression"
METHODS = {
    "dsvi full": {"method": "dsvi"},
    "dsvi diag": {"method": "dsvi", "rank": "diag"},
    "fullrank ADVI": {"method": "fullrank"},
    "meanfield ADVI": {"method": "advi"},
}


def errors(draws: dict, reference: dict) -> dict:
    names = reference["parameters"]
    columns = []
    for name in names:
        base, _, index = name.partition("[")
        values = draws[base]
        columns.append(values if not index else values[:, int(index[:-1]) - 1])
    X = np.column_stack(columns)
    mean = np.array([reference["mean"][n] for n in names])
    sd = np.array([reference["sd"][n] for n in names])
    corr = np.corrcoef(X, rowvar=False)
    return {
        "mean": float(np.max(np.abs(X.mean(axis=0) - mean) / sd)),
        "sd": float(np.max(np.abs(X.std(axis=0, ddof=1) / sd - 1))),
        "corr": float(np.max(np.abs(corr - np.array(reference["correlation"])))),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--tol", type=float, default=1e-4, help="tol_rel_obj for every method")
    ap.add_argument("--draws", type=int, default=20000)
    args = ap.parse_args(argv)
    reference = json.loads((FOLDER / "pima_nuts_reference.json").read_text())
    model = build(str(FOLDER / "pima.model"), [str(FOLDER / "pima_train.csv")], {})
    print(
        f"Pima logistic regression (N = 200, 8 parameters) vs NUTS ({reference['sampler']}); "
        f"tol_rel_obj {args.tol}, {args.draws} draws; worst parameter per column\n"
    )
    print(f"{'method':<16} {'seed':>4} {'|mean err|/sd':>14} {'|sd ratio-1|':>13} "
          f"{'|corr err|':>11} {'iter':>6} {'grads':>7} {'s':>6}")  # fmt: skip
    for label, options in METHODS.items():
        rows = []
        for seed in range(1, args.seeds + 1):
            start = time.perf_counter()
            result = fit(model, seed=seed, tol_rel_obj=args.tol, draws=args.draws,
                         refine_draws=0, **options)  # fmt: skip
            seconds = time.perf_counter() - start
            err = errors(result.draws, reference)
            rows.append(err)
            print(f"{label:<16} {seed:>4} {err['mean']:>14.3f} {err['sd']:>13.3f} "
                  f"{err['corr']:>11.3f} {result.vi.iterations:>6} {result.vi.grad_evals:>7} "
                  f"{seconds:>6.2f}")  # fmt: skip
        worst = {k: max(r[k] for r in rows) for k in rows[0]}
        print(f"{label:<16} {'max':>4} {worst['mean']:>14.3f} {worst['sd']:>13.3f} "
              f"{worst['corr']:>11.3f}\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
