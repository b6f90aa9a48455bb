"""Does the stochastic road end at its optimum? (issue 33, item 4)

    OPENBLAS_NUM_THREADS=1 python benchmarks/dsvi_optimum.py [--seeds 3] [--tol X] [--cases ...]
        [--out benchmarks/results/dsvi_optimum.json]

Two fits a user picks by name, at the default stopping rule (or Stan's relative-ELBO rule with
`--tol X`, the "before"):

- `breast`: `--method dsvi --rank full` on the 31-parameter breast-cancer logistic regression
  (models/logistic_regression/breast_cancer), q's means and sds against NUTS
  (breast_cancer_nuts_reference.json, made by benchmarks/reference/breast_cancer_nuts.py);
- `stream`: `--method dsvi --batch 1000 --stream` on a 20,000-row linear regression
  (models/linear_regression/simulate.py's rows, predictors standardised here, 6 parameters),
  q's means against the full-data fit of the default road (`auto`, which ends at the optimum of
  a fixed-draw ELBO), in its sds; `dask`: the same minibatches drawn on 2 Dask workers from the
  rows in four CSV files.

Prints, per case and seed, the worst |mean error| / reference sd, the worst |sd ratio - 1| (on
the unconstrained scale: q's own), iterations, gradient evaluations and seconds; writes them to
`--out` as JSON. `--render` rewrites the table in docs/dsvi.md (between `<!-- table
dsvi-optimum: made by benchmarks/dsvi_optimum.py -->` and `<!-- end table dsvi-optimum -->`) from
the two stored runs, as benchmarks/tables.py does for its tables; tests/inference/
test_optimum_rule.py fails when the doc's table differs from them:

    python benchmarks/dsvi_optimum.py --seeds 3 --out benchmarks/results/dsvi_optimum.json
    python benchmarks/dsvi_optimum.py --seeds 3 --tol 0.01 \
        --out benchmarks/results/dsvi_optimum_stan.json
    python benchmarks/dsvi_optimum.py --render
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "models" / "linear_regression"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import doc_markers  # noqa: E402

BREAST = ROOT / "models" / "logistic_regression" / "breast_cancer"
LINEAR = """data {
  int<lower=1> N;
  int<lower=1> K;
  matrix[N, K] X;                 // standardised predictors
  vector[N] y;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0> sigma;
}
model {
  alpha ~ normal(0, 10);
  beta ~ normal(0, 10);
  sigma ~ exponential(1);
  y ~ normal(alpha + X * beta, sigma);
}
"""
ROWS, BATCH, PARTS = 20000, 1000, 4
RESULTS = ROOT / "benchmarks" / "results"
RUNS = (RESULTS / "dsvi_optimum_stan.json", RESULTS / "dsvi_optimum.json")
DOC = ROOT / "docs" / "dsvi.md"
NAME = "dsvi-optimum"
CASES = {
    "breast": "breast cancer, `--rank full`, vs NUTS",
    "stream": "20,000 rows, `--batch 1000 --stream`, vs all rows",
    "dask": "20,000 rows in 4 files, `--batch 1000` on Dask, vs all rows",
}


def unconstrained(vi) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(vi.mean, dtype=float), np.asarray(vi.sd, dtype=float)


def compare(mean, sd, ref_mean, ref_sd) -> dict:
    return {"mean_err": float(np.max(np.abs(mean - ref_mean) / ref_sd)),
            "sd_err": float(np.max(np.abs(sd / ref_sd - 1.0)))}  # fmt: skip


def timed_fit(model, **options):
    from ppl.pipeline import fit

    start = time.perf_counter()
    result = fit(model, draws=200, **options)
    return result, time.perf_counter() - start


def row(result, seconds: float, errors: dict) -> dict:
    vi = result.vi
    return {
        **errors,
        "iterations": int(vi.iterations),
        "gradients": int(vi.grad_evals),
        "seconds": round(seconds, 2),
        "stopped_by": getattr(vi, "stopped_by", ""),
    }


def breast(seeds, tol) -> list[dict]:
    from ppl.data.build import build

    reference = json.loads((BREAST / "breast_cancer_nuts_reference.json").read_text())
    names = reference["parameters"]
    ref_mean = np.array([reference["mean"][n] for n in names])
    ref_sd = np.array([reference["sd"][n] for n in names])
    model = build(str(BREAST / "breast_cancer.model"), [str(BREAST / "breast_cancer.csv")], {})
    rows = []
    for seed in seeds:
        result, seconds = timed_fit(model, method="dsvi", rank="full", seed=seed,
                                    tol_rel_obj=tol)  # fmt: skip
        mean, sd = unconstrained(result.vi)
        rows.append({"case": "breast", "seed": seed, **row(result, seconds,
                     compare(mean, sd, ref_mean, ref_sd))})  # fmt: skip
        print_row(rows[-1])
    return rows


def write_linear(folder: Path) -> tuple[Path, Path, list[Path]]:
    """The model, the 20,000 rows in one CSV file, and in four (the Dask case's)."""
    import simulate

    table = simulate.block(np.random.default_rng(20000), ROWS)
    X = table[:, 1:]
    table[:, 1:] = (X - X.mean(axis=0)) / X.std(axis=0, ddof=1)
    header = "y," + ",".join(f"X.{k}" for k in range(1, X.shape[1] + 1))
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "linear.model"
    model.write_text(LINEAR)
    whole = folder / "rows.csv"
    np.savetxt(whole, table, fmt="%.10g", delimiter=",", header=header, comments="")
    parts = []
    for i, part in enumerate(np.array_split(table, PARTS), start=1):
        (folder / "parts").mkdir(exist_ok=True)
        parts.append(folder / "parts" / f"part-{i}.csv")
        np.savetxt(parts[-1], part, fmt="%.10g", delimiter=",", header=header, comments="")
    return model, whole, parts


def linear(seeds, tol, folder: Path, engines: list[str]) -> list[dict]:
    from ppl.data.build import build, build_streamed
    from ppl.methods.dsvi import elbo_sample_rows

    model_path, whole, parts = write_linear(folder)
    full = build(str(model_path), [str(whole)])
    exact, seconds = timed_fit(full, seed=1)
    ref_mean, ref_sd = unconstrained(exact.vi)
    print(f"full-data fit (auto): {seconds:.1f} s, {exact.vi.grad_evals} gradients")
    rows = []
    with contextlib.ExitStack() as stack:
        for engine in engines:
            for seed in seeds:
                if engine == "stream":
                    model, stream = build_streamed(str(model_path), [str(whole)],
                                                   keep=elbo_sample_rows(BATCH))  # fmt: skip
                    extra = {"stream": stream}
                else:
                    model, extra = _dask(stack, model_path, parts, seed)
                result, seconds = timed_fit(model, method="dsvi", batch=BATCH, seed=seed,
                                            tol_rel_obj=tol, **extra)  # fmt: skip
                mean, sd = unconstrained(result.vi)
                rows.append({"case": engine, "seed": seed, **row(result, seconds,
                             compare(mean, sd, ref_mean, ref_sd))})  # fmt: skip
                print_row(rows[-1])
    return rows


def _dask(stack, model_path, parts, seed):
    from ppl.distributed.build import build_distributed
    from ppl.distributed.cluster import connect
    from ppl.methods.dsvi import elbo_sample_rows

    if not hasattr(_dask, "client"):
        _dask.client = stack.enter_context(connect(workers=2))
    model, partitions = build_distributed(str(model_path), [str(p) for p in parts], {}, seed,
                                          _dask.client, keep=elbo_sample_rows(BATCH))  # fmt: skip
    return model, {"partitions": partitions}


def print_row(r: dict) -> None:
    print(f"{r['case']:<7} {r['seed']:>4} {r['mean_err']:>9.3f} {r['sd_err']:>8.3f} "
          f"{r['iterations']:>6} {r['gradients']:>8} {r['seconds']:>7.2f}  {r['stopped_by']}",
          flush=True)  # fmt: skip


def span(values, fmt: str) -> str:
    lo, hi = min(values), max(values)
    return format(lo, fmt) if format(lo, fmt) == format(hi, fmt) else f"{lo:{fmt}}-{hi:{fmt}}"


def table(runs: dict[str, dict]) -> str:
    """The doc's table: per case and rule, the range over seeds."""
    lines = [
        "| fit | rule | seeds | worst \\|mean err\\| / sd | worst \\|sd ratio - 1\\| | "
        "converged | iterations | gradients | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case, label in CASES.items():
        for run in runs.values():
            rows = [r for r in run["rows"] if r["case"] == case]
            if not rows:
                continue
            tol = run.get("tol_rel_obj")
            name = "optimum" if tol is None else f"Stan, {tol:g}"
            done = sum(bool(r["stopped_by"]) for r in rows)
            lines.append(
                f"| {label} | {name} | {len(rows)} | {span([r['mean_err'] for r in rows], '.3f')} "
                f"| {span([r['sd_err'] for r in rows], '.3f')} | {done}/{len(rows)} "
                f"| {span([r['iterations'] for r in rows], 'd')} "
                f"| {span([r['gradients'] for r in rows], 'd')} "
                f"| {span([r['seconds'] for r in rows], '.1f')} |"
            )
    return "\n".join(lines)


def rendered(text: str, runs: dict[str, dict]) -> str:
    """`text` with the table between the markers re-made from `runs`."""
    try:
        return doc_markers.rewritten(text, "table", NAME, "benchmarks/dsvi_optimum.py", table(runs))
    except ValueError:
        raise SystemExit(f"{DOC}: no {NAME} table markers") from None


def load_runs() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in RUNS if path.exists()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument(
        "--tol",
        type=float,
        default=None,
        help="Stan's relative-ELBO rule at this tolerance (default: the optimum rule)",
    )
    ap.add_argument("--cases", nargs="+", default=["breast", "stream"],
                    choices=["breast", "stream", "dask"])  # fmt: skip
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/ppl-dsvi-optimum"))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--render", action="store_true", help="rewrite docs/dsvi.md's table")
    args = ap.parse_args(argv)
    if args.render:
        DOC.write_text(rendered(DOC.read_text(), load_runs()))
        return 0
    seeds = list(range(1, args.seeds + 1))
    rule = "the optimum rule" if args.tol is None else f"Stan's rule, tol_rel_obj {args.tol:g}"
    print(f"stopping: {rule}; worst parameter per fit (unconstrained scale)\n")
    print(f"{'case':<7} {'seed':>4} {'mean err':>9} {'sd err':>8} {'iter':>6} {'grads':>8} "
          f"{'s':>7}")  # fmt: skip
    rows = []
    if "breast" in args.cases:
        rows += breast(seeds, args.tol)
    engines = [c for c in args.cases if c in ("stream", "dask")]
    if engines:
        rows += linear(seeds, args.tol, args.workdir, engines)
    if args.out is not None:
        args.out.write_text(json.dumps({"command": " ".join(sys.argv), "tol_rel_obj": args.tol,
                                        "rows": rows}, indent=1) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
