"""Incremental pair updates (ppl.inference.gibbs_quadratic) on BPFA with per-row shapes: taken
by the road, and equal to the exact six-point conditionals for every atom."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ppl.data.build import build
from ppl.inference.local_global import LocalGlobal, rows_of

ROOT = Path(__file__).resolve().parents[2]


def _bpfa(tmp_path, N=12, P=4, K=3, seed=0):
    rng = np.random.default_rng(seed)
    Y = rng.normal(size=(N, P))
    seen = (rng.uniform(size=(N, P)) < 0.6).astype(float)
    path = tmp_path / "bpfa.json"
    data = {"N": N, "P": P, "K": K, "Y": (Y * seen).tolist(), "seen": seen.tolist(), "a": 1.0,
            "b": 1.0}  # fmt: skip
    path.write_text(json.dumps(data))
    return build(str(ROOT / "models" / "bpfa" / "bpfa_rows.model"), [str(path)])


def test_incremental_pairs_equal_the_exact_update(tmp_path):
    model = _bpfa(tmp_path)
    rng = np.random.default_rng(1)
    fitter = LocalGlobal(model, rows_of(model, 5, rng), 1, rng, True)
    state = model.random_init(rng)[None]
    for lat in model.latents:
        if lat.binary:
            state[:, lat.offset : lat.offset + lat.size] = rng.integers(0, 2, lat.size)
    fitter.setup(state)
    assert len(fitter.fast) == 1 and fitter.plan.local == []
    pairs = fitter.fast[0]
    X = state[:, fitter.rows.columns].copy()
    X[:, fitter.q_batch] += rng.normal(size=len(fitter.q_batch))  # other globals
    pairs.prepare(X[0])
    assert pairs.agrees(X, list(range(pairs.K)), rng)
    # after sweeps (a new state) they still agree
    list(pairs.sweeps(X, 2, rng))
    pairs.prepare(X[0])
    assert pairs.agrees(X, list(range(pairs.K)), rng)
