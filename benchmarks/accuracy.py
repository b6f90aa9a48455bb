"""Fit every posteriordb model in models/posteriordb and compare with its reference posterior.

Prints, per model: parameters, seconds, gradient evaluations, max and median |mean error| / ref sd,
the median ratio of fitted to reference sd; whether the fit is good (every mean within 0.1
reference sd, every sd ratio in [0.8, 1.25]), the PSIS verdict (good / usable / not reliable) and
whether the verdict was right (a good fit not called "not reliable", a fit that is not good
called so).

    python benchmarks/accuracy.py [--method advi|fullrank] [--seed 1] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.diagnostics.psis import GOOD, USABLE  # noqa: E402
from ppl.outputs.summary import flatten_draws  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

POSTERIORDB = ROOT / "models" / "posteriordb"


def compare(folder: Path, method: str, seed: int) -> dict:
    ref = json.loads((folder / "reference.json").read_text())
    params = ref["parameters"]
    start = time.perf_counter()
    model = build(str(folder / "model.stan"), [str(folder / "data.json")], seed=seed)
    result = fit(model, method, seed=seed, draws=4000)
    seconds = time.perf_counter() - start
    names, matrix = flatten_draws(result.draws)
    col = {n: i for i, n in enumerate(names)}
    errs, ratios = [], []
    for name, r in params.items():
        x = matrix[:, col[name]]
        errs.append(abs(x.mean() - r["mean"]) / r["sd"])
        ratios.append(x.std(ddof=1) / r["sd"])
    return {
        "posterior": folder.name,
        "params": len(params),
        "seconds": seconds,
        "grad_evals": result.vi.grad_evals,
        "max_err": float(np.max(errs)),
        "median_err": float(np.median(errs)),
        "median_sd_ratio": float(np.median(ratios)),
        "converged": result.vi.converged,
        "good": max(errs) <= 0.1 and 0.8 <= min(ratios) and max(ratios) <= 1.25,
        "verdict": verdict(result.diagnostics["khat"]),
    }


def verdict(khat: float) -> str:
    return "good" if khat <= GOOD else "usable" if khat <= USABLE else "not reliable"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="advi", choices=["auto", "advi", "meanfield", "fullrank"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default=None, help="run only posteriors whose name contains this")
    args = ap.parse_args()
    print(f"method={args.method} seed={args.seed}")
    header = (f"{'posterior':<34}{'params':>7}{'seconds':>9}{'grad evals':>12}{'max err':>9}"
              f"{'med err':>9}{'med sd ratio':>14}{'conv':>6}{'good':>6}  {'verdict':<13}"
              f"{'right':>5}")  # fmt: skip
    print(header)
    print("-" * len(header))
    right = done = 0
    for folder in sorted(p for p in POSTERIORDB.iterdir() if (p / "reference.json").exists()):
        if args.only and args.only not in folder.name:
            continue
        try:
            r = compare(folder, args.method, args.seed)
        except Exception as e:  # noqa: BLE001 - report and go on to the next posterior
            print(f"{folder.name:<34} failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            continue
        print(f"{r['posterior']:<34}{r['params']:>7}{r['seconds']:>9.2f}{r['grad_evals']:>12}"
              f"{r['max_err']:>9.3f}{r['median_err']:>9.3f}{r['median_sd_ratio']:>14.3f}"
              f"{'yes' if r['converged'] else 'no':>6}{'yes' if r['good'] else 'no':>6}  "
              f"{r['verdict']:<13}{'yes' if ok(r) else 'NO':>5}", flush=True)  # fmt: skip
        right, done = right + ok(r), done + 1
    print(f"the verdict was right on {right} of {done}")
    print("errors are |mean - reference mean| / reference sd; sd ratio is fitted sd / reference sd")


def ok(r: dict) -> bool:
    """The verdict is right: 'not reliable' exactly when the fit is not good."""
    return r["good"] == (r["verdict"] != "not reliable")


if __name__ == "__main__":
    main()
