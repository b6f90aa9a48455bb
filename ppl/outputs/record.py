"""The one record of what a fit did: the method, the q kept, the family of each parameter, how
the fit ended, the verdict and the advice. The console's header lines, fit.json and the Python
API's Fit read it, so none can say another thing (fit.json once said "iteration cap" where the
console said the fixed-draw optimum did not settle)."""

from __future__ import annotations

from ppl.diagnostics.verdict import advice


def ended_by(result, iterations: int | None = None) -> str:
    """What stopped the fit, as it happened; then, when ppl.diagnostics.trust found the result
    contradicts convergence, that it is not converged all the same. `iterations`: the
    iteration cap (default: the one the fit ran under)."""
    cap = iterations if iterations is not None else getattr(result, "iteration_cap", None)
    met = result.vi.converged if result.rule_met is None else result.rule_met
    text = result.how.ended_by(result, met, cap)
    if result.doubts:
        text += "; but NOT converged (see warnings)"
    return text


def kept(result) -> str | None:
    """The candidate that beat the method's own fit (auto's escalation: "full-rank Gaussian",
    "collapsed q", ...), or None when the method's own fit was kept."""
    return getattr(result, "kept", None)


def fit_record(result, *, iterations: int | None = None, rows: str = "") -> dict:
    """What the fit did, once: the console's lines, fit.json's fields and Fit's properties."""
    diag = result.diagnostics
    return {
        "method": result.method,
        "method_text": result.how.method_text(result, rows),
        "kept": kept(result),
        "families": dict(result.families),
        "ended_by": ended_by(result, iterations),
        "converged": bool(result.vi.converged),
        "verdict": diag.get("verdict"),
        "faults": list(diag.get("faults") or []),
        "advice": advice(result),
        "notes": list(result.notes),
    }
