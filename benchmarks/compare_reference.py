"""Fit a model as `ppl fit` does and compare every summary with a stored reference posterior.

    python benchmarks/compare_reference.py MODEL DATA [DATA ...] REFERENCE_JSON
        [--method auto] [--seed 1] [--draws 4000] [--iter 10000] [--set N=V] [--all]
        [--json OUT]

REFERENCE_JSON is a stored NUTS run (benchmarks/reference/*: 'mean' and 'sd' maps keyed by Stan
element names, e.g. models/varying_intercepts/nuts_reference.json) or a posteriordb
reference.json ('parameters' with mean and sd per element). The fit is ppl's default one
(`build` then `fit(model, method)`, as the CLI runs it), summarised from --draws draws of q
(default 4000, so that the draws' own Monte Carlo error in an sd is ~1%; the fit itself does
not depend on it). Per compared quantity (every element the reference names that the fit has:
parameters, transformed parameters and generated quantities):

    err      |fitted mean - reference mean| / reference sd
    sd ratio fitted sd / reference sd

Prints the worst 15 quantities (by err and by |log sd ratio|; --all: every one), then per
variable and overall: the median and worst err, the median, smallest and largest sd ratio, and
how many sds are not within 20% of the reference's (|sd ratio - 1| > 0.2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.outputs.plots import _read_reference  # noqa: E402
from ppl.outputs.summary import flatten_draws  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

SD_TOLERANCE = 0.2  # "every sd within 20% of the reference"


def _sets(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name.strip()] = value.strip()
    return out


def variable(name: str) -> str:
    return re.sub(r"\[.*\]$", "", name)


def compare(names, matrix, reference: dict) -> list[dict]:
    """Per quantity the reference names and the draws have: means, sds, err and sd ratio."""
    col = {n: i for i, n in enumerate(names)}
    rows = []
    for name, (ref_mean, ref_sd, _, _) in reference.items():
        if name not in col:
            continue
        x = matrix[:, col[name]]
        mean, sd = float(x.mean()), float(x.std(ddof=1))
        rows.append({
            "name": name, "ref_mean": ref_mean, "ref_sd": ref_sd, "mean": mean, "sd": sd,
            "err": abs(mean - ref_mean) / ref_sd, "sd_ratio": sd / ref_sd,
        })  # fmt: skip
    return rows


def aggregate(rows: list[dict]) -> dict:
    err = np.array([r["err"] for r in rows])
    ratio = np.array([r["sd_ratio"] for r in rows])
    return {
        "n": len(rows),
        "median_err": float(np.median(err)),
        "max_err": float(err.max()),
        "worst_err": rows[int(err.argmax())]["name"],
        "median_sd_ratio": float(np.median(ratio)),
        "min_sd_ratio": float(ratio.min()),
        "max_sd_ratio": float(ratio.max()),
        "worst_sd": rows[int(np.abs(np.log(ratio)).argmax())]["name"],
        "sd_outside_20pct": int(np.sum(np.abs(ratio - 1.0) > SD_TOLERANCE)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("model")
    ap.add_argument("files", nargs="+", metavar="DATA ... REFERENCE_JSON")
    ap.add_argument("--method", default="auto")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=4000)
    ap.add_argument("--iter", type=int, default=10000)
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--all", action="store_true", help="print every quantity")
    ap.add_argument("--json", type=Path, default=None, help="write the numbers to this file")
    args = ap.parse_args(argv)
    if len(args.files) < 2:
        ap.error("give the data file(s), then the reference JSON")
    data, ref_path = args.files[:-1], args.files[-1]
    reference = _read_reference(ref_path)

    start = time.perf_counter()
    model = build(args.model, data, _sets(args.set), seed=args.seed)
    result = fit(model, args.method, iterations=args.iter, seed=args.seed, draws=args.draws)
    seconds = time.perf_counter() - start
    names, matrix = flatten_draws(result.draws)
    rows = compare(names, matrix, reference)
    if not rows:
        print(f"{ref_path} names none of the fit's quantities", file=sys.stderr)
        return 1
    missing = [n for n in reference if n not in set(names)]

    diag = result.diagnostics
    print(f"{args.model} {' '.join(data)}: method {args.method} -> {result.method}, seed "
          f"{args.seed}, {seconds:.1f} s, {result.vi.grad_evals} gradient evaluations, "
          f"k-hat {diag.get('khat', float('nan')):.2f}, {args.draws} draws")  # fmt: skip
    for note in result.notes:
        print(f"  note: {note}")
    print(
        f"reference: {ref_path} ({len(rows)} quantities compared"
        + (f"; {len(missing)} not in the fit, e.g. {missing[0]}" if missing else "")
        + ")"
    )

    shown = rows
    if not args.all:
        by_err = sorted(rows, key=lambda r: -r["err"])[:15]
        by_sd = sorted(rows, key=lambda r: -abs(np.log(r["sd_ratio"])))[:15]
        keep = {r["name"] for r in by_err + by_sd}
        shown = [r for r in rows if r["name"] in keep]
        print(f"the {len(shown)} quantities with the 15 largest errors or sd ratios farthest "
              "from 1 (--all: every one)")  # fmt: skip
    print(f"{'quantity':<16}{'ref mean':>10}{'ref sd':>9}{'mean':>10}{'sd':>9}{'err':>8}"
          f"{'sd ratio':>10}")  # fmt: skip
    for r in shown:
        print(f"{r['name']:<16}{r['ref_mean']:>10.4f}{r['ref_sd']:>9.4f}{r['mean']:>10.4f}"
              f"{r['sd']:>9.4f}{r['err']:>8.3f}{r['sd_ratio']:>10.3f}")  # fmt: skip

    groups: dict[str, list[dict]] = {}
    for r in rows:
        groups.setdefault(variable(r["name"]), []).append(r)
    per_variable = {v: aggregate(g) for v, g in groups.items()}
    overall = aggregate(rows)
    print()
    print(f"{'variable':<12}{'n':>5}{'med err':>9}{'max err':>9}{'med sd ratio':>14}"
          f"{'min':>8}{'max':>8}{'sd off >20%':>13}")  # fmt: skip
    for v, a in [*per_variable.items(), ("ALL", overall)]:
        print(f"{v:<12}{a['n']:>5}{a['median_err']:>9.3f}{a['max_err']:>9.3f}"
              f"{a['median_sd_ratio']:>14.3f}{a['min_sd_ratio']:>8.3f}{a['max_sd_ratio']:>8.3f}"
              f"{a['sd_outside_20pct']:>13}")  # fmt: skip
    print(
        f"worst mean: {overall['worst_err']} (err {overall['max_err']:.3f}); worst sd: "
        f"{overall['worst_sd']}; err = |mean - ref mean| / ref sd, sd ratio = sd / ref sd"
    )
    if args.json:
        args.json.write_text(json.dumps({
            "model": args.model, "data": data, "reference": ref_path, "method": args.method,
            "fitted_by": result.method, "seed": args.seed, "draws": args.draws,
            "seconds": seconds, "khat": diag.get("khat"), "notes": list(result.notes),
            "overall": overall, "per_variable": per_variable, "quantities": rows,
        }, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
