"""Bytes over the network per gradient step of --engine dask, measured on the loopback interface.

    OPENBLAS_NUM_THREADS=1 python benchmarks/dask_network.py [--sizes 1e5 1e7] [--workers 2]
        [--batch 500] [--steps 200] [--workdir /tmp/ppl-scale]

Logistic regression with D = 20 on the Parquet files that benchmarks/scale_dsvi.py writes (4 files,
or one per 10^6 rows; generated here when missing). A LocalCluster on 127.0.0.1 runs the steps,
so every byte between the driver, the scheduler and the workers goes over `lo`: the table gives
the bytes sent on `lo` per step (psutil's counters, which also count Dask's idle heartbeats, shown
per step as well), beside the payload, 8 S D bytes of draws per worker plus 8 S (D + 1) bytes per
partition back (docs/dask.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale_dsvi import MODEL, write_parquet  # noqa: E402


def loopback_sent() -> int:
    import psutil

    return psutil.net_io_counters(pernic=True)["lo"].bytes_sent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e5, 1e7])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--workdir", default="/tmp/ppl-scale")
    args = ap.parse_args(argv)

    from autograd import make_vjp

    from ppl.distributed.build import build_distributed
    from ppl.distributed.cluster import connect
    from ppl.distributed.gradient import DistributedLogJoint

    print(f"--engine dask, {args.workers} local workers, --batch {args.batch}, S = 10 draws")
    header = (f"{'N':>9} {'files':>5} {'D':>3} {'payload B':>9} {'sent B/step':>11} "
              f"{'idle B/step':>11} {'ms/step':>7}")  # fmt: skip
    print(header)
    print("-" * len(header))
    for n in (int(s) for s in args.sizes):
        folder = Path(args.workdir) / f"rows_{n}.parquet.d"
        if not folder.exists():
            folder.parent.mkdir(parents=True, exist_ok=True)
            write_parquet(folder, n)
        with connect(workers=args.workers) as client:
            model, parts = build_distributed(str(MODEL), [str(folder / "*.parquet")], {}, 1, client)
            gradient = DistributedLogJoint(parts, model, args.batch, seed=5)
            zeta = np.random.default_rng(0).standard_normal((10, model.dim))
            for _ in range(5):  # the template reaches every worker
                make_vjp(gradient)(zeta)
            time.sleep(1.0)
            before, start = loopback_sent(), time.perf_counter()
            for _ in range(args.steps):
                make_vjp(gradient)(zeta)
            seconds = time.perf_counter() - start
            sent = (loopback_sent() - before) / args.steps
            before = loopback_sent()
            time.sleep(2.0)
            idle = (loopback_sent() - before) / 2.0 * seconds / args.steps
            S, D, P = zeta.shape[0], model.dim, len(parts.files)
            payload = 8 * S * D * args.workers + 8 * S * (D + 1) * P
            print(f"{n:>9} {P:>5} {D:>3} {payload:>9} {sent:>11.0f} {idle:>11.0f} "
                  f"{1000 * seconds / args.steps:>7.1f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
