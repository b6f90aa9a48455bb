"""Guards against silent failure: a fit whose own numbers say it went wrong is never reported as
converged or usable (issue 23). Checked on every fit's result before it is printed or returned:

- an improper posterior (a parameter no statement of the model constrains, on an unbounded
  support) is refused before fitting: no fit can approximate it, and one that "converges" shows
  a mean of inf;
- draws of a parameter that are not finite (q ran off to infinity) end the fit with an error
  that says why;
- an ELBO that is astronomically low (the density under- or overflowed: posteriordb's arma11
  under ADVI ends at -2.5e59 with sds of 1e-14), that ended below its own start, or a q
  collapsed to a point, makes the fit "NOT converged", with a warning naming the reason.
"""

from __future__ import annotations

import numpy as np

from ppl.errors import FitError, ModelError
from ppl.ir.queries import unmentioned_parameters

#: An ELBO below this is no fit: e^(-10^15) is no probability a model of real data assigns.
ELBO_FLOOR = -1e15
#: Supports on which a flat density is a proper (uniform) distribution.
COMPACT = {"interval", "unit", "simplex", "unit_vector", "cholesky_factor_corr", "corr_matrix"}
#: A parameter whose draws spread less than this, relative to their size, has a collapsed q.
COLLAPSED = 1e-12
#: Draws of an element that differ by no more than this, relative to its size, are equal: what
#: a transform's arithmetic leaves (a corr_matrix's diagonal, 1 +- 1e-16).
ROUNDING = 16 * np.finfo(float).eps


def refuse_improper(model) -> None:
    """A parameter on an unbounded support that no statement of the transformed parameters or
    the model mentions has a flat, improper posterior (Stan would report divergences)."""
    unmentioned = unmentioned_parameters(model.ir)
    flat = [lat for lat in model.latents
            if lat.name in unmentioned and not lat.binary and not lat.hyper
            and lat.support not in COMPACT]  # fmt: skip
    if flat:
        names = ", ".join(f"'{lat.name}' (line {lat.decl.pos.line})" for lat in flat)
        raise ModelError(
            f"{model.program.filename}: improper posterior: parameter(s) {names} appear in no "
            "statement of the model or transformed parameters, so their posterior is flat over "
            "an unbounded range and has no mean to approximate; give each a prior"
        )


def check_result(result) -> None:
    """Errors for a fit that produced nothing usable; doubts (the fit kept, marked NOT
    converged, a warning each) for one whose own numbers contradict convergence."""
    vi = result.vi
    if not np.isfinite(vi.elbo):
        raise FitError("the final ELBO is not finite; the fit cannot be trusted")
    runaway = [lat.name for lat in result.model.latents
               if lat.name in result.draws and not lat.binary
               and not np.all(np.isfinite(result.draws[lat.name]))]  # fmt: skip
    if runaway:
        raise FitError(
            f"draws of {', '.join(runaway)} are infinite: q ran off to infinity, as it does when "
            "the posterior is improper (a flat prior the data do not pin down) or the model "
            "overflows; give those parameters proper priors"
        )
    doubts = _doubts(result)
    result.rule_met = vi.converged
    if doubts:
        vi.converged = False
        result.doubts = doubts
        result.warnings.extend(f"not converged: {d}" for d in doubts)


def _doubts(result) -> list[str]:
    vi = result.vi
    out = []
    if vi.elbo < ELBO_FLOOR:
        out.append(f"the ELBO is {vi.elbo:.3g}: q sits where the model's log density is "
                   "astronomically low (an overflow, or a parameter far out); the fit says "
                   "nothing about the posterior")  # fmt: skip
    trace = [e for _, e in getattr(vi, "elbo_trace", []) if np.isfinite(e)]
    if trace and vi.elbo < trace[0] - max(1.0, 1e-3 * abs(trace[0])):
        out.append(f"the ELBO ended at {vi.elbo:.6g}, below its start ({trace[0]:.6g})")
    collapsed = []
    for lat in result.model.latents:
        x = result.draws.get(lat.name)
        if x is None or lat.binary or lat.hyper or x.shape[0] < 2:
            continue
        x = np.asarray(x, dtype=float).reshape(x.shape[0], -1)
        sd, size = np.std(x, axis=0), 1.0 + np.abs(np.mean(x, axis=0))
        # an element constant by construction (a simplex's last, a correlation matrix's unit
        # diagonal, equal to 1 up to rounding) is no collapse
        varies = np.ptp(x, axis=0) > ROUNDING * size
        constant = not np.any(varies) and lat.support not in COMPACT
        if np.any((sd <= COLLAPSED * size) & varies) or constant:
            collapsed.append(lat.name)
    if collapsed:
        out.append(f"q collapsed to a point for {', '.join(collapsed)} (sd under "
                   f"{COLLAPSED:g} of the value): a degenerate fit, not a posterior")  # fmt: skip
    return out
