"""Variance of BBVI's gradient estimators on the Gamma-Normal factor model (Ranganath et al. 2014).

At a fixed variational parameter, draws R independent gradient estimates of S draws each and
reports, per estimator, the variance of every component across the R estimates: the plain score
function (eq. 3), Rao-Blackwellised with Markov blankets from the graph IR (eq. 6), and
Rao-Blackwellised with control variates (eq. 10). The three estimators use the same draws, so
the ratios are paired. The fixed parameter is where a short BBVI run (rb+cv) leaves q (as the
paper's Figure 2 tracks the variance along a run), and, with `--at-start`, ppl's starting q.

    python benchmarks/bbvi_variance.py [--factors 3] [--draws 100] [--reps 100] [--warmup 300]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.inference.bbvi import ESTIMATORS, fit_bbvi, setup_bbvi  # noqa: E402
from ppl.inference.estimators import score_gradient  # noqa: E402

MODEL = ROOT / "models" / "gamma_normal" / "gamma_normal.model"
DATA = ROOT / "models" / "gamma_normal" / "liver.json"
FAMILIES = {"W": "gaussian", "x": "gamma", "sigma": "gamma"}


def variances(family, terms, theta, draws: int, reps: int, seed: int):
    """Per estimator: (reps, P) gradient estimates from the same draws, and seconds per estimate."""
    rng = np.random.default_rng(seed)
    out = {e: [] for e in ESTIMATORS}
    seconds = dict.fromkeys(ESTIMATORS, 0.0)
    for _ in range(reps):
        zeta = family.rvs(theta, rng, draws)
        total, local = terms(zeta)
        for e in ESTIMATORS:
            start = time.perf_counter()
            out[e].append(score_gradient(family, theta, zeta, total, local, e))
            seconds[e] += time.perf_counter() - start
    return {e: np.array(v) for e, v in out.items()}, {e: s / reps for e, s in seconds.items()}


def table(family, estimates, title: str) -> str:
    """Median over components of the variance, per latent and overall, with the ratios."""
    var = {e: est.var(axis=0, ddof=1) for e, est in estimates.items()}
    groups = [("all", np.ones(family.size, dtype=bool))]
    for b in family.blocks:
        cols = (family.param_column >= b.offset) & (family.param_column < b.offset + b.size)
        groups.append((f"{b.name} ({b.family})", cols))
    head = (
        f"{'parameters of q':<22}{'n':>6}{'naive':>12}{'RB':>12}{'RB+CV':>12}"
        f"{'naive/RB':>11}{'RB/RB+CV':>11}{'naive/RB+CV':>13}"
    )
    lines = [title, head, "-" * len(head)]
    for name, cols in groups:
        med = {e: float(np.median(v[cols])) for e, v in var.items()}
        ratio = {  # median over components of the per-component ratio (paired)
            "n/rb": float(np.median(var["naive"][cols] / var["rb"][cols])),
            "rb/cv": float(np.median(var["rb"][cols] / var["rb+cv"][cols])),
            "n/cv": float(np.median(var["naive"][cols] / var["rb+cv"][cols])),
        }
        lines.append(
            f"{name:<22}{int(cols.sum()):>6}{med['naive']:>12.4g}{med['rb']:>12.4g}"
            f"{med['rb+cv']:>12.4g}{ratio['n/rb']:>10.4g}x{ratio['rb/cv']:>10.4g}x"
            f"{ratio['n/cv']:>12.4g}x"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--factors", type=int, default=3, help="latent factors L (default 3)")
    ap.add_argument("--draws", type=int, default=100, help="draws per gradient estimate S")
    ap.add_argument("--reps", type=int, default=100, help="independent estimates R")
    ap.add_argument("--warmup", type=int, default=300, help="BBVI iterations before measuring")
    ap.add_argument("--at-start", action="store_true", help="also measure at the starting q")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    model = build(str(MODEL), [str(DATA)], {"L": str(args.factors)})
    rng = np.random.default_rng(args.seed)
    init = model.random_init(rng)
    start = time.perf_counter()
    family, terms, theta0 = setup_bbvi(model, FAMILIES, init, rng)
    setup = time.perf_counter() - start
    sizes = terms.blankets.sizes_per_coordinate()
    print(
        f"Gamma-Normal factor model, liver labs: N = {model.data['N']}, J = {model.data['J']}, "
        f"L = {model.data['L']}; {model.dim} latent coordinates, {family.size} variational "
        f"parameters; S = {args.draws} draws per estimate, R = {args.reps} estimates"
    )
    print(
        f"Markov blankets (graph IR + element probe, {setup:.1f} s): median "
        f"{np.median(sizes):.0f} log-joint terms per coordinate (max {sizes.max():.0f}) of "
        f"{terms.blankets.matrix.shape[0]}"
    )
    points = []
    if args.at_start:
        points.append(("at ppl's starting q", theta0))
    start = time.perf_counter()
    warm = fit_bbvi(
        terms, family, init, theta0=theta0, max_iter=args.warmup, tol_rel_obj=1e-12,
        seed=args.seed,
    )  # fmt: skip
    points.append(
        (
            f"after {args.warmup} BBVI iterations (rb+cv; ELBO {warm.elbo:.6g}, "
            f"{time.perf_counter() - start:.1f} s)",
            warm.theta,
        )
    )
    for label, theta in points:
        estimates, seconds = variances(family, terms, theta, args.draws, args.reps, args.seed + 1)
        print()
        title = f"Variance of the gradient estimate per component, {label}:"
        print(table(family, estimates, title))
        print(
            "seconds per estimate (given the log-joint terms): "
            + ", ".join(f"{e} {s * 1000:.1f} ms" for e, s in seconds.items())
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
