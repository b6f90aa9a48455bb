"""Seconds per QuadraticPairs.prepare and per Gibbs-SSVI iteration on BPFA (bpfa_patches.model),
B = 250 rows of P = 64 pixels, 20% observed, random data (speed only).

    OPENBLAS_NUM_THREADS=1 python benchmarks/gibbs_speed.py --K 32 100 250 --iters 3 --exact
    (--exact: each K also with the K-point coefficients, the way before the probes)
    ... --camera --noise 1000    # the camera crop's patches, gamma_obs started at 1000
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np

from ppl.data.build import build
from ppl.inference.gibbs_quadratic import QuadraticPairs
from ppl.inference.local_global import LocalGlobal, rows_of, scaled_log_joint

ROOT = Path(__file__).resolve().parents[1]


def camera_patches(stride: int = 4) -> np.ndarray:
    """(N, 64) the 8 x 8 patches of the 128 x 128 camera crop, centred and over 255."""
    image = np.loadtxt(ROOT / "models" / "bpfa" / "data" / "camera128.csv", delimiter=",",
                       skiprows=1)  # fmt: skip
    starts = range(0, 128 - 8 + 1, stride)
    patches = [image[r : r + 8, c : c + 8].ravel() for r in starts for c in starts]
    return (np.array(patches) - image.mean()) / 255.0


def bpfa(K: int, N: int = 500, P: int = 64, seed: int = 0, camera: bool = False):
    rng = np.random.default_rng(seed)
    Y = camera_patches() if camera else rng.normal(size=(N, P))
    N = len(Y)
    seen = (rng.uniform(size=(N, P)) < 0.2).astype(float)
    Y = Y * seen
    data = {"N": N, "P": P, "K": K, "Y": Y.tolist(), "mask": seen.tolist(), "a": 1.0, "b": 1.0}
    path = Path(tempfile.mkdtemp()) / "bpfa.json"
    path.write_text(json.dumps(data))
    return build(str(ROOT / "models" / "bpfa" / "bpfa_patches.model"), [str(path)])


def run(K: int, iters: int, profile: bool, camera=False, noise=0.0, probe=True) -> dict:
    model = bpfa(K, camera=camera)
    QuadraticPairs.probe = probe
    rng = np.random.default_rng(1)
    fitter = LocalGlobal(model, rows_of(model, 250, rng), 1, rng, True)
    state = model.random_init(rng)[None]
    for lat in model.latents:
        if lat.name == "gamma_obs" and noise:  # a fitted noise precision (unconstrained: log)
            state[0, lat.offset] = np.log(noise)
    for lat in model.latents:
        if lat.binary:
            state[:, lat.offset : lat.offset + lat.size] = rng.integers(0, 2, lat.size)
    t0 = time.perf_counter()
    fitter.setup(state)
    setup = time.perf_counter() - t0
    assert fitter.fast, "incremental pairs not taken"
    pairs = fitter.fast[0]
    X = state[:, fitter.rows.columns].copy()
    t0 = time.perf_counter()
    if profile:
        cProfile.runctx("pairs.prepare(X[0])", globals(), locals(), "/tmp/gibbs_prepare.prof")
        pstats.Stats("/tmp/gibbs_prepare.prof").sort_stats("cumulative").print_stats(25)
    else:
        pairs.prepare(X[0])
    prep = time.perf_counter() - t0
    per_iter = []
    for _ in range(iters):  # one iteration's work: local step (3 + 3 sweeps) and 4 gradients
        t0 = time.perf_counter()
        fitter.rows.set_rows(fitter.rows.draw_rows())
        X = state[:, fitter.rows.columns].astype(float)
        v = X[:, fitter.q_batch]
        for _p in fitter.local_step(X, 3, 3, rng):
            fitter.gradient(X, v)
        fitter.gradient(X, v)
        scaled_log_joint(fitter.rows.batch_model, X, fitter.scales)
        state[:, fitter.rows.columns] = X
        per_iter.append(time.perf_counter() - t0)
    fallbacks = (getattr(pairs, "exact_curvatures", "-"), getattr(pairs, "exact_priors", "-"))
    return {
        "K": K,
        "setup": setup,
        "prepare": prep,
        "iteration": float(np.median(per_iter)),
        "rank": getattr(pairs, "rank", "-"),
        "fallbacks": fallbacks,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, nargs="+", default=[32, 100, 250])
    ap.add_argument("--iters", type=int, default=2)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--camera", action="store_true", help="camera crop patches (stride 4)")
    ap.add_argument("--noise", type=float, default=0.0, help="start gamma_obs here")
    ap.add_argument("--exact", action="store_true", help="also the K-point coefficients (before)")
    args = ap.parse_args()
    print("| K | coefficients | setup s | prepare s | s / iteration | rank | exact G, A |")
    for K in args.K:
        for probe in [False, True] if args.exact else [True]:
            r = run(K, args.iters, args.profile, args.camera, args.noise, probe)
            way = "probes" if probe else "K points"
            cells = [K, way, f"{r['setup']:.2f}", f"{r['prepare']:.2f}", f"{r['iteration']:.2f}"]
            cells += [r["rank"], f"{r['fallbacks'][0]}, {r['fallbacks'][1]}"]
            print("| " + " | ".join(map(str, cells)) + " |", flush=True)


if __name__ == "__main__":
    main()
