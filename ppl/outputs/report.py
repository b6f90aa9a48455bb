"""What a fit says about itself: the header lines the CLI prints above the summary table, and the
record written to fit.json. One place, so `ppl fit`, `fit.save()` and a notebook's `print(fit)`
say the same thing."""

from __future__ import annotations

from ppl.diagnostics.psis import USABLE
from ppl.outputs import record
from ppl.outputs.local_means import local_means_record
from ppl.outputs.summary import exact_text


def header_lines(result, *, iterations: int | None = None, rows: str = "") -> list[str]:
    """The lines above the summary table: method, ELBO, what ended the fit, PSIS, notes (from
    the fit's record, ppl.outputs.record, as fit.json's)."""
    vi = result.vi
    said = record.fit_record(result, iterations=iterations, rows=rows)
    lines = [f"method: {said['method_text']}, {vi.iterations} iterations, "
             f"{vi.grad_evals} gradient evaluations, {result.seconds:.2f} s"]  # fmt: skip
    polish = result.refinement or {}
    if polish.get("used"):
        stages = ", ".join(f"{st['family']} {st['iterations']} it" for st in polish["stages"])
        lines.append(f"polish: L-BFGS on a fixed-draw ELBO ({stages}); ELBO "
                     f"{polish['elbo_advi']:.6g} -> {polish['elbo_polished']:.6g}")  # fmt: skip
    elif polish:
        lines.append("polish: did not improve the fit; kept the unpolished one")
    on = ""
    if result.elbo_rows:
        on = f"; estimated on a fixed sample of {result.elbo_rows[0]} of {result.elbo_rows[1]} rows"
    if getattr(vi, "implicit_q", False):
        on += "; not a bound: log p - log q of a stand-in, q's Gibbs part has no density"
    lines.append(f"ELBO: {vi.elbo:.6g} ({'converged' if vi.converged else 'NOT converged'}{on})")
    lines.append(f"ended by: {said['ended_by']}")
    return lines


def diagnostics_lines(result) -> list[str]:
    """PSIS, the verdict (ppl.diagnostics.verdict) with its faults, and auto's notes."""
    diag = result.diagnostics
    mc = ""
    if diag.get("elbo") is not None:
        mc = f"; ELBO from these draws {diag['elbo']:.6g} +- {diag['elbo_mcse']:.2g} (MCSE)"
    threshold = diag.get("khat_threshold", USABLE)
    more = f", k-hat from {diag['khat_draws']} draws" if diag.get("khat_draws") else ""
    lines = [f"PSIS k-hat: {diag['khat']:.2f} (<= 0.5 good, <= {threshold:.2f} usable, above "
             f"not reliable; {diag['draws']} draws{more}{mc})"]  # fmt: skip
    if diag.get("khat_not_used"):
        lines[0] = f"PSIS k-hat: not used (q's Gibbs part has no density; {diag['draws']} draws)"
    said = record.fit_record(result)
    lines.append(f"verdict: {verdict_text(said)}")
    lines += [f"note: {note}" for note in said["notes"]]
    return lines


def verdict_text(said) -> str:
    """The verdict in one line: good | usable | not reliable, with the faults named (`said`: a
    fit's record, or a result)."""
    if not isinstance(said, dict):
        said = record.fit_record(said)
    named = "; ".join(f"{', '.join(f['parameters'])}: {f['how']}" for f in said["faults"])
    return f"{said['verdict']}" + (f" ({named})" if named else "")


PSIS_CORRECTED = (
    "summaries: PSIS-corrected (k-hat between 0.5 and the threshold, and the weighted means of "
    "the two halves of the draws agree; by default)"
)


def summaries_text(result, log_weights) -> str | None:
    """The "summaries:" lines: when they are importance-weighted, saying why; which are exact
    given q (a collapsed q's Rao-Blackwellised ones: ppl.outputs.summary.exact_text)."""
    lines = [exact_text(result, weighted=log_weights is not None)]
    if log_weights is not None and result.diagnostics.get("psis_summaries"):
        lines.insert(0, PSIS_CORRECTED)
    elif log_weights is not None:
        lines.insert(0, "summaries: importance-weighted (--psis)")
    lines = [line for line in lines if line]
    return "\n".join(lines) if lines else None


def psis_weights(result, wanted: bool):
    """The smoothed log weights for the summaries: asked for (--psis) when k-hat allows them,
    or by default where the verdict found them needed and stable; else None."""
    diag = result.diagnostics
    if diag.get("psis_summaries") and diag.get("log_weights") is not None:
        return diag["log_weights"]
    if not wanted:
        return None
    if diag["khat"] <= diag.get("khat_threshold", USABLE) and diag.get("log_weights") is not None:
        return diag["log_weights"]
    result.warnings.append(
        f"--psis: k-hat {diag['khat']:.2f} > {diag.get('khat_threshold', USABLE):.2f}, "
        "importance weights are not reliable; the summaries are q's own"
    )
    return None


def variational_parameters(result) -> dict:
    """Per latent, q's parameters on the unconstrained scale (gamma: shape and rate of x)."""
    return result.how.variational_parameters(result)


#: Per-draw arrays of the diagnostics that go to draws.csv, not to fit.json; and bookkeeping.
PER_DRAW = ("log_weights", "log_p", "log_q", "judged", "warned")


def fit_info(result, *, model: str, data: list[str], draws: int, engine: str = "embedded",
             weighted: bool = False, iterations: int | None = None) -> dict:  # fmt: skip
    """fit.json's record of the fit: what the fit did is the record the console reads
    (ppl.outputs.record)."""
    vi = result.vi
    said = record.fit_record(result, iterations=iterations)
    return {
        "model": model,
        "data": list(data),
        "method": said["method"],
        "method_text": said["method_text"],
        "kept": said["kept"],
        "ended_by": said["ended_by"],
        "iterations": vi.iterations,
        "seconds": round(result.seconds, 4),
        "gradient_evaluations": vi.grad_evals,
        "elbo": vi.elbo,
        "elbo_rows": result.elbo_rows,
        "psis": {k: v for k, v in result.diagnostics.items() if k not in PER_DRAW},
        "psis_weighted_summaries": weighted,
        "exact_summaries": exact_text(result, weighted=weighted),
        "verdict": said["verdict"],
        "faults": said["faults"],
        "advice": said["advice"],
        "notes": said["notes"],
        "converged": said["converged"],
        "seed": result.seed,
        "engine": engine,
        "eta": vi.eta,
        "grad_samples": vi.grad_samples,
        "draws": draws,
        "warnings": result.warnings,
        "families": said["families"],
        "polish": result.refinement,
        "variational_parameters": variational_parameters(result),
        "local_means": local_means_record(result),
    }
