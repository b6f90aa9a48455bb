"""The BPFA benchmarks' plumbing (overlapping patches and their reassembly, the corruption of
the image) and docs/bpfa.md's tables against the stored runs (benchmarks/bpfa_docs.py)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
inpaint = runpy.run_path(str(ROOT / "benchmarks" / "bpfa_paper_inpainting.py"), run_name="bench")
docs = runpy.run_path(str(ROOT / "benchmarks" / "bpfa_docs.py"), run_name="bpfa_docs")


def test_overlapping_patches_reassemble_the_image():
    rng = np.random.default_rng(0)
    image = rng.uniform(0, 255, size=(20, 24))
    index = inpaint["patch_index"](20, 24)
    assert index.shape == ((20 - 7) * (24 - 7), 64)  # the paper's N = (512 - 7)^2 at 512
    patches = image.ravel()[index]
    assert np.array_equal(patches[0].reshape(8, 8), image[:8, :8])
    assert np.array_equal(patches[-1].reshape(8, 8), image[-8:, -8:])
    np.testing.assert_allclose(inpaint["assemble"](patches, index, image.shape), image)
    # each pixel the average of its patches' predictions: patch n predicts n everywhere
    avg = inpaint["assemble"](np.repeat(np.arange(len(index))[:, None], 64, 1), index, (20, 24))
    corner_patches = [0, 1, 17, 18]  # the patches covering pixel (1, 1)
    assert avg[1, 1] == np.mean(corner_patches)


def test_the_tasks_corruption_and_scores():
    image = inpaint["load_image"]("camera", 64)
    for task, (observed, noise) in inpaint["TASKS"].items():
        p = inpaint["Problem"](image, task, seed=1)
        assert abs(p.seen.mean() - observed) < 0.03
        resid = (p.values - image)[p.seen]
        assert abs(resid.std() - noise) < 0.1 * noise + 1e-12
        assert np.allclose(p.Y[p.M] * p.scale + p.offset, p.values.ravel()[p.index][p.M])
        # off by 1 everywhere: inpainting keeps the observed pixels, denoising does not
        hidden = 1 - observed if task == "inpaint" else 1.0
        expected = 20 * np.log10(255 / np.sqrt(hidden))
        assert abs(p.score(image + 1.0)["psnr"] - expected) < 0.2
    assert inpaint["psnr"](image + 255 / 10, image) == 20.0


def test_docs_tables_are_the_stored_runs():
    assert docs["stale"]() == [], "python benchmarks/bpfa_docs.py rewrites them"


def test_the_ppl_prose_quotes_the_stored_camera256_run():
    # docs/bpfa.md's paragraph under the camera256_ppl table: PSNR and wall seconds at each cap
    root = Path(__file__).resolve().parents[2]
    run = json.loads((root / "benchmarks/results/bpfa_camera256_ppl.json").read_text())
    text = " ".join((root / "docs/bpfa.md").read_text().split())
    ppl_curve = run["results"]["ppl-gibbs"]["curve"]
    ref = {c["iteration"]: c for c in run["results"]["gibbs-ssvi"]["curve"]}
    at = {c["iteration"]: c for c in ppl_curve}
    a, b = at[100], at[500]
    said = (f"At 100 iterations ppl reached {a['psnr']:.2f} dB ({a['seconds']:.0f} s), at 500 "
            f"iterations {b['psnr']:.2f} dB ({b['seconds']:.0f} s); the reference "
            f"{ref[100]['psnr']:.2f} dB at 100 and {ref[500]['psnr']:.2f} dB at 500")  # fmt: skip
    assert said in text
