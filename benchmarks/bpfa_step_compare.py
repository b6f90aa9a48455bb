"""One global step of ppl's generic Gibbs-SSVI (ppl.inference.local_global) beside the numpy
reference's natural-gradient step (benchmarks/bpfa_gibbs.py) on BPFA: the same batch, the same
globals draw and the same local Gibbs draws. For each global, ppl's gradient and curvature in
its unconstrained coordinate against the exact ones that the reference's conjugate statistics
imply (log gamma_obs: gradient c_hat - g d_hat, curvature g d_hat; Phi: gradient
g (N/B) L'R - P Phi, curvature P + g (N/B) sum M L^2), and where each method's step puts q.

    python benchmarks/bpfa_step_compare.py --size 64 --K 32 --iterations 60
"""

from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--K", type=int, default=32)
    ap.add_argument("--batch", type=int, default=250)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--ab", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--init",
        nargs="*",
        default=[],
        help="globals set as the reference starts them: Phi gamma_obs gamma_w pi",
    )
    ap.add_argument("--coins", action="store_true", help="local binaries start as fair coins")
    args = ap.parse_args(argv)

    import ppl
    from ppl.inference import local_global as lg

    inp = runpy.run_path(str(HERE / "bpfa_paper_inpainting.py"), run_name="x")
    problem = inp["Problem"](inp["load_image"]("camera", args.size), "inpaint", args.seed)
    Y, M, K = problem.Y, problem.M.astype(float), args.K
    N, P = Y.shape
    data = {"N": N, "P": P, "K": K, "Y": Y, "mask": M, "a": args.ab, "b": args.ab}
    cm = ppl.Model.from_file(str(ROOT / "models/bpfa/bpfa_patches.model")).compile(data)
    rng = np.random.default_rng(args.seed)
    init = cm.random_init(rng)
    if args.init:
        from ppl.api_point import initial_point

        start = {"Phi": rng.normal(0, 1 / np.sqrt(P), (K, P)), "gamma_obs": 100.0,
                 "gamma_w": 1.0, "pi": np.full(K, 1.0 / K)}  # fmt: skip
        init = initial_point(cm, {k: start[k] for k in args.init}, rng)
    rows = lg.rows_of(cm, args.batch, rng)
    fitter = lg.LocalGlobal(cm, rows, 8, rng, True)
    S = fitter.chains
    state = lg._initial_state(cm, init, S, rng, set() if args.coins else rows.local)
    fitter.setup(state)
    q_cols = fitter.q_full()
    mean, precision = np.asarray(init, float)[q_cols], np.ones(len(q_cols))
    lat = {x.name: x for x in cm.latents}
    at = {int(c): i for i, c in enumerate(q_cols)}
    go = at[lat["gamma_obs"].offset]
    phi = [at[c] for c in range(lat["Phi"].offset, lat["Phi"].offset + lat["Phi"].size)]
    bl = {x.name: x for x in rows.batch_model.latents}
    scale = N / rows.B
    print(f"N = {N}, P = {P}, K = {K}, B = {rows.B}, N/B = {scale:.2f}; q over {len(q_cols)}")
    print(" t   rho   E[g_obs]  sd(log g)  | ppl grad / exact grad (log g) | ppl curv / exact"
          " | Phi: corr(grad), median curv ratio, frac curv<0")  # fmt: skip
    for t in range(1, args.iterations + 1):
        batch_rows = rows.draw_rows()
        rows.set_rows(batch_rows)
        cols = rows.columns
        X = state[:, cols].astype(float)
        sd = 1 / np.sqrt(precision)
        v = mean + rng.standard_normal((S, len(mean))) * sd
        X[:, fitter.q_batch] = v
        kept = [X.copy() for _ in fitter.local_step(X, 3, 3, rng)]
        g_mean, curvature, lp = fitter.global_signal(X, kept, v, sd, rng)
        state[:, cols] = X
        rho = lg.step_size(t, 1.0, 0.75)
        if t % args.every == 0 or t <= 3:
            # exact per-chain gradient/curvature from the reference's statistics, same draws
            Yb, Mb = Y[batch_rows], M[batch_rows]
            gr_g, cu_g, gr_phi, cu_phi = [], [], [], []
            for Xk in kept:
                for s in range(S):
                    g = float(np.exp(v[s, go]))
                    Ph = v[s, phi].reshape(K, P)
                    Z = Xk[s, bl["Z"].offset : bl["Z"].offset + bl["Z"].size].reshape(-1, K)
                    W = Xk[s, bl["W"].offset : bl["W"].offset + bl["W"].size].reshape(-1, K)
                    L = Z * W
                    R = Mb * (Yb - L @ Ph)
                    c_hat = 1.0 + scale * Mb.sum() / 2
                    d_hat = 0.01 + scale * np.sum(R**2) / 2
                    gr_g.append(c_hat - g * d_hat)
                    cu_g.append(g * d_hat)
                    gr_phi.append(scale * g * (L.T @ R) - P * Ph)
                    cu_phi.append(P + scale * g * ((L**2).T @ Mb))
            eg, ec = np.mean(gr_g), np.mean(cu_g)
            ephi, ecphi = np.mean(gr_phi, axis=0).ravel(), np.mean(cu_phi, axis=0).ravel()
            corr = np.corrcoef(g_mean[phi], ephi)[0, 1]
            ratio = np.median(curvature[phi] / ecphi)
            neg = np.mean(curvature[phi] <= 0)
            pis = 1 / (1 + np.exp(-mean[[at[c] for c in range(lat["pi"].offset,
                                                             lat["pi"].offset + K)]]))  # fmt: skip
            zs = np.mean([Xk[:, bl["Z"].offset : bl["Z"].offset + bl["Z"].size] for Xk in kept])
            print(f"     sum E[pi] {pis.sum():.2f}, atoms/row {zs * K:.2f}, mean |Phi| "
                  f"{np.abs(mean[phi]).mean():.3f}")  # fmt: skip
            print(f"{t:3d} {rho:.3f} {np.exp(mean[go] + 0.5 / precision[go]):9.3f} "
                  f"{sd[go]:9.4f}  | {g_mean[go]:10.1f} / {eg:10.1f} | {curvature[go]:9.1f} /"
                  f" {ec:9.1f} | {corr:.3f} {ratio:.3f} {neg:.3f}")  # fmt: skip
            # the reference's step on log g from the same statistics: Gamma(c, d) natural
            # parameters, q(gamma) ~ Gamma(c, d) with c = 1 + ..., matched at ppl's q
            newp = (1 - rho) * precision[go] + rho * max(curvature[go], 1e-3)
            step = rho * g_mean[go] / newp
            lim = 3 / np.sqrt(newp)
            print(f"     log g step {np.clip(step, -lim, lim):+.4f} (unclipped {step:+.4f},"
                  f" limit {lim:.4f}); conjugate target log(c/d) - mean ="
                  f" {np.log(c_hat / np.mean(cu_g) * g) - mean[go]:+.4f}")  # fmt: skip
        precision = (1 - rho) * precision + rho * np.maximum(curvature, 1e-3)
        step, limit = rho * g_mean / precision, 3.0 / np.sqrt(precision)
        mean = mean + np.clip(step, -limit, limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
