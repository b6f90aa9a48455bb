"""ppl's generic stochastic VI (`--method svi --local gibbs|meanfield`) on BPFA, for the
benchmarks bpfa_synthetic.py and bpfa_paper_inpainting.py: the per-patch model
models/bpfa/bpfa_patches.model fitted to (Y, mask), and E[(Z .* W) Phi] from its draws (or
from its per-row means of Z .* W when N x K is too large for draws)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "bpfa" / "bpfa_patches.model"


def available() -> bool:
    """Whether this ppl has the `svi` method."""
    from ppl.methods import METHODS

    return "svi" in METHODS


def fit_predict(Y: np.ndarray, M: np.ndarray, K: int, *, local: str, batch: int,
                iterations: int, seed: int, draws: int = 10, ab: float = 1.0,
                **options) -> tuple[np.ndarray, float, object] | None:  # fmt: skip
    """(E[(Z .* W) Phi] over the fit's draws, fit seconds, the Fit); None without `svi`.
    `ab`: the beta process's a = b. When the fit keeps its locals as per-row means (large
    N x K: ppl.inference.local_rows), E[Z .* W] at q's mean globals times Phi's mean."""
    if not available():
        return None
    import ppl

    N, P = Y.shape
    data = {"N": N, "P": P, "K": K, "Y": np.where(M, Y, 0.0), "mask": M.astype(float),
            "a": ab, "b": ab}  # fmt: skip
    model = ppl.Model.from_file(str(MODEL))
    start = time.perf_counter()
    fit = model.fit(data, method="svi", local=local, batch=batch, iterations=iterations,
                    seed=seed, draws=draws, quiet=True, **options)  # fmt: skip
    seconds = time.perf_counter() - start
    if getattr(fit.result.vi, "summarised", False):  # locals as per-row means (large N x K)
        Phi = np.asarray(fit.draws("Phi"), dtype=float).reshape(-1, K, P).mean(axis=0)
        return fit.local_means("Z .* W") @ Phi, seconds, fit
    Z = np.asarray(fit.draws("Z"), dtype=float).reshape(-1, N, K)
    W = np.asarray(fit.draws("W"), dtype=float).reshape(-1, N, K)
    Phi = np.asarray(fit.draws("Phi"), dtype=float).reshape(-1, K, P)
    pred = np.mean([(z * w) @ phi for z, w, phi in zip(Z, W, Phi, strict=True)], axis=0)
    return pred, seconds, fit
