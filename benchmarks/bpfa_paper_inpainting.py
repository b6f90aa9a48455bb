"""BPFA inpainting and denoising at the paper's scale (Shah, Knowles & Ghahramani 2015, sec. 5.2).

A grayscale image (models/bpfa/data: camera or brick, 512 x 512; --size S takes the centre
S x S crop) is cut into overlapping 8 x 8 patches, stride 1 (N = (S - 7)^2 = 255,025 at 512);
task `inpaint`: 80% of the pixels hidden uniformly at random; task `denoise`: 50% hidden and the
rest corrupted by Gaussian noise of sd 15 (pixel values 0-255). The observed values are
standardised (the paper: mean 0, variance 1). Each method fits BPFA (K atoms, minibatches of
B = 250 patches) within a time budget; at checkpoints every patch's reconstruction is predicted
from the current global q (the local step run on every patch, not timed) and each pixel is the
average of the predictions of the patches covering it. PSNR = 20 log10(255 / RMSE) on the
whole image: for `inpaint` the observed pixels are kept and only hidden ones predicted (also
reported: the hidden pixels alone); for `denoise` every pixel is the model's prediction.

Methods: `gibbs-ssvi`, `mf-ssvi`, `mf-svi` and `gibbs` (the paper's algorithms written out for
BPFA in numpy: benchmarks/bpfa_gibbs.py); `ppl-gibbs`, `ppl-meanfield` (ppl's generic
`--method svi --local gibbs|meanfield`, when this ppl has it); baselines: scikit-image's
`inpaint_biharmonic` (on the observed pixels) and the mean of the observed pixels in the
surrounding 5 x 5 window.

    python benchmarks/bpfa_paper_inpainting.py --size 128 --K 64 --time-budget 60
    python benchmarks/bpfa_paper_inpainting.py --image brick --task denoise --json out.json

Results (JSON, PNGs of the reconstructions) go where --json and --png-dir say; docs/bpfa.md's
tables and plots are made from the JSON by benchmarks/bpfa_docs.py.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
ref = runpy.run_path(str(HERE / "bpfa_gibbs.py"), run_name="bpfa_gibbs")
png = runpy.run_path(str(ROOT / "models" / "bpfa" / "make_data.py"), run_name="make_data")
crop = runpy.run_path(str(HERE / "bpfa_inpainting.py"), run_name="bpfa_inpainting")
psnr, local_mean = crop["psnr"], crop["local_mean"]  # the 128 x 128 benchmark's, shared
SIDE = 8
TASKS = {"inpaint": (0.2, 0.0), "denoise": (0.5, 15.0)}  # (fraction observed, noise sd)
REFERENCE = {"gibbs-ssvi": "gibbs", "mf-ssvi": "mf-ssvi", "mf-svi": "mf-svi"}


def load_image(name: str, size: int) -> np.ndarray:
    """The centre size x size crop of models/bpfa/data/<name>.png, as floats 0-255."""
    image = np.array(png["read_gray_png"](ROOT / "models" / "bpfa" / "data" / f"{name}.png"))
    r0, c0 = (image.shape[0] - size) // 2, (image.shape[1] - size) // 2
    return image[r0 : r0 + size, c0 : c0 + size].astype(float)


def patch_index(height: int, width: int, stride: int = 1) -> np.ndarray:
    """(N, 64) flat positions of every 8 x 8 patch, top-left corners `stride` apart."""
    rows = np.arange(0, height - SIDE + 1, stride)
    cols = np.arange(0, width - SIDE + 1, stride)
    offsets = (np.arange(SIDE)[:, None] * width + np.arange(SIDE)[None, :]).ravel()
    corners = (rows[:, None] * width + cols[None, :]).ravel()
    return corners[:, None] + offsets[None, :]


def assemble(pred: np.ndarray, index: np.ndarray, shape: tuple) -> np.ndarray:
    """Each pixel the average of the predictions of the patches that cover it."""
    size = shape[0] * shape[1]
    total = np.bincount(index.ravel(), weights=pred.ravel(), minlength=size)
    count = np.bincount(index.ravel(), minlength=size)
    return (total / np.maximum(count, 1)).reshape(shape)


class Problem:
    """The corrupted image, its patches, and how a patch prediction becomes PSNR."""

    def __init__(self, image: np.ndarray, task: str, seed: int) -> None:
        observed, noise = TASKS[task]
        rng = np.random.default_rng(seed)
        self.image, self.task = image, task
        self.seen = rng.uniform(size=image.shape) < observed
        self.values = image + noise * rng.standard_normal(image.shape)
        self.offset = self.values[self.seen].mean()
        self.scale = self.values[self.seen].std()
        self.index = patch_index(*image.shape)
        self.M = self.seen.ravel()[self.index]
        self.Y = np.where(self.M, (self.values.ravel()[self.index] - self.offset) / self.scale, 0)

    def image_from(self, pixels: np.ndarray) -> np.ndarray:
        """The reconstruction shown and scored: observed pixels kept when inpainting."""
        pixels = np.clip(pixels, 0, 255)
        return np.where(self.seen, self.values, pixels) if self.task == "inpaint" else pixels

    def score(self, pixels: np.ndarray) -> dict:
        shown = self.image_from(pixels)
        hidden = ~self.seen
        return {
            "psnr": psnr(shown, self.image),
            "psnr_hidden": psnr(shown[hidden], self.image[hidden]),
        }

    def from_patches(self, pred: np.ndarray) -> np.ndarray:
        return assemble(pred * self.scale + self.offset, self.index, self.image.shape)


def baselines(problem: Problem) -> dict:
    """PSNR of the classical baselines, and their images."""
    out = {"local 5x5 mean": local_mean(problem.values, problem.seen)}
    try:
        from skimage.restoration import inpaint_biharmonic
    except ImportError:
        print("  scikit-image not installed (pip install -e '.[bench]'): no biharmonic baseline")
    else:
        start = time.perf_counter()
        scaled = np.where(problem.seen, problem.values, 0) / 255.0
        out["inpaint_biharmonic"] = 255.0 * inpaint_biharmonic(scaled, ~problem.seen)
        print(f"  inpaint_biharmonic: {time.perf_counter() - start:.1f} s")
    return out


def run_reference(problem: Problem, method: str, args, rng, curve: list) -> np.ndarray:
    """One of the numpy references, its PSNR recorded at checkpoints; the last prediction."""
    last = {}

    def monitor(label, seconds, iteration, pred):
        pixels = problem.from_patches(pred)
        row = {"seconds": seconds, "iteration": iteration, **problem.score(pixels)}
        curve.append(row)
        last["pixels"] = pixels
        print(
            f"    {label}: it {iteration:>6}  {seconds:8.1f} s  PSNR {row['psnr']:.2f} "
            f"(hidden {row['psnr_hidden']:.2f})",
            flush=True,
        )

    Y, M, K = problem.Y, problem.M, args.K
    if method == "gibbs":
        ref["gibbs_sampler"](
            Y,
            M,
            K,
            iterations=args.max_iter,
            burnin=args.gibbs_burnin,
            rng=rng,
            monitor=monitor,
            every=args.gibbs_every,
            time_budget=args.time_budget,
        )
        return last["pixels"]
    local = REFERENCE[method]
    start, offset = None, 0.0
    if args.init_rows:  # the paper's Table 1: globals from a short Gibbs run on a subset (timed)
        began = time.perf_counter()
        start = ref["gibbs_start"](Y, M, K, rows=args.init_rows, sweeps=args.init_sweeps,
                                   rng=rng, a=args.a, b=args.b)  # fmt: skip
        offset = time.perf_counter() - began
        print(
            f"    Gibbs start on {args.init_rows} rows x {args.init_sweeps} sweeps: {offset:.1f} s"
        )

    def shifted(label, seconds, iteration, pred):
        monitor(label, seconds + offset, iteration, pred)

    def predict(q, Zs, Ws):
        return ref["predict_rows"](
            Y, M, q, Zs, Ws, local="gibbs" if local == "gibbs" else "mf", rng=rng, chunk=args.chunk
        )

    ref["svi"](
        Y,
        M,
        K,
        local=local,
        batch=args.batch,
        iterations=args.max_iter,
        rng=rng,
        monitor=shifted,
        every=args.every,
        predict=predict,
        time_budget=args.time_budget - offset,
        kappa=args.kappa,
        tau0=args.tau,
        a=args.a,
        b=args.b,
        start=start,
        at_seconds=tuple(x - offset for x in args.at_seconds),
    )
    return last["pixels"]


def run_ppl(problem: Problem, method: str, args, curve: list) -> np.ndarray | None:
    """ppl's generic `svi` (local gibbs / meanfield; benchmarks/bpfa_ppl.py), refitted with
    growing iteration caps (each fit timed whole); None if this ppl has no `svi`."""
    bp = runpy.run_path(str(HERE / "bpfa_ppl.py"), run_name="bpfa_ppl")
    pixels = None
    for n in args.ppl_iterations:
        if args.a != args.b:
            raise SystemExit("ppl's rows take a = b (bpfa_ppl.fit_predict's `ab`)")
        out = bp["fit_predict"](problem.Y, problem.M, args.K, local=method.removeprefix("ppl-"),
                                batch=args.batch, iterations=n, seed=args.seed,
                                draws=args.ppl_draws, ab=args.a)  # fmt: skip
        if out is None:
            print(f"  {method}: this ppl has no `svi` method; skipped")
            return None
        pred, seconds, fit = out
        pixels = problem.from_patches(pred)
        row = {"seconds": seconds, "iteration": n, **problem.score(pixels)}
        final = getattr(fit.result.vi, "final_seconds", None)
        if final is not None:  # the local step on every row after training, inside `seconds`
            row["final_pass_seconds"] = final
        curve.append(row)
        print(f"    {method}: {n} iterations {seconds:.1f} s PSNR {row['psnr']:.2f}", flush=True)
        if seconds > args.time_budget:
            break
    return pixels


def save_png(path: Path, pixels: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.imsave(path, np.clip(pixels, 0, 255), cmap="gray", vmin=0, vmax=255)


def arguments(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="camera", choices=["camera", "brick"])
    ap.add_argument("--size", type=int, default=512, help="centre crop side (512: whole image)")
    ap.add_argument("--task", default="inpaint", choices=list(TASKS))
    ap.add_argument("--K", type=int, default=250, help="atoms (the paper: 250)")
    ap.add_argument("--batch", type=int, default=250, help="patches per minibatch (paper: 250)")
    ap.add_argument("--methods", nargs="+", default=["gibbs-ssvi", "mf-svi"])
    ap.add_argument("--time-budget", type=float, default=300.0, help="training s per method")
    ap.add_argument("--max-iter", type=int, default=10**7)
    ap.add_argument("--every", type=int, default=500, help="SVI iterations between PSNRs")
    ap.add_argument("--at-seconds", type=float, nargs="*", default=[], help="and at these s")
    ap.add_argument("--skip-baselines", action="store_true")
    ap.add_argument("--merge", nargs="+", help="only combine these result JSONs into --json")
    ap.add_argument("--gibbs-every", type=int, default=5)
    ap.add_argument("--gibbs-burnin", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=4000, help="rows per prediction chunk")
    ap.add_argument(
        "--a", type=float, default=1.0, help="pi ~ Beta(a / K, b (K - 1) / K); paper 10"
    )
    ap.add_argument("--b", type=float, default=1.0)
    ap.add_argument(
        "--init-rows", type=int, default=0, help="Gibbs start on this many rows (0: prior)"
    )
    ap.add_argument("--init-sweeps", type=int, default=30)
    ap.add_argument("--kappa", type=float, default=0.75)
    ap.add_argument("--tau", type=float, default=1.0)
    ap.add_argument("--ppl-iterations", type=int, nargs="+", default=[100, 300, 1000, 3000])
    ap.add_argument("--ppl-draws", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the results to this file")
    ap.add_argument("--png-dir", help="write the images (truth, corrupted, each method) here")
    return ap.parse_args(argv)


def merge(paths: list, out: str) -> int:
    """One result JSON from runs of the same problem (e.g. the methods run as parallel
    processes): the first file's settings, every file's results, and each run's arguments."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    merged = {**runs[0], "results": {}, "runs": [r["args"] for r in runs]}
    for r in runs:
        merged["results"].update(r["results"])
    Path(out).write_text(json.dumps(merged, indent=1) + "\n")
    return 0


def main(argv=None) -> int:
    args = arguments(argv)
    if args.merge:
        return merge(args.merge, args.json)
    problem = Problem(load_image(args.image, args.size), args.task, args.seed)
    N = len(problem.Y)
    print(
        f"{args.image} {args.size} x {args.size}, task {args.task}: {N} overlapping patches, "
        f"{problem.seen.mean():.1%} of pixels observed; K = {args.K}, B = {args.batch}"
    )
    images = {"truth": problem.image, "corrupted": np.where(problem.seen, problem.values, 0)}
    results = {}
    for name, pixels in ({} if args.skip_baselines else baselines(problem)).items():
        results[name] = {"final": problem.score(pixels), "curve": []}
        images[name] = problem.image_from(pixels)
        print(f"  {name}: PSNR {results[name]['final']['psnr']:.2f}")
    for method in args.methods:
        rng = np.random.default_rng(args.seed)
        curve: list = []
        print(f"  {method} ...", flush=True)
        if method.startswith("ppl-"):
            pixels = run_ppl(problem, method, args, curve)
        else:
            pixels = run_reference(problem, method, args, rng, curve)
        if pixels is None:
            continue
        last = curve[-1]
        results[method] = {
            "final": {k: last[k] for k in ("psnr", "psnr_hidden")},
            "curve": curve,
            "seconds_per_iteration": last["seconds"] / last["iteration"],
        }
        images[method] = problem.image_from(pixels)
    if args.png_dir:
        out = Path(args.png_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"bpfa_{args.image}{args.size}_{args.task}"
        for name, pixels in images.items():
            save_png(out / f"{stem}_{name.replace(' ', '_')}.png", pixels)
    print(f"\n{'method':<22}{'PSNR':>8}{'hidden':>8}{'s/iter':>9}{'train s':>9}")
    for name, r in results.items():
        spi = r.get("seconds_per_iteration")
        secs = r["curve"][-1]["seconds"] if r["curve"] else None
        print(
            f"{name:<22}{r['final']['psnr']:>8.2f}{r['final']['psnr_hidden']:>8.2f}"
            f"{'' if spi is None else f'{spi:9.3f}':>9}{'' if secs is None else f'{secs:9.0f}':>9}"
        )
    if args.json:
        meta = {"N": N, "observed": float(problem.seen.mean())}
        Path(args.json).write_text(
            json.dumps({"args": vars(args), **meta, "results": results}, indent=1) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
