"""A fit's result: q's draws, constrained, with their PSIS check and the labels of q."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ppl.diagnostics.psis import check_fit
from ppl.families.choice import family_of
from ppl.inference.result import VIResult
from ppl.runtime.compiler import CompiledModel


@dataclass
class FitResult:
    model: CompiledModel
    method: str  # the fit's name (fit.json's "method"): its `how`'s fitted_as
    vi: VIResult
    draws: dict[str, np.ndarray]  # name -> (n_draws, *shape) constrained values
    seed: int
    seconds: float
    families: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    refinement: dict | None = None
    elbo_rows: tuple[int, int] | None = None  # (rows, of N) when the ELBO is on a sample of rows
    diagnostics: dict = field(default_factory=dict)  # PSIS k-hat and more (ppl.diagnostics.psis)
    notes: list[str] = field(default_factory=list)  # what `auto` decided, for the user
    description: str | None = None  # how q was made, when the method's name does not say
    doubts: list[str] = field(default_factory=list)  # why a fit is not converged
    # (ppl.diagnostics.trust)
    rule_met: bool | None = None  # the method's own verdict, before ppl.diagnostics.trust's doubts
    how: object = None  # the ppl.methods.base.Method that describes the fit (ppl.outputs.report)
    iteration_cap: int | None = None  # --iter of the fit (ppl.pipeline), for its "ended by"
    kept: str | None = None  # the candidate that beat the method's own fit (auto's), if one did


def checked_draws(vi, log_joint, rng, draws: int):
    """Draws of q on the unconstrained scale and their PSIS check against `log_joint`."""
    zeta = vi.sample(rng, draws)
    # what ended the fit is the record's (ppl.outputs.record), said by the method that made it
    return zeta, check_fit(log_joint, vi.log_q, zeta)


def make_result(model, vi, how, chosen, log_joint, rng, *, draws, seed, seconds,
                refinement=None, elbo_rows=None, checked=None) -> FitResult:  # fmt: skip
    """Draws from q, constrained; PSIS k-hat against `log_joint` (or `checked`, from
    checked_draws); labels by `how`'s family policy: the fit's result."""
    start = time.perf_counter()
    if getattr(vi, "summarised", False):  # locals kept as per-row means: globals drawn, no PSIS
        from ppl.inference.local_rows import summarised_draws

        zeta, diagnostics, values = summarised_draws(model, vi, rng, draws)
    else:
        zeta, diagnostics = checked or checked_draws(vi, log_joint, rng, draws)
        values = model.constrained_draws(zeta, rng)
    for name, arr in values.items():
        symbol = model.checked.symbols.get(name)
        declared_int = symbol is not None and symbol.stype.base == "int"
        if declared_int and arr.dtype.kind == "f" and np.isfinite(arr).all():
            values[name] = arr = arr.astype(np.int64)  # integers in the output, as declared
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            bad = int(np.sum(~np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)))
            vi.warnings.append(f"{bad} of {draws} draws of '{name}' are not finite")
    rejected = int(np.sum(np.isneginf(diagnostics["log_p"])))
    if rejected and model.last_rejection is not None:
        vi.warnings.append(
            f"{rejected} of {len(diagnostics['log_p'])} draws of q were rejected by reject() "
            f"(density zero there; a Gaussian q cannot keep out of a region the model "
            f'rejects), e.g. "{model.last_rejection.splitlines()[0][:300]}"'
        )
    labels = {lat.name: family_of(lat, how.families, chosen[lat.name]) for lat in model.latents}
    seconds += time.perf_counter() - start
    return FitResult(model, how.fitted_as, vi, values, seed, seconds, labels, list(vi.warnings),
                     refinement, elbo_rows, diagnostics, how=how)  # fmt: skip
