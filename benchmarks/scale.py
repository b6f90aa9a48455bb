"""Big data, every road: the default fit of a 21-parameter logistic regression at N rows, in
memory, with --stream and on Dask workers, against the exact Laplace posterior at the MAP.

    python benchmarks/scale.py [--rows 10000 100000 1000000] [--roads memory stream dask1 dask2]
                               [--dir /tmp/ppl-scale-road] [--save FILE.json]

Data: models/logistic_regression/simulate.py (seed 11; 10^7 rows take 3.3 GB of CSV), written
once per N as one CSV (memory, --stream) and 4 Parquet files (Dask). Each fit runs as its own
`ppl fit models/logistic_regression/fixed_prior.model ...` process; its wall time, its peak RSS
and that of the Dask workers (polled from /proc every 0.1 s) are measured. The reference is the
Laplace approximation at the MAP, found here by Newton's method on the same posterior with
numpy (at 10^4 rows and more its means and sds agree with NUTS to about 1%:
tests/data/test_big_data.py); max err is the largest |fitted mean - MAP| / Laplace sd over the 21
parameters, sd ratio the fitted sd / Laplace sd (min and max), both from q's own parameters in
fit.json (q is mean-field here: its sds are at most the Laplace marginal ones, by 0-8%, as
1 / sqrt(H_ii) against sqrt((H^-1)_ii)).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models" / "logistic_regression"))
from simulate import simulate, write_csv  # noqa: E402

MODEL = ROOT / "models" / "logistic_regression" / "fixed_prior.model"
PPL = [sys.executable, "-m", "ppl.cli"]
PARTS = 4


def laplace(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MAP and Laplace sds of alpha ~ N(0, 5), beta ~ N(0, 1), y ~ bernoulli_logit(alpha + X b)."""
    Z = np.column_stack([np.ones(len(y)), X])
    prior = np.r_[1 / 25.0, np.ones(X.shape[1])]
    w = np.zeros(Z.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-(Z @ w)))
        g = Z.T @ (y - p) - prior * w
        H = (Z * (p * (1 - p))[:, None]).T @ Z + np.diag(prior)
        step = np.linalg.solve(H, g)
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return w, np.sqrt(np.diag(np.linalg.inv(H)))


def make_data(rows: int, folder: Path) -> tuple[Path, Path]:
    """The CSV and the Parquet folder for N rows (written once), and the Laplace reference."""
    folder.mkdir(parents=True, exist_ok=True)
    csv_path, parts = folder / f"{rows}.csv", folder / f"{rows}-parts"
    ref_path = folder / f"{rows}-laplace.json"
    if not (csv_path.exists() and ref_path.exists()):
        X, y = simulate(rows, seed=11)
        write_csv(csv_path, X, y)
        if not parts.exists():
            import pandas as pd

            parts.mkdir()
            for i, rows_i in enumerate(np.array_split(np.arange(rows), PARTS)):
                columns = {f"X.{j + 1}": X[rows_i, j] for j in range(X.shape[1])}
                frame = pd.DataFrame({"y": y[rows_i], **columns})
                frame.to_parquet(parts / f"part-{i}.parquet", index=False)
        mean, sd = laplace(X, y)
        ref_path.write_text(json.dumps({"mean": mean.tolist(), "sd": sd.tolist()}))
    return csv_path, parts


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def peak_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(argv: list[str]) -> dict:
    """Run a fit; its wall time, its own peak RSS and the largest of its descendants'."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)  # fmt: skip
    workers: dict[int, int] = {}
    done = threading.Event()

    driver = [0]

    def poll():
        while not done.is_set():
            driver[0] = max(driver[0], peak_kb(proc.pid))  # VmHWM: reset by exec
            for child in descendants(proc.pid):
                workers[child] = max(workers.get(child, 0), peak_kb(child))
            done.wait(0.1)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    _, status, _ = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    done.set()
    poller.join()
    out, err = proc.stdout.read(), proc.stderr.read()
    if status != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{err[-2000:]}")
    method = next(line for line in out.splitlines() if line.startswith("method:"))
    passes = method.split(" passes")[0].rsplit(" ", 1)[-1] if " passes" in method else ""
    # polled, not wait4's ru_maxrss: that counts the pages the child shared with this process
    # between fork and exec (gigabytes here, after the Laplace fit of 10^7 rows)
    return {"wall": wall, "driver_mb": driver[0] / 1024,
            "workers_mb": max(workers.values(), default=0) / 1024, "passes": passes}  # fmt: skip


def compare(fit_json: Path, ref: dict) -> tuple[float, float, float]:
    """q's own means and sds (fit.json's variational parameters: no Monte Carlo error of the
    output draws) against the Laplace reference."""
    q = json.loads(fit_json.read_text())["variational_parameters"]
    mean = np.r_[q["alpha"]["mean"], q["beta"]["mean"]]
    sd = np.r_[q["alpha"]["sd"], q["beta"]["sd"]]
    ref_mean, ref_sd = np.array(ref["mean"]), np.array(ref["sd"])
    ratio = sd / ref_sd
    return float(np.max(np.abs(mean - ref_mean) / ref_sd)), float(ratio.min()), float(ratio.max())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--roads", nargs="+", default=["memory", "stream", "dask1", "dask2"],
                    choices=["memory", "stream", "dask1", "dask2"])  # fmt: skip
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()) / "ppl-scale-road")
    ap.add_argument("--save", type=Path, default=None, help="write the table as JSON")
    args = ap.parse_args()
    results = []
    print(f"{'rows':>9} {'road':<7} {'wall s':>7} {'driver MB':>9} {'workers MB':>10} "
          f"{'passes':>6} {'max err':>8} {'sd ratio':>13}")  # fmt: skip
    for n in args.rows:
        csv_path, parts = make_data(n, args.dir)
        ref = json.loads((args.dir / f"{n}-laplace.json").read_text())
        for road in args.roads:
            out = args.dir / f"{n}-{road}"
            argv = [*PPL, "fit", str(MODEL), "--quiet", "--output", str(out)]
            if road.startswith("dask"):
                argv += [str(parts / "part-*.parquet"), "--engine", "dask", "--workers", road[-1]]
            else:
                argv += [str(csv_path)] + (["--stream"] if road == "stream" else [])
            r = run(argv)
            err, low, high = compare(out / "fit.json", ref)
            r.update(rows=n, road=road, max_err=err, sd_ratio=[low, high])
            results.append(r)
            print(f"{n:>9} {road:<7} {r['wall']:>7.1f} {r['driver_mb']:>9.0f} "
                  f"{r['workers_mb'] if road.startswith('dask') else 0:>10.0f} {r['passes']:>6} "
                  f"{err:>8.3f} {low:>6.3f}-{high:.3f}", flush=True)  # fmt: skip
    if args.save:
        args.save.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
