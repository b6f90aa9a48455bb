"""Every row's local latents after a local/global fit (ppl.inference.local_global), and what the
fit keeps of them: draws, or per-row means when draws would not fit in memory.

*Why a final pass.* Under --batch a row's Gibbs state moves only when a minibatch visits it, so
after T iterations of B rows about exp(-T B / N) of the rows still hold their initial state (BPFA
on the 256 x 256 camera crop, 100 batches of 250 of 62,001 patches: 67 %). Their draws were not
the posterior given the globals, and predictions from them were noise (9.4 dB against the
reference's 24.8). So after training the local step is run on every row, B rows at a time (the
batch model's size), at q's mean globals: burn-in sweeps from the row's last state, then `samples`
sweeps whose per-row means are kept (E[z], E[w] and, for a binary latent and the slab it switches,
E[z * w]) -- as a checkpoint prediction of the numpy reference (benchmarks/bpfa_gibbs.py) does.

*Summaries instead of draws.* Draws of every local scalar cost rows x K x draws numbers (BPFA at
the paper's scale, N = 255,025 and K = 250: 64 million a draw). Beyond LOCAL_DRAW_VALUES values
(or with `local_draws="means"`) the fit keeps the per-row means only: the output draws hold the
global latents (their transformed parameters and generated quantities are not drawn, since they
may read the locals), and the means are `SVIResult.local_means`. Otherwise each draw gets its own
globals from q and one more sweep of every row given them (B rows at a time).
"""

from __future__ import annotations

import numpy as np

from ppl.inference import gibbs

#: Local values x draws beyond which the fit keeps per-row means, not draws, of local latents
#: (80 MB of float64 draws).
LOCAL_DRAW_VALUES = 10_000_000
#: Per-row means over this many values are kept as float32.
SINGLE_PRECISION = 50_000_000
#: Why PSIS is not run on such a fit (the verdict's reason).
NO_PSIS = ("PSIS k-hat was not computed: the local latents are kept as per-row means, not draws "
           "(and q's Gibbs part has no density to weigh them by)")  # fmt: skip


def pair_key(binary: str, slab: str) -> str:
    """The key of E[z * w] in local_means."""
    return f"{binary} .* {slab}"


def local_latents(fitter) -> list:
    """The batch model's local latents (rows as leading dimension), in layout order."""
    local = fitter.rows.local
    return [lat for lat in fitter.rows.batch_model.latents if lat.name in local and lat.size]


def _chunks(N: int, B: int):
    """Row blocks of exactly B rows covering 0..N-1 (the last one overlaps the one before),
    with the mask of the rows not covered by an earlier block."""
    for a in range(0, N, B):
        rows = np.arange(a, a + B) if a + B <= N else np.arange(N - B, N)
        yield rows, rows >= a


def _visit(fitter, state: np.ndarray, v: np.ndarray, sweeps: int, rng, keep: int = 0):
    """For each block of B rows: the state's local columns swept `sweeps` times given the
    globals v (q's coordinates), written back into `state` (1, D); yields (rows, new, X) after
    each of the last `keep` sweeps of a block."""
    rows = fitter.rows
    N = rows.N
    for idx, new in _chunks(N, rows.B):
        rows.set_rows(idx)
        cols = rows.columns
        X = state[:, cols].astype(float)
        X[:, fitter.q_batch] = v
        if not fitter.gibbs_step:
            fitter.mf_means = X.copy()
        for _ in fitter.local_step(X, sweeps - keep, keep, rng):
            yield idx, new, X
        state[:, cols] = X


def final_pass(fitter, result, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Every row's local step at q's mean globals (module docstring): `result.burnin` sweeps,
    then `result.samples` kept; the per-row means {latent: (N, per row), "z .* w": ...}; the
    rows' last states written into result.state."""
    lats = local_latents(fitter)
    if not lats or result.state.shape[0] != 1:
        return {}
    B, N = fitter.rows.B, fitter.rows.N
    binary = [lat for lat in lats if lat.binary]
    pairs = gibbs._partners(lats, binary, {lat.name for lat in lats})
    width = {lat.name: int(np.prod(lat.shape)) // B for lat in lats}
    total = N * (sum(width.values()) + sum(width[z] for z in pairs))
    dtype = np.float32 if total > SINGLE_PRECISION else float
    sums = {lat.name: np.zeros((N, width[lat.name]), dtype) for lat in lats}
    sums |= {pair_key(z, w): np.zeros((N, width[z]), dtype) for z, w in pairs.items()}
    at = {lat.name: lat for lat in lats}
    bm = fitter.rows.batch_model
    kept = max(result.samples, 1)
    for idx, new, X in _visit(fitter, result.state, result.mean, result.burnin + kept, rng, kept):
        # constrained (a `<lower=0>` local's mean is of the latent, not of its log)
        values = {n: x.reshape(B, -1)[new] for n, x in bm.parameter_values(X, list(at)).items()}
        for name, x in values.items():
            sums[name][idx[new]] += x
        for z, w in pairs.items():
            sums[pair_key(z, w)][idx[new]] += values[z] * values[w]
    for x in sums.values():
        x /= kept
    return sums


def local_draws(fitter, result, rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, D) draws with local latents: draw j's globals from q, and every row swept once more
    given them (B rows at a time, from the rows' last states)."""
    out = np.zeros((n, result.model.dim))
    for j in range(n):
        v = result.mean + rng.standard_normal(len(result.mean)) * result.sd
        for _ in _visit(fitter, result.state, v, 1, rng):
            pass
        out[j] = result.state[0]
        out[j, result.q_columns] = v
    return out


def summarise_locals(vi, draws: int, local_draws: str = "auto") -> bool:
    """Whether the fit keeps only per-row means of its local latents: `local_draws` "means",
    or "auto" when local values x draws exceed LOCAL_DRAW_VALUES ("all": never)."""
    if not getattr(vi, "local_means", None) or local_draws == "all":
        return False
    if local_draws == "means":
        return True
    size = sum(x.size for k, x in vi.local_means.items() if " .* " not in k)
    return size * draws > LOCAL_DRAW_VALUES


def summarised_text(local: list[str], dropped: list[str]) -> str:
    """The warning of a fit whose local latents are per-row means: what the outputs hold."""
    names = ", ".join(local)
    also = (f"; {', '.join(dropped)} (transformed parameters / generated quantities, which may "
            "read them) are not drawn either" if dropped else "")  # fmt: skip
    return (f"{names}: local latents kept as per-row means of the Gibbs draws at q's mean globals, "
            f"not as draws (--local-draws means, or auto beyond {LOCAL_DRAW_VALUES:,} values x "
            "draws); the summary and "
            f"draws.csv hold the global latents only{also}. In Python fit.local_means(name) has "
            "the means, `ppl fit --output DIR` writes them to local_means.csv; --local-draws all "
            "draws them")  # fmt: skip


def summarised_draws(model, vi, rng: np.random.Generator, n: int):
    """(zeta, diagnostics, values) of a fit whose locals are per-row means: n draws of the
    global latents only (q's Gaussian part; Gibbs-drawn globals at their last state),
    constrained on a one-row copy of the model, and no PSIS check (NO_PSIS)."""
    from ppl.inference.subsample import Batches

    one = Batches(model, 1, np.random.default_rng(0))
    one.set_rows(np.array([0]))
    bm = one.batch_model
    full = {int(c): i for i, c in enumerate(one.columns)}
    zeta = np.repeat(vi.state[:1, one.columns].astype(float), n, axis=0)
    q_at = np.array([full[int(c)] for c in vi.q_columns], dtype=int)
    zeta[:, q_at] = vi.mean + rng.standard_normal((n, len(vi.mean))) * vi.sd
    values = bm.constrained_draws(zeta, rng)
    local = one.local
    keep = {lat.name for lat in model.latents if lat.name not in local}
    dropped = [k for k in values if k not in keep and k not in local]
    values = {k: v for k, v in values.items() if k in keep}
    vi.warnings.append(summarised_text(sorted(local), dropped))
    nan = np.full(n, np.nan)
    diagnostics = {"draws": n, "nonfinite_draws": 0, "log_p": nan, "log_q": nan.copy(),
                   "khat": float("nan"), "verdict": "usable", "elbo": None, "elbo_mcse": None,
                   "log_weights": None, "psis_skipped": NO_PSIS}  # fmt: skip
    return zeta, diagnostics, values
