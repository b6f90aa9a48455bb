"""Fit every reference posterior (models/posteriordb, models/hard) and compare with its reference.

Prints, per problem: parameters, seconds, gradient evaluations, max and median |mean error| / ref
sd, the median, min and max ratio of fitted to reference sd (the means and sds the user reads:
summary.csv's, PSIS-weighted where the fit's are, exact given q where the fit has them); the
accuracy class (good: every mean within 0.1 reference sd and every sd ratio in [0.8, 1.25];
ok: within 0.3 sd and [0.5, 2]; inaccurate otherwise), the fit's verdict
(result.diagnostics["verdict"]), the parameters the verdict names (its faults) and whether
the verdict was right (a good fit not called "not reliable", a fit that is not good called so).
Ends with totals.

    python benchmarks/accuracy.py [--suite posteriordb|hard|all] [--method auto] [--seed 1]
                                  [--only NAME] [--json PATH]

`--json benchmarks/results/accuracy_all.json` (with --suite all --method auto --seed 1) stores
the run whose tables benchmarks/tables.py writes into docs/accuracy.md, docs/diagnostics.md and
docs/auto.md; the rows carry what those tables need (the verdict's faults, what the road kept,
its notes).

The hard suite's references are made by benchmarks/reference/hard_references.py (models/hard).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.diagnostics.psis import verdict as psis_verdict  # noqa: E402
from ppl.methods import METHODS  # noqa: E402
from ppl.outputs.report import psis_weights  # noqa: E402
from ppl.outputs.summary import fit_summary  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

SUITES = {"posteriordb": ROOT / "models" / "posteriordb", "hard": ROOT / "models" / "hard"}
NOT_RELIABLE = "not reliable"


def accuracy_class(errs: list[float], ratios: list[float]) -> str:
    """good / ok / inaccurate from the mean errors (in reference sds) and the sd ratios."""
    worst, lo, hi = max(errs), min(ratios), max(ratios)
    if worst <= 0.1 and 0.8 <= lo and hi <= 1.25:
        return "good"
    if worst <= 0.3 and 0.5 <= lo and hi <= 2.0:
        return "ok"
    return "inaccurate"


def compare(folder: Path, method: str, seed: int) -> dict:
    ref = json.loads((folder / "reference.json").read_text())
    params = ref["parameters"]
    start = time.perf_counter()
    model = build(str(folder / "model.stan"), [str(folder / "data.json")], seed=seed)
    result = fit(model, method, seed=seed, draws=4000)
    seconds = time.perf_counter() - start
    # the summaries the user reads (summary.csv): PSIS-weighted where the fit's are, exact
    # given q where the fit has them (a collapsed q's quadrature)
    rows = {row[0]: row for row in fit_summary(result, psis_weights(result, False))}
    errs, ratios = [], []
    with np.errstate(all="ignore"):
        for name, r in params.items():
            _, mean, _, sd, *_ = rows[name]
            err = abs(mean - r["mean"]) / r["sd"]
            ratio = sd / r["sd"]
            # a non-finite summary is as wrong as it gets
            errs.append(float(err) if np.isfinite(err) else np.inf)
            ratios.append(float(ratio) if np.isfinite(ratio) else np.inf)
    diag = result.diagnostics
    verdict = diag.get("verdict") or psis_verdict(diag["khat"])
    faults = diag.get("faults") or []
    named = sorted({p for f in faults for p in f.get("parameters", [])})
    cls = accuracy_class(errs, ratios)
    return {
        "posterior": folder.name,
        "suite": folder.parent.name,
        "params": len(params),
        "seconds": seconds,
        "grad_evals": int(result.vi.grad_evals),
        "max_err": float(np.max(errs)),
        "median_err": float(np.median(errs)),
        "median_sd_ratio": float(np.median(ratios)),
        "min_sd_ratio": float(np.min(ratios)),
        "max_sd_ratio": float(np.max(ratios)),
        "converged": bool(result.vi.converged),
        "khat": float(diag["khat"]),
        "class": cls,
        "good": cls == "good",
        "verdict": verdict,
        "faults": named,
        "right": (cls == "good") == (verdict != NOT_RELIABLE),
        **road(result),
    }


def road(result) -> dict:
    """What the fit did and said, for the tables of docs/auto.md and docs/diagnostics.md
    (benchmarks/tables.py): how q was made, the families kept, the notes and warnings, the
    verdict's k-hat draws and threshold and its faults with how each was found."""
    diag = result.diagnostics
    polish = getattr(result.vi, "polish", None) or {}
    return {
        "dim": int(result.model.dim),
        "description": result.description,
        "families": dict(result.families),
        "noncentred": "noncentre" in getattr(result.model.ir, "passes", ()),
        "start": polish.get("start"),
        "notes": list(result.notes),
        "warnings": list(result.warnings),
        "khat_draws": int(diag.get("khat_draws") or diag.get("draws") or 0),
        "khat_threshold": float(diag.get("khat_threshold", np.nan)),
        "khat_output_draws": diag.get("khat_output_draws"),
        "psis_summaries": bool(diag.get("psis_summaries")),
        "tail_only": bool(diag.get("tail_only")),
        "fault_list": [
            {k: f.get(k) for k in ("parameters", "how", "detail")} for f in diag.get("faults") or []
        ],  # fmt: skip
    }


def folders(suite: str, only: str | None) -> list[Path]:
    chosen = list(SUITES.values()) if suite == "all" else [SUITES[suite]]
    out = []
    for root in chosen:
        out += sorted(p for p in root.iterdir() if (p / "reference.json").exists())
    return [p for p in out if not only or only in p.name]


def num(x: float) -> str:
    """Three decimals, or three significant digits where that would not fit the column."""
    return f"{x:.3f}" if abs(x) < 100 else f"{x:.2g}"


def row(r: dict) -> str:
    named = ",".join(r["faults"])
    named = named if len(named) <= 30 else named[:27] + "..."
    return (f"{r['posterior']:<34}{r['params']:>7}{r['seconds']:>9.2f}{r['grad_evals']:>11}"
            f"{num(r['max_err']):>9}{num(r['median_err']):>9}{num(r['median_sd_ratio']):>8}"
            f"{num(r['min_sd_ratio']):>8}{num(r['max_sd_ratio']):>8}  {r['class']:<11}"
            f"{r['verdict']:<13}{'yes' if r['right'] else 'NO':>5}  {named}")  # fmt: skip


HEADER = (f"{'problem':<34}{'params':>7}{'seconds':>9}{'grads':>11}{'max err':>9}"
          f"{'med err':>9}{'med sd':>8}{'min sd':>8}{'max sd':>8}  {'class':<11}"
          f"{'verdict':<13}{'right':>5}  named")  # fmt: skip
FOOTER = "errors are |mean - reference mean| / reference sd; sd ratio is fitted sd / reference sd"


def commit() -> str | None:
    """The repository's HEAD (with '+changes' when the tree differs from it), or None."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if dirty else "")


def totals(rows: list[dict]) -> list[str]:
    n = len(rows)
    if not n:
        return ["no problems run"]
    grads = [r["grad_evals"] for r in rows]
    good = sum(r["class"] == "good" for r in rows)
    false_alarm = sum(r["class"] == "good" and r["verdict"] == NOT_RELIABLE for r in rows)
    right = sum(r["right"] for r in rows)
    return [
        f"good {good} / {n}; ok {sum(r['class'] == 'ok' for r in rows)}; "
        f"inaccurate {sum(r['class'] == 'inaccurate' for r in rows)}",
        f"'not reliable' on a good fit: {false_alarm} / {n}",
        f"the verdict was right on {right} of {n}",
        f"gradient evaluations: median {int(np.median(grads))}, max {max(grads)}",
        f"seconds: total {sum(r['seconds'] for r in rows):.1f}",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="all", choices=["posteriordb", "hard", "all"])
    ap.add_argument("--method", default="advi", choices=list(METHODS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default=None, help="run only problems whose name contains this")
    ap.add_argument("--json", type=Path, default=None, help="write the rows to this file")
    args = ap.parse_args()
    print(f"suite={args.suite} method={args.method} seed={args.seed}")
    print(HEADER)
    print("-" * len(HEADER))
    rows, failed = [], []
    for folder in folders(args.suite, args.only):
        try:
            r = compare(folder, args.method, args.seed)
        except Exception as e:  # noqa: BLE001 - report and go on to the next problem
            print(f"{folder.name:<34} failed: {type(e).__name__}: {str(e).splitlines()[0]}")
            failed.append(folder.name)
            continue
        rows.append(r)
        print(row(r), flush=True)
    for line in totals(rows) + ([f"failed: {', '.join(failed)}"] if failed else []):
        print(line)
    print(FOOTER)
    if args.json:
        run = {
            "suite": args.suite,
            "method": args.method,
            "seed": args.seed,
            "commit": commit(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "rows": rows,
            "failed": failed,
        }
        args.json.write_text(json.dumps(run, indent=1) + "\n")


if __name__ == "__main__":
    main()
