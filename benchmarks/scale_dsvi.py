"""DSVI minibatches on large data: time to a good fit, rows per second and peak memory, in
memory, with --stream, and on a Dask cluster of 1 or 2 local workers (--engine dask).

    OPENBLAS_NUM_THREADS=1 python benchmarks/scale_dsvi.py [--sizes 1e4 1e5 1e6] [--batch 500]
        [--chunk-rows 20000] [--modes batch stream dask1 dask2] [--workdir /tmp/ppl-scale]

Logistic regression, D = 20 (models/logistic_regression/fixed_prior.model), N rows generated
from known weights and written to a CSV in --workdir (kept for reruns), plus 10000 held-out
rows. The full-data optimum is the held-out log-likelihood of the full-data MAP (Newton's
method). Every fit runs in a fresh process, as `ppl fit ... --method dsvi --batch 500 [--stream]`
would, so that its peak resident memory (ru_maxrss) is its own; it reports the seconds until q's
mean first gives a held-out log-likelihood within 1% of the optimum (checked at every ELBO
evaluation, i.e. every 100 iterations; the check's own time is not counted), the seconds to read
the data, and the whole fit under the default stopping rule. Peak memory is the process's VmHWM.
"rows/s" is the rows the gradients read per second of fitting: (adaptation + main-loop steps) x
rows per step / fit seconds. The Dask modes read the same rows from Parquet files (4 files, or
one per 10^6 rows) on a LocalCluster of 1 or 2 single-threaded worker processes, started by the
child process; their peak memory is the largest worker's VmHWM ("worker MiB"), the driver's is
"peak MiB". Requires `pip install '.[dask]'` for the Dask modes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = ROOT / "models" / "logistic_regression" / "fixed_prior.model"
D = 20
TEST_ROWS = 10_000


def true_weights() -> tuple[float, np.ndarray]:
    rng = np.random.default_rng(20)
    return 0.3, rng.normal(0.0, 0.5, D)


def rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    alpha, beta = true_weights()
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(alpha + X @ beta)))).astype(np.int64)
    return X, y


def write_csv(path: Path, n: int) -> None:
    """In blocks, so that even N = 10^6 does not need the whole text in memory."""
    header = ",".join([f"X.{j + 1}" for j in range(D)] + ["y"])
    tmp = path.with_suffix(".part")
    with open(tmp, "w") as f:
        f.write(header + "\n")
        for start in range(0, n, 100_000):
            X, y = rows(min(100_000, n - start), seed=start + 1)
            np.savetxt(f, np.column_stack([X, y]), fmt=["%.5f"] * D + ["%d"], delimiter=",")
    tmp.replace(path)


def write_parquet(folder: Path, n: int) -> None:
    """The CSV's rows (rounded to its 5 decimals) as Parquet files: 4, or one per 10^6 rows."""
    import pandas as pd

    files = max(4, n // 1_000_000)
    tmp = folder.with_suffix(".part")
    tmp.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, n, files + 1).astype(int)
    blocks = iter(range(0, n, 100_000))
    pending_X, pending_y = np.zeros((0, D)), np.zeros(0, np.int64)
    for i in range(files):
        want = bounds[i + 1] - bounds[i]
        while len(pending_y) < want:
            start = next(blocks)
            X, y = rows(min(100_000, n - start), seed=start + 1)
            pending_X = np.vstack([pending_X, np.round(X, 5)])
            pending_y = np.concatenate([pending_y, y])
        X, y = pending_X[:want], pending_y[:want]
        pending_X, pending_y = pending_X[want:], pending_y[want:]
        frame = pd.DataFrame({f"X.{j + 1}": X[:, j] for j in range(D)})
        frame["y"] = y
        frame.to_parquet(tmp / f"part-{i:03d}.parquet", index=False)
    tmp.rename(folder)


def read_back(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if path.is_dir():
        import pandas as pd

        frames = [pd.read_parquet(f) for f in sorted(path.glob("*.parquet"))]
        data = np.vstack([f.to_numpy(dtype=float) for f in frames])
    else:
        data = np.loadtxt(path, delimiter=",", skiprows=1)
    return data[:, :D], data[:, D].astype(np.int64)


def held_out_log_lik(alpha: float, beta: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    eta = alpha + X @ beta
    return float(np.sum(y * eta - np.logaddexp(0.0, eta)))


def laplace(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The full-data posterior mode under the model's priors (alpha ~ N(0, 5), beta ~ N(0, 1))
    and the sds of the Laplace approximation there (with N >= 10^4 rows and 21 coefficients
    the posterior is Gaussian to a good approximation: the reference for q's mean and sd)."""
    A = np.column_stack([np.ones(len(y)), X])
    prior_precision = np.r_[1 / 25.0, np.ones(D)]
    w = np.zeros(D + 1)
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(A @ w)))
        grad = A.T @ (y - p) - prior_precision * w
        hess = (A * (p * (1 - p))[:, None]).T @ A + np.diag(prior_precision)
        step = np.linalg.solve(hess, grad)
        w += step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w, np.sqrt(np.diag(np.linalg.inv(hess)))


def peak_mib() -> float:
    """This process's peak resident memory. VmHWM (Linux) counts only since exec; ru_maxrss also
    counts the parent's memory at fork, which would charge the parent's MAP fit to the child."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(args) -> None:
    with contextlib.ExitStack() as stack:  # the Dask modes' local cluster
        _child(args, stack)


def _child(args, stack) -> None:
    from ppl.data.build import build, build_streamed
    from ppl.methods.dsvi import elbo_sample_rows
    from ppl.pipeline import fit

    test = np.load(args.test)
    X_test, y_test = test["X"], test["y"]
    start = time.perf_counter()
    client = partitions = None
    if args.mode.startswith("dask"):
        from ppl.distributed.build import build_distributed
        from ppl.distributed.cluster import connect
        from ppl.distributed.gradient import rows_per_partition

        client = stack.enter_context(connect(workers=int(args.mode[4:])))
        model, partitions = build_distributed(
            str(MODEL), [str(Path(args.csv) / "*.parquet")], {}, args.seed, client,
            keep=elbo_sample_rows(args.batch),
        )  # fmt: skip
        stream = None
    elif args.mode == "stream":
        model, stream = build_streamed(
            str(MODEL), [args.csv], chunk_rows=args.chunk_rows, keep=elbo_sample_rows(args.batch)
        )
    else:
        model, stream = build(str(MODEL), [args.csv]), None
    load_seconds = time.perf_counter() - start
    offsets = {lat.name: lat.offset for lat in model.latents}
    trace, overhead = [], 0.0
    fit_start = time.perf_counter()

    def monitor(k, mean):
        nonlocal overhead
        t0 = time.perf_counter()
        beta = mean[offsets["beta"] : offsets["beta"] + D]
        ll = held_out_log_lik(mean[offsets["alpha"]], beta, X_test, y_test)
        trace.append((t0 - fit_start - overhead, k, ll))
        overhead += time.perf_counter() - t0

    batch = None if args.mode == "full" else args.batch
    result = fit(
        model, "dsvi", batch=batch, stream=stream, seed=args.seed, draws=100, monitor=monitor,
        tol_rel_obj=args.tol, partitions=partitions,
    )  # fmt: skip
    fit_seconds = time.perf_counter() - fit_start - overhead
    steps = result.vi.iterations + result.vi.adapt_iterations
    if partitions is not None:
        per_step = int(rows_per_partition(partitions.lengths, args.batch).sum())
        worker_peak = max(client.run(peak_mib).values())
    else:
        per_step = batch or int(model.data["N"])
        worker_peak = None
    mean = result.vi.mean
    final = held_out_log_lik(
        mean[offsets["alpha"]], mean[offsets["beta"] : offsets["beta"] + D], X_test, y_test
    )
    within = [(t, k) for t, k, ll in trace if abs(ll - args.optimum) <= 0.01 * abs(args.optimum)]
    peak = peak_mib()
    print(
        json.dumps(
            {
                "load_seconds": load_seconds,
                "seconds_to_1pct": within[0][0] if within else None,
                "iterations_to_1pct": within[0][1] if within else None,
                "fit_seconds": fit_seconds,
                "iterations": result.vi.iterations,
                "converged": result.vi.converged,
                "final_gap_pct": 100.0 * (args.optimum - final) / abs(args.optimum),
                "mean": [float(mean[offsets["alpha"]]), *mean[offsets["beta"] :][:D].tolist()],
                "sd": [
                    float(result.vi.sd[offsets["alpha"]]),
                    *result.vi.sd[offsets["beta"] :][:D].tolist(),
                ],  # fmt: skip
                "peak_mib": peak,
                "worker_peak_mib": worker_peak,
                "rows_per_second": steps * per_step / fit_seconds,
                "chunks": len(stream.chunks) if stream is not None else None,
            }
        )
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e4, 1e5, 1e6])
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--chunk-rows", type=int, default=20000)
    ap.add_argument("--modes", nargs="+", default=["batch", "stream"],
                    choices=["full", "batch", "stream", "dask1", "dask2"])  # fmt: skip
    ap.add_argument("--workdir", default="/tmp/ppl-scale")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tol", type=float, default=0.01, help="tol_rel_obj (default Stan's 0.01)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--csv", help=argparse.SUPPRESS)
    ap.add_argument("--test", help=argparse.SUPPRESS)
    ap.add_argument("--optimum", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    test_path = work / "test.npz"
    if not test_path.exists():
        X_test, y_test = rows(TEST_ROWS, seed=0)
        np.savez(test_path, X=X_test, y=y_test)
    test = np.load(test_path)
    print(f"logistic regression, D = {D}, --batch {args.batch}, --chunk-rows {args.chunk_rows}; "
          f"held-out log-likelihood on {TEST_ROWS} rows")  # fmt: skip
    header = (
        f"{'N':>9} {'mode':>7} {'MB file':>8} {'read s':>7} {'s to 1%':>8} {'its':>6} "
        f"{'fit s':>7} {'its':>6} {'gap %':>7} {'mean err':>8} {'sd ratio':>11} {'rows/s':>8} "
        f"{'peak MiB':>9} {'worker MiB':>10}"
    )
    print(header)
    print("-" * len(header))
    for n in (int(s) for s in args.sizes):
        csv, parquet = work / f"rows_{n}.csv", work / f"rows_{n}.parquet.d"
        if not csv.exists() and any(not m.startswith("dask") for m in args.modes):
            write_csv(csv, n)
        if not parquet.exists() and any(m.startswith("dask") for m in args.modes):
            write_parquet(parquet, n)
        cache = work / f"optimum_{n}.json"
        if not cache.exists():
            w, sd = laplace(*read_back(csv if csv.exists() else parquet))
            optimum = held_out_log_lik(w[0], w[1:], test["X"], test["y"])
            cache.write_text(json.dumps({"held_out_log_lik": optimum, "map": w.tolist(),
                                         "laplace_sd": sd.tolist()}))  # fmt: skip
        ref = json.loads(cache.read_text())
        optimum, w, sd = ref["held_out_log_lik"], np.array(ref["map"]), np.array(ref["laplace_sd"])
        for mode in args.modes:
            source = parquet if mode.startswith("dask") else csv
            size = sum(f.stat().st_size for f in source.glob("*")) if source.is_dir() else (
                source.stat().st_size)  # fmt: skip
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--mode", mode, "--csv", str(source),
                 "--test", str(test_path), "--optimum", repr(optimum), "--batch",
                 str(args.batch), "--chunk-rows", str(args.chunk_rows), "--seed", str(args.seed),
                 "--tol", repr(args.tol)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if out.returncode != 0:
                print(f"{n:>9} {mode:>7} failed: {out.stderr.strip().splitlines()[-1]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            mean_err = float(np.max(np.abs(np.array(r["mean"]) - w) / sd))
            q_sd = np.array(r["sd"]) / sd
            ratio = f"{q_sd.min():.2f}-{q_sd.max():.2f}"
            to1 = "never" if r["seconds_to_1pct"] is None else f"{r['seconds_to_1pct']:.2f}"
            its1 = "" if r["iterations_to_1pct"] is None else r["iterations_to_1pct"]
            worker = "" if r["worker_peak_mib"] is None else f"{r['worker_peak_mib']:.0f}"
            print(
                f"{n:>9} {mode:>7} {size / 2**20:>8.1f} {r['load_seconds']:>7.2f} "
                f"{to1:>8} {its1:>6} {r['fit_seconds']:>7.2f} {r['iterations']:>6} "
                f"{r['final_gap_pct']:>7.3f} {mean_err:>8.2f} {ratio:>11} "
                f"{r['rows_per_second']:>8.0f} {r['peak_mib']:>9.0f} {worker:>10}",
                flush=True,
            )
    print(
        "\noptimum: held-out log-likelihood at the full-data MAP; gap % = (optimum - held-out "
        "log-lik at q's mean) / |optimum|; mean err = max over coefficients of |q's mean - MAP| / "
        "Laplace sd; sd ratio = range of q's sd / Laplace sd; mode full = all rows every step; "
        "daskW = --engine dask on W local workers"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
