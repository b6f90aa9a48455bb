"""Fit every bundled example in models/ as its README says and time it (issue 31: each under 60 s).

Each example runs `ppl fit` in its own process (the command its README or models/README.md gives;
where the README gives two roads, both), so the wall time includes start-up and the peak memory
is that process's maximum resident set (os.wait4's ru_maxrss). Prints per example: wall seconds,
gradient evaluations, peak RSS, k-hat and the verdict (from the fit's fit.json), then totals.

    python benchmarks/examples.py [--only NAME ...] [--save DIR] [--compare DIR] [--timeout S]

--save DIR keeps each fit's summary.csv under DIR/NAME/; --compare DIR prints, per example, the
largest change of a mean (in the saved fit's sds) and the range of sd ratios against a saved run,
to check that a speed-up did not move the fit. The machine may be shared: the load average is
printed with the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
M = "models"
LIMIT_SECONDS = 60.0

# name -> (preparation command or None, the `ppl fit` arguments after "fit")
EXAMPLES: dict[str, tuple[list[str] | None, list[str]]] = {
    "eight_schools_noncentered": (
        None,
        [f"{M}/eight_schools/noncentered.model", f"{M}/eight_schools/eight_schools.json"],
    ),
    "eight_schools_centered": (
        None,
        [f"{M}/eight_schools/centered.model", f"{M}/eight_schools/eight_schools.json"],
    ),
    "linear_regression": (
        None,
        [f"{M}/linear_regression/linear_regression.model", f"{M}/linear_regression/boston.csv"],
    ),
    "linear_regression_vectorised": (
        [sys.executable, f"{M}/linear_regression/simulate.py", "{tmp}/rows.csv"],
        [f"{M}/linear_regression/vectorised.model", "{tmp}/rows.csv"],
    ),
    "pima": (
        None,
        [f"{M}/logistic_regression/pima.model", f"{M}/logistic_regression/pima_train.csv"],
    ),
    "breast_cancer": (
        None,
        [
            f"{M}/logistic_regression/breast_cancer/breast_cancer.model",
            f"{M}/logistic_regression/breast_cancer/breast_cancer.csv",
        ],
    ),
    "epilepsy": (None, [f"{M}/epilepsy/poisson_gamma.model", f"{M}/epilepsy/epil.json"]),
    "varying_intercepts": (
        None,
        [
            f"{M}/varying_intercepts/varying_intercepts.model",
            f"{M}/varying_intercepts/varying_intercepts.csv",
            f"{M}/varying_intercepts/sizes.json",
        ],
    ),
    "gpfa": (
        None,
        [f"{M}/gpfa/gpfa.model", f"{M}/gpfa/example.json", "--method", "auto", "--iter", "1000"],
    ),
    "gamma_normal": (
        None,
        [f"{M}/gamma_normal/gamma_normal.model", f"{M}/gamma_normal/liver.json"],
    ),
    "gamma_normal_bbvi": (
        None,
        [
            f"{M}/gamma_normal/gamma_normal.model",
            f"{M}/gamma_normal/liver.json",
            "--method",
            "bbvi",
        ],
    ),
    "spike_slab": (None, [f"{M}/spike_slab/spike_slab.model", f"{M}/spike_slab/boston13.csv"]),
    "gp_regression": (
        None,
        [f"{M}/gp_regression/gp_regression.model", f"{M}/gp_regression/boston_train.csv"],
    ),
    "gp_regression_dsvi": (
        None,
        [
            f"{M}/gp_regression/gp_regression.model",
            f"{M}/gp_regression/boston_train.csv",
            "--method",
            "dsvi",
            "--grad-samples",
            "2",
        ],
    ),
    "epm": (
        [
            sys.executable,
            f"{M}/epm/make_data.py",
            "les_miserables",
            "--K",
            "10",
            "--seed",
            "0",
            "--out",
            "{tmp}/les_miserables_k10.json",
        ],
        [
            f"{M}/epm/epm.model",
            "{tmp}/les_miserables_k10.json",
            "--method",
            "auto",
            "--iter",
            "1000",
        ],
    ),
}


def _fill(args: list[str], tmp: str) -> list[str]:
    return [a.replace("{tmp}", tmp) for a in args]


def run_one(name: str, tmp: str, save: Path | None, timeout: float) -> dict:
    """Run one example's fit in a child process; its wall time, peak RSS and fit.json's figures."""
    prep, fit_args = EXAMPLES[name]
    if prep is not None:
        subprocess.run(_fill(prep, tmp), cwd=ROOT, check=True, capture_output=True)
    out = (save / name) if save is not None else Path(tmp) / name
    cmd = [sys.executable, "-m", "ppl.cli", "fit", *_fill(fit_args, tmp), "--output", str(out)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    start = time.perf_counter()
    with open(Path(tmp) / f"{name}.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    row = {"name": name, "seconds": seconds, "peak_mb": usage.ru_maxrss / 1024.0}
    row["exit"] = proc.returncode
    if seconds >= timeout:
        row["verdict"] = f"KILLED after {timeout:.0f} s"
        return row
    fit_json = out / "fit.json"
    if row["exit"] == 0 and fit_json.exists():
        info = json.loads(fit_json.read_text())
        row["gradients"] = info.get("gradient_evaluations")
        row["khat"] = (info.get("psis") or {}).get("khat")
        row["verdict"] = info.get("verdict")
        row["converged"] = info.get("converged")
    else:
        tail = (Path(tmp) / f"{name}.log").read_text().strip().splitlines()[-3:]
        row["verdict"] = "FAILED: " + " | ".join(tail)
    return row


def read_summary(path: Path) -> dict[str, tuple[float, float]]:
    """name -> (mean, sd) from a fit's summary.csv."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    key = next(k for k in rows[0] if k.lower() in ("name", "parameter", "")) if rows else "name"
    return {r[key]: (float(r["mean"]), float(r["sd"])) for r in rows}


def compare(name: str, new_dir: Path, old_dir: Path) -> str:
    """Largest |mean change| in the old fit's sds and the range of new/old sd ratios."""
    old_p, new_p = old_dir / name / "summary.csv", new_dir / name / "summary.csv"
    if not (old_p.exists() and new_p.exists()):
        return "no saved summary"
    old, new = read_summary(old_p), read_summary(new_p)
    shifts, ratios = [], []
    for k, (m0, s0) in old.items():
        if k not in new or not s0 > 0:
            continue
        m1, s1 = new[k]
        shifts.append(abs(m1 - m0) / s0)
        ratios.append(s1 / s0)
    if not shifts:
        return "nothing to compare"
    return f"max |mean shift| {max(shifts):.3f} sd, sd ratio [{min(ratios):.3f}, {max(ratios):.3f}]"


#: NUTS references bundled with an example (mean and sd per parameter)
REFERENCES = {
    "epilepsy": f"{M}/epilepsy/poisson_gamma_nuts_reference.json",
    "gpfa": f"{M}/gpfa/gpfa_nuts_reference.json",
    "pima": f"{M}/logistic_regression/pima_nuts_reference.json",
    "varying_intercepts": f"{M}/varying_intercepts/nuts_reference.json",
}


def against_reference(name: str, fit_dir: Path) -> str | None:
    """Max and median |mean error| in NUTS sds and the sd-ratio range, where a reference exists."""
    path, summary = REFERENCES.get(name), fit_dir / name / "summary.csv"
    if path is None or not summary.exists():
        return None
    ref, fitted = json.loads((ROOT / path).read_text()), read_summary(summary)
    errs, ratios = [], []
    for k, m in ref["mean"].items():
        if k in fitted and ref["sd"].get(k, 0) > 0:
            errs.append(abs(fitted[k][0] - m) / ref["sd"][k])
            ratios.append(fitted[k][1] / ref["sd"][k])
    if not errs:
        return None
    errs.sort()
    return (f"vs NUTS: max |mean error| {errs[-1]:.2f} sd, median {errs[len(errs) // 2]:.2f}, "
            f"sd ratio [{min(ratios):.2f}, {max(ratios):.2f}]")  # fmt: skip


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(rows: list[dict]) -> None:
    head = (
        f"{'example':30s} {'seconds':>8s} {'gradients':>10s} {'peak MB':>8s} {'k-hat':>6s}  verdict"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        flag = " (over 60 s)" if r["seconds"] >= LIMIT_SECONDS else ""
        print(
            f"{r['name']:30s} {r['seconds']:8.1f} {_fmt(r.get('gradients'), '10,d')} "
            f"{r['peak_mb']:8.0f} {_fmt(r.get('khat'), '6.2f')}  {r.get('verdict')}{flag}"
        )
    total = sum(r["seconds"] for r in rows)
    grads = sum(r.get("gradients") or 0 for r in rows)
    over = [r["name"] for r in rows if r["seconds"] >= LIMIT_SECONDS or r["exit"] != 0]
    print("-" * len(head))
    print(f"{'total':30s} {total:8.1f} {grads:10,d} {max(r['peak_mb'] for r in rows):8.0f}")
    print(
        f"{len(rows) - len(over)}/{len(rows)} under {LIMIT_SECONDS:.0f} s"
        + (f"; over or failed: {', '.join(over)}" if over else "")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=list(EXAMPLES), help="run only these examples")
    ap.add_argument("--save", type=Path, help="keep each fit's outputs under DIR/NAME/")
    ap.add_argument("--compare", type=Path, help="compare means/sds with a run saved in DIR")
    ap.add_argument("--timeout", type=float, default=300.0, help="kill a fit after this many s")
    args = ap.parse_args()
    names = args.only or list(EXAMPLES)
    print("load average at start:", " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    rows = []
    save = args.save
    with tempfile.TemporaryDirectory() as tmp:
        if args.compare is not None and save is None:
            save = Path(tmp) / "fits"
        for name in names:
            row = run_one(name, tmp, save, args.timeout)
            if args.compare is not None:
                row["compare"] = compare(name, save, args.compare)
            reference = against_reference(name, save) if save is not None else None
            rows.append(row)
            print(
                f"  {name}: {row['seconds']:.1f} s, {row.get('gradients')} gradients"
                + (f"; vs saved: {row['compare']}" if "compare" in row else "")
                + (f"; {reference}" if reference else ""),
                flush=True,
            )
        print()
        print_table(rows)
    print("load average at end:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
