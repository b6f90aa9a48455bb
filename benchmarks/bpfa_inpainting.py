"""BPFA image inpainting (Shah, Knowles & Ghahramani 2015, sec. 5.2): PSNR vs simple baselines.

A 128 x 128 crop of the `camera` photograph (models/bpfa/data/camera128.csv) is cut into 8 x 8
patches; 80% of the pixels are hidden uniformly at random (the paper's interpolation task), the
BPFA model (models/bpfa/bpfa.model) is fitted to the rest with `ppl`'s `auto` method (Bernoulli
atoms by score-function gradients, everything else pathwise), and each pixel is predicted by the
posterior mean of its patch's reconstruction (averaged over the patches that cover it).
PSNR = 20 log10(255 / RMSE), on the hidden pixels and on the whole image (observed pixels kept).
Baselines: the mean of the observed pixels everywhere (mean imputation), and the mean of the
observed pixels in the surrounding 5 x 5 window (local mean).

    python benchmarks/bpfa_inpainting.py [--K 32] [--stride 8] [--observed 0.2] [--iter 3000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

MODEL = ROOT / "models" / "bpfa" / "bpfa.model"
IMAGE = ROOT / "models" / "bpfa" / "data" / "camera128.csv"
SIDE = 8  # patch side


def patch_index(height: int, width: int, stride: int) -> np.ndarray:
    """(N, 64) flat image positions of every 8 x 8 patch, top-left corners `stride` apart."""
    rows = range(0, height - SIDE + 1, stride)
    cols = range(0, width - SIDE + 1, stride)
    offsets = (np.arange(SIDE)[:, None] * width + np.arange(SIDE)[None, :]).ravel()
    return np.array([r * width + c + offsets for r in rows for c in cols])


def psnr(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(20 * np.log10(255.0 / np.sqrt(np.mean((estimate - truth) ** 2))))


def local_mean(image: np.ndarray, seen: np.ndarray, radius: int = 2) -> np.ndarray:
    """Mean of the observed pixels in the (2 radius + 1)^2 window (global mean if none)."""
    pad_v = np.pad(np.where(seen, image, 0.0), radius)
    pad_n = np.pad(seen.astype(float), radius)
    h, w = image.shape
    total, count = np.zeros_like(image), np.zeros_like(image)
    for dr in range(2 * radius + 1):
        for dc in range(2 * radius + 1):
            total += pad_v[dr : dr + h, dc : dc + w]
            count += pad_n[dr : dr + h, dc : dc + w]
    fallback = image[seen].mean()
    return np.where(count > 0, total / np.maximum(count, 1), fallback)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, default=32, help="dictionary atoms (default 32)")
    ap.add_argument("--stride", type=int, default=8, help="patch stride (8: no overlap)")
    ap.add_argument("--observed", type=float, default=0.2, help="fraction of pixels seen")
    ap.add_argument("--iter", type=int, default=3000, help="maximum iterations")
    ap.add_argument("--grad-samples", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=100, help="posterior draws for the prediction")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    image = np.loadtxt(IMAGE, delimiter=",", skiprows=1)
    h, w = image.shape
    rng = np.random.default_rng(args.seed)
    seen = rng.uniform(size=image.shape) < args.observed
    index = patch_index(h, w, args.stride)  # (N, P)
    N, P = index.shape
    flat_seen = seen.ravel()[index]  # (N, P)
    offset = image[seen].mean()
    values = (image.ravel()[index] - offset) / 255.0
    n_idx, p_idx = np.nonzero(flat_seen)
    position = p_idx * N + n_idx  # column-major position in to_vector(Y)
    order = np.argsort(position)
    data = {
        "N": N, "P": P, "K": args.K, "M": len(order),
        "obs": (position[order] + 1).tolist(), "y": values[n_idx, p_idx][order].tolist(),
        "a": 1.0, "b": 1.0,
    }  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(data, f)
    model = build(str(MODEL), [f.name])
    Path(f.name).unlink()
    print(
        f"camera 128 x 128, {100 * args.observed:.0f}% of pixels observed; {N} patches of 8 x 8 "
        f"(stride {args.stride}), K = {args.K}; {model.dim} latent coordinates "
        f"({N * args.K} binary)"
    )
    start = time.perf_counter()
    result = fit(
        model, "auto", seed=args.seed, iterations=args.iter, draws=args.draws,
        grad_samples=args.grad_samples,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    mu = result.draws["mu"].mean(axis=0) * 255.0 + offset  # (N, P)
    total = np.zeros(h * w)
    count = np.zeros(h * w)
    np.add.at(total, index.ravel(), mu.ravel())
    np.add.at(count, index.ravel(), 1.0)
    covered = count > 0
    bpfa = np.where(covered, total / np.maximum(count, 1), offset).reshape(h, w)
    bpfa = np.clip(bpfa, 0, 255)
    estimates = {
        "mean imputation": np.full_like(image, offset),
        "local 5x5 mean": local_mean(image, seen),
        "BPFA (ppl auto)": bpfa,
    }
    hidden = ~seen
    print(
        f"fit: {result.vi.iterations} iterations, {seconds:.0f} s, ELBO {result.vi.elbo:.6g}, "
        f"{'converged' if result.vi.converged else 'NOT converged'}"
    )
    z = np.array(result.vi.family.describe(result.vi.theta)["Z"]["p"])
    print(f"atoms used per patch (sum of q(z = 1)): mean {z.reshape(args.K, N).sum(0).mean():.2f}")
    print()
    print(f"{'method':<18}{'PSNR hidden':>13}{'PSNR image':>12}")
    rows = {}
    for name, est in estimates.items():
        full = np.where(seen, image, est)
        rows[name] = (psnr(est[hidden], image[hidden]), psnr(full, image))
        print(f"{name:<18}{rows[name][0]:>12.2f} {rows[name][1]:>11.2f}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"args": vars(args), "seconds": seconds, "psnr": rows}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
