"""Small BPFA batches for the Gibbs road's tests (test_gibbs_quadratic, test_gibbs_probe)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppl.data.build import build
from ppl.inference.local_global import LocalGlobal, rows_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def bpfa(tmp_path):
    """bpfa(N, P, K, seed, seen_rate): models/bpfa/bpfa_patches.model on random pixels, a
    fraction seen_rate of them observed."""

    def make(N=12, P=4, K=3, seed=0, seen_rate=0.6):
        rng = np.random.default_rng(seed)
        Y = rng.normal(size=(N, P))
        seen = (rng.uniform(size=(N, P)) < seen_rate).astype(float)
        data = {"N": N, "P": P, "K": K, "Y": (Y * seen).tolist(), "mask": seen.tolist(),
                "a": 1.0, "b": 1.0}  # fmt: skip
        path = tmp_path / "bpfa.json"
        path.write_text(json.dumps(data))
        return build(str(ROOT / "models" / "bpfa" / "bpfa_patches.model"), [str(path)])

    return make


def batch_fitter(model, rng: np.random.Generator, gibbs_step: bool = True):
    """A LocalGlobal over batches of 5 rows, set up at a random start with random indicators;
    and that start, (1, D)."""
    fitter = LocalGlobal(model, rows_of(model, 5, rng), 1, rng, gibbs_step)
    state = model.random_init(rng)[None]
    for lat in model.latents:
        if lat.binary:
            state[:, lat.offset : lat.offset + lat.size] = rng.integers(0, 2, lat.size)
    fitter.setup(state)
    return fitter, state


@pytest.fixture
def fitter_at_start():
    return batch_fitter
