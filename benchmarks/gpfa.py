"""Gamma process factor analysis on synthetic data: gamma SGVB vs all-Gaussian ADVI.

The synthetic experiment of Knowles (2015), "Stochastic gradient variational Bayes for gamma
approximating distributions", section 4.2 / Figure 4: D = 50 observed dimensions, K = 10 factors,
true loadings W[d, k] drawn from 0.8 delta_0 + 0.2 U[0, 1], factors x_n ~ N(0, I), noise variance
0.1, y_n = W x_n + noise, N in {100, 1000, 10000}. The model (models/gpfa/gpfa.model, eqs. 15-19,
truncation K = 10) is fitted with

- ``auto``: gamma SGVB, every positive latent (W, r, g, g0, c0, tau) gets a gamma family;
- ``advi``: mean-field Gaussian on the log scale for every latent (the paper's "NormSGVB"
  baseline, with ppl's log transform instead of the paper's softplus).

Reported per N and method: the Amari error of E_q[W] (the mean of the posterior draws) against the
true W, seconds per iteration (``result.vi.seconds / result.vi.iterations``; ppl's deterministic
L-BFGS polish is off unless ``--polish``, as the paper times plain stochastic iterations, and ADVI's
numerator includes Stan's step-size adaptation), total fit seconds, iterations, and the
time of one log-joint gradient at S = 10 draws (the per-iteration cost that should not depend on N
once the compiler uses the sufficient statistic Y'Y for ``y ~ multi_normal(0, Sigma)``).

Amari error (Amari, Cichocki & Yang 1996, "A new learning algorithm for blind signal separation",
NIPS 8, pp. 757-763; used for factor loadings by Knowles & Ghahramani 2011 and Knowles 2015): with
P = pinv(W_hat) W (K x K), which is a scaled permutation matrix exactly when W_hat equals W up to
permutation and scaling of its columns,

    E(P) = 1 / (2K(K-1)) * [ sum_i (sum_j |p_ij| / max_j |p_ij| - 1)
                            + sum_j (sum_i |p_ij| / max_i |p_ij| - 1) ],

which is 0 for a perfect recovery and at most 1. (Amari et al. give the unnormalised sum; the
1 / (2K(K-1)) factor maps it to [0, 1].)

    python benchmarks/gpfa.py                 # N = 100, 1000, 10000; natural model
    python benchmarks/gpfa.py --quick         # N = 100, 1000; fewer iterations
    python benchmarks/gpfa.py --model suffstat   # the hand-written Y'Y likelihood

The second GPFA data set of issue 31 (N = 200, D = 20, K = 5, seed 0; its `ppl fit ... --draws
10000 --seed 0` is tests/models/test_gpfa_peer_data.py) is written by

    python benchmarks/gpfa.py --write-data gpfa_seed0.json --sizes 200 --D 20 --K 5 --seed 0

``--model natural`` (default) fits models/gpfa/gpfa.model (``y ~ multi_normal(...)``), whose cost
per iteration depends on N unless the compiler collapses the rows to Y'Y; ``--model suffstat``
fits models/gpfa/gpfa_suffstat.model, the same density written with Y'Y by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {
    "natural": os.path.join(ROOT, "models", "gpfa", "gpfa.model"),
    "suffstat": os.path.join(ROOT, "models", "gpfa", "gpfa_suffstat.model"),
}


def amari_error(W_hat: np.ndarray, W: np.ndarray) -> float:
    """Normalised Amari error between two D x K loading matrices (0 = equal up to perm./scale)."""
    P = np.abs(np.linalg.pinv(W_hat) @ W)
    K = P.shape[0]
    rows = np.sum(np.sum(P, axis=1) / np.max(P, axis=1) - 1.0)
    cols = np.sum(np.sum(P, axis=0) / np.max(P, axis=0) - 1.0)
    return float((rows + cols) / (2.0 * K * (K - 1)))


def simulate(N: int, D: int = 50, K: int = 10, noise_var: float = 0.1, seed: int = 0):
    """Knowles (2015) section 4.2: W ~ 0.8 delta_0 + 0.2 U[0,1] elementwise, x_n ~ N(0, I)."""
    rng = np.random.default_rng(seed)
    W = np.where(rng.random((D, K)) < 0.2, rng.random((D, K)), 0.0)
    X = rng.standard_normal((N, K))
    Y = X @ W.T + np.sqrt(noise_var) * rng.standard_normal((N, D))
    return W, Y


def write_data(path: str, Y: np.ndarray, K: int) -> None:
    N, D = Y.shape
    with open(path, "w") as f:
        json.dump({"N": N, "D": D, "K": K, "y": Y.tolist()}, f)


def gradient_seconds(model, draws: int = 10, repeats: int = 3, seed: int = 0) -> float:
    """Wall time of one gradient of the summed log joint at `draws` unconstrained draws."""
    import autograd.numpy as anp
    from autograd import grad

    rng = np.random.default_rng(seed)
    Z = model.random_init(rng) + 0.1 * rng.standard_normal((draws, model.dim))
    g = grad(lambda z: anp.sum(model.log_joint(z)))
    g(Z)
    start = time.perf_counter()
    for _ in range(repeats):
        g(Z)
    return (time.perf_counter() - start) / repeats


def run(
    sizes,
    methods,
    model_name,
    iterations,
    seed,
    D=50,
    K=10,
    out=sys.stdout,
    grad_only=False,
    polish=False,
):
    from ppl.data.build import build
    from ppl.pipeline import fit

    rows = []
    tmp = tempfile.mkdtemp(prefix="gpfa_bench_")
    for N in sizes:
        W, Y = simulate(N, D, K, seed=seed)
        path = os.path.join(tmp, f"gpfa_N{N}.json")
        write_data(path, Y, K)
        model = build(MODELS[model_name], [path])
        g_sec = gradient_seconds(model, repeats=1 if N >= 10000 else 3)
        print(f"N={N}: one gradient at S=10 draws: {g_sec * 1000:.1f} ms", file=out, flush=True)
        if grad_only:
            rows.append({"N": N, "grad_ms": 1000 * g_sec})
            continue
        for method in methods:
            start = time.perf_counter()
            res = fit(
                model, method, iterations=iterations, seed=seed, draws=200,
                refine_draws=64 if polish else 0,
            )  # fmt: skip
            wall = time.perf_counter() - start
            W_hat = res.draws["W"].mean(axis=0)
            row = {
                "N": N,
                "method": method,
                "amari": amari_error(W_hat, W),
                "iterations": int(res.vi.iterations),
                "vi_seconds": float(res.vi.seconds),
                "sec_per_iter": float(res.vi.seconds) / max(int(res.vi.iterations), 1),
                "total_seconds": wall,
                "grad_ms": 1000 * g_sec,
                "converged": bool(res.vi.converged),
                "elbo": float(res.vi.elbo),
            }
            rows.append(row)
            print(
                f"  {method:5s} amari={row['amari']:.4f} iters={row['iterations']} "
                f"s/iter={row['sec_per_iter']:.4f} total={wall:.1f}s elbo={row['elbo']:.1f} "
                f"converged={row['converged']}",
                file=out,
                flush=True,
            )
    return rows


def print_table(rows, out=sys.stdout):
    fit_rows = [r for r in rows if "method" in r]
    if fit_rows:
        print(
            "\n| N | method | Amari error | iterations | s / iteration | total s | "
            "gradient ms (S=10) | converged |",
            file=out,
        )
        print("|---:|---|---:|---:|---:|---:|---:|---|", file=out)
        for r in fit_rows:
            name = "gamma SGVB (auto)" if r["method"] == "auto" else "Gaussian ADVI (advi)"
            print(
                f"| {r['N']} | {name} | {r['amari']:.4f} | {r['iterations']} | "
                f"{r['sec_per_iter']:.4f} | {r['total_seconds']:.1f} | {r['grad_ms']:.1f} | "
                f"{r['converged']} |",
                file=out,
            )
    grads = {}
    for r in rows:
        grads.setdefault(r["N"], r["grad_ms"])
    Ns = sorted(grads)
    if len(Ns) > 1:
        lo, hi = Ns[0], Ns[-1]
        print(f"\ngradient time ratio N={hi} / N={lo}: {grads[hi] / grads[lo]:.2f}x", file=out)
        for m in ("auto", "advi"):
            per = {r["N"]: r["sec_per_iter"] for r in fit_rows if r["method"] == m}
            if lo in per and hi in per:
                print(
                    f"s/iteration ratio N={hi} / N={lo} ({m}): {per[hi] / per[lo]:.2f}x", file=out
                )
        for N in Ns:
            am = {r["method"]: r["amari"] for r in fit_rows if r["N"] == N}
            if "auto" in am and "advi" in am:
                verdict = "lower" if am["auto"] < am["advi"] else "NOT lower"
                print(f"N={N}: gamma SGVB Amari error {verdict} than ADVI", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="N = 100, 1000 and at most 500 iterations")
    p.add_argument("--sizes", type=int, nargs="*", default=None)
    p.add_argument("--methods", nargs="*", default=["auto", "advi"])
    p.add_argument("--model", choices=sorted(MODELS), default="natural")
    p.add_argument(
        "--iter",
        type=int,
        default=None,
        help="maximum iterations (default 1000, the paper's count)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--polish", action="store_true",
        help="run ppl's deterministic L-BFGS polish after the stochastic stage (off by default: "
        "the paper times a fixed number of stochastic iterations)",
    )  # fmt: skip
    p.add_argument("--grad-only", action="store_true", help="only time the gradient per N")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    p.add_argument("--D", type=int, default=50, help="observed dimensions (the paper's 50)")
    p.add_argument("--K", type=int, default=10, help="factors and truncation level (10)")
    p.add_argument(
        "--write-data", metavar="PATH", default=None,
        help="only write the data set of the first --sizes N (default 200), --D, --K and --seed "
        "as ppl data JSON, and stop",
    )  # fmt: skip
    a = p.parse_args(argv)
    if a.write_data:
        _, Y = simulate((a.sizes or [200])[0], a.D, a.K, seed=a.seed)
        write_data(a.write_data, Y, a.K)
        print(f"wrote {a.write_data}: N={Y.shape[0]} D={a.D} K={a.K} seed={a.seed}")
        return
    sizes = a.sizes or ([100, 1000] if a.quick else [100, 1000, 10000])
    iterations = a.iter or (500 if a.quick else 1000)
    print(
        f"GPFA synthetic benchmark: model={a.model} sizes={sizes} methods={a.methods} "
        f"max iterations={iterations} seed={a.seed} polish={a.polish}",
        flush=True,
    )
    rows = run(
        sizes, a.methods, a.model, iterations, a.seed, a.D, a.K, grad_only=a.grad_only,
        polish=a.polish,
    )  # fmt: skip
    print_table(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
