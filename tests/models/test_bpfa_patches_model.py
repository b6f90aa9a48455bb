"""models/bpfa/bpfa_patches.model (one row per patch, a 0/1 mask) is bpfa.model (a flat list of
observed positions) written for minibatching: their log joints differ by a constant."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ppl.data.build import build

ROOT = Path(__file__).resolve().parent.parent.parent
BPFA = ROOT / "models" / "bpfa"


def test_row_model_has_the_flat_models_log_joint(tmp_path):
    rng = np.random.default_rng(0)
    N, P, K = 6, 4, 3
    Y, mask = rng.normal(size=(N, P)), rng.uniform(size=(N, P)) < 0.6
    n_idx, p_idx = np.nonzero(mask)
    pos = p_idx * N + n_idx  # column-major position in to_vector(Y)
    order = np.argsort(pos)
    (tmp_path / "rows.json").write_text(json.dumps(
        {"N": N, "P": P, "K": K, "Y": Y.tolist(), "mask": mask.astype(float).tolist(),
         "a": 1.0, "b": 1.0}))  # fmt: skip
    (tmp_path / "flat.json").write_text(json.dumps(
        {"N": N, "P": P, "K": K, "M": int(mask.sum()), "obs": (pos[order] + 1).tolist(),
         "y": Y[n_idx, p_idx][order].tolist(), "a": 1.0, "b": 1.0}))  # fmt: skip
    rows = build(str(BPFA / "bpfa_patches.model"), [str(tmp_path / "rows.json")])
    flat = build(str(BPFA / "bpfa.model"), [str(tmp_path / "flat.json")])
    (z_rows,) = [lat for lat in rows.latents if lat.name == "Z"]
    (z_flat,) = [lat for lat in flat.latents if lat.name == "Z"]
    assert rows.dim == flat.dim and z_rows.offset == z_flat.offset
    diffs = []
    for _ in range(3):
        zeta = rng.normal(size=rows.dim)
        Z = (rng.uniform(size=(N, K)) < 0.5).astype(float)
        zr, zf = zeta.copy(), zeta.copy()
        zr[z_rows.offset : z_rows.offset + N * K] = Z.ravel()  # array[N, K]: row-major
        zf[z_flat.offset : z_flat.offset + N * K] = Z.ravel(order="F")  # flat: column-major
        diffs.append(rows.log_joint(zr[None], binary=True)[0] - flat.log_joint(zf[None], True)[0])
    np.testing.assert_allclose(diffs, 0.5 * np.log(2 * np.pi) * mask.sum(), rtol=1e-10)
