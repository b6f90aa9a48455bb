"""The synthetic study of Shah, Knowles & Ghahramani (2015), sec. 5.1: BPFA data from its prior,
held-out predictive MSE and time per iteration for Gibbs-SSVI, MF-SSVI and a Gibbs sampler.

Data: the prior with K = 80 true atoms, D = 40, gamma_w = 1, gamma_obs = 100 and the paper's
a = b = 10 (pi_k ~ Beta(a / K, b (K - 1) / K): about one atom per row), N = 1e5 rows in the
paper (--N); 7.5% of the entries held out uniformly at random (the paper does not say entries or
rows; entries let every row's latents be inferred). Every method fits K = 150 atoms from a
random start on the rest, on the raw scale, with the same a, b and models/bpfa's priors on the
precisions (gamma_obs ~ Gamma(1, 0.01), gamma_w ~ Gamma(1, 1)). Held-out MSE = mean squared error
of E[(z_i .* w_i) Phi] at the held-out entries (the paper: Gibbs-SSVI 0.022 +- 0.002, MF-SSVI
0.027 +- 0.004, Gibbs sampler 0.020 +- 0.002; 1.5, 0.6 and 7.6 s per iteration). The noise alone
gives MSE 0.01.

Methods: `gibbs-ssvi`, `mf-ssvi`, `mf-svi`, `gibbs` (benchmarks/bpfa_gibbs.py: numpy, written
out for BPFA), `ppl-gibbs`, `ppl-meanfield` (ppl's generic `svi`, when this ppl has it).

    python benchmarks/bpfa_synthetic.py --N 10000 --time-budget 120 --json out.json
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ref = runpy.run_path(str(HERE / "bpfa_gibbs.py"), run_name="bpfa_gibbs")
LABEL = {"gibbs-ssvi": "gibbs", "mf-ssvi": "mf-ssvi", "mf-svi": "mf-svi"}


def make_data(N: int, D: int, K: int, seed: int, ab: float = 10.0, held: float = 0.075):
    """(Y, observed mask): prior data (a = b = `ab`) with `held` of the entries hidden."""
    rng = np.random.default_rng(seed)
    Y, *_ = ref["prior_draw"](N, D, K, rng, a=ab, b=ab, gamma_w=1.0, gamma_obs=100.0)
    return Y, rng.uniform(size=Y.shape) >= held


def run_method(method: str, Y, M, args, rng) -> dict:
    """One fit; its held-out MSE at checkpoints (training seconds only) and per iteration."""
    curve = []
    hidden = ~M

    def monitor(label, seconds, iteration, pred):
        mse = float(np.mean((pred - Y)[hidden] ** 2))
        curve.append({"seconds": seconds, "iteration": iteration, "mse": mse})
        print(
            f"    {label}: it {iteration:>6} {seconds:8.1f} s  held-out MSE {mse:.4f}", flush=True
        )

    if method == "gibbs":
        ref["gibbs_sampler"](Y, M, args.K, iterations=args.gibbs_iterations, rng=rng,
                             burnin=args.gibbs_burnin, a=args.ab, b=args.ab,
                             monitor=monitor, every=args.gibbs_every,
                             time_budget=args.time_budget)  # fmt: skip
    elif method.startswith("ppl-"):
        run_ppl(method, Y, M, args, monitor)
    else:
        local = LABEL[method]
        kind = "gibbs" if local == "gibbs" else "mf"

        def predict(q, Z, W):
            return ref["predict_rows"](Y, M, q, Z, W, rng=rng, burnin=3, samples=5, local=kind)

        ref["svi"](Y, M, args.K, local=local, batch=args.batch, iterations=args.max_iter, rng=rng,
                   a=args.ab, b=args.ab, monitor=monitor, every=args.every, predict=predict,
                   time_budget=args.time_budget)  # fmt: skip
    if not curve:
        return {}
    last = curve[-1]
    return {
        "mse": last["mse"],
        "seconds": last["seconds"],
        "iterations": last["iteration"],
        "seconds_per_iteration": last["seconds"] / last["iteration"],
        "curve": curve,
    }


def run_ppl(method: str, Y, M, args, monitor) -> None:
    """ppl's `svi` on the per-row BPFA model, refitted with growing iteration caps."""
    bp = runpy.run_path(str(HERE / "bpfa_ppl.py"), run_name="bpfa_ppl")
    for n in args.ppl_iterations:
        out = bp["fit_predict"](Y, M, args.K, local=method.removeprefix("ppl-"), batch=args.batch,
                                iterations=n, seed=args.seed, ab=args.ab)  # fmt: skip
        if out is None:
            print(f"    {method}: this ppl has no `svi` method or no per-row BPFA model; skipped")
            return
        pred, seconds, _ = out
        monitor(method, seconds, n, pred)
        if seconds > args.time_budget:
            return


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--N", type=int, default=100_000)
    ap.add_argument("--D", type=int, default=40)
    ap.add_argument("--K-true", type=int, default=80)
    ap.add_argument("--K", type=int, default=150)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--ab", type=float, default=10.0, help="beta-process a = b (paper: 10)")
    ap.add_argument("--methods", nargs="+", default=["gibbs-ssvi", "mf-ssvi", "gibbs"])
    ap.add_argument("--time-budget", type=float, default=300.0, help="training s per method")
    ap.add_argument("--max-iter", type=int, default=10**7)
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--gibbs-iterations", type=int, default=200)
    ap.add_argument("--gibbs-every", type=int, default=10)
    ap.add_argument("--gibbs-burnin", type=int, default=10, help="sweeps before averaging")
    ap.add_argument("--ppl-iterations", type=int, nargs="+", default=[100, 300, 1000, 3000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    runs = []
    for seed in args.seeds:
        args.seed = seed
        Y, M = make_data(args.N, args.D, args.K_true, seed, args.ab)
        print(
            f"seed {seed}: N = {args.N}, D = {args.D}, {args.K_true} true atoms, K = {args.K}; "
            f"{(~M).sum()} held-out entries; zero predictor MSE "
            f"{np.mean(Y[~M] ** 2):.4f}"
        )
        for method in args.methods:
            start = time.perf_counter()
            out = run_method(method, Y, M, args, np.random.default_rng(seed))
            if out:
                runs.append(
                    {"seed": seed, "method": method, **out, "wall": time.perf_counter() - start}
                )
    print(f"\n{'method':<16}{'held-out MSE':>16}{'s / iteration':>15}{'iterations':>12}")
    summary = {}
    for method in args.methods:
        mine = [r for r in runs if r["method"] == method]
        if not mine:
            continue
        mse = np.array([r["mse"] for r in mine])
        spi = float(np.mean([r["seconds_per_iteration"] for r in mine]))
        summary[method] = {
            "mse_mean": float(mse.mean()),
            "mse_sd": float(mse.std()),
            "seconds_per_iteration": spi,
            "runs": len(mine),
        }
        print(
            f"{method:<16}{mse.mean():>9.4f} +- {mse.std():.4f}{spi:>15.3f}"
            f"{int(np.mean([r['iterations'] for r in mine])):>12}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "summary": summary, "runs": runs}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
