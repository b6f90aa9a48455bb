"""The `#` comment lines CmdStan writes around a variational fit's draws, for draws.csv: its
configuration (`# method = variational`, the algorithm, iter, grad_samples, ...) before the
column names, and the adapted step size after them. CmdStanPy's `from_csv` needs them to read
a Stan CSV file (it takes the method and the fit's settings from them); ArviZ's `from_cmdstan`
keeps them as configuration; pandas skips them with `comment="#"`; ppl's own reader
(ppl.outputs.stancsv) skips every `#` line.

The values are this fit's own: the algorithm is CmdStan's word for q's Gaussian (`fullrank` or
`meanfield`; `ppl_method` is fit.json's `method`, `ppl_method_text` how q was made), iter the
iteration cap, eta the step size (CmdStan's default 1 where the fit took no stochastic step, the
deterministic road: `ppl_eta = 0`), output_samples the rows below. Unlike CmdStan's file, no
first row holds q's mean: every row is a draw, so CmdStanPy, which takes the first row for the
mean, gets the first draw there and the others as its `variational_sample`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: ppl's ELBO evaluation period (Stan's eval_elbo): fixed, the stopping rule's window
EVAL_ELBO = 100
#: iterations per step size tried in the adaptation (Stan's adapt iter; ppl.inference.advi). Also
#: written when adaptation is off, as CmdStan writes it: CmdStanPy reads the last `iter =`
#: line as the fit's iter, so it must be positive
ADAPT_ITER = 50


def _model_name(model: str | None) -> str:
    """CmdStan's `model =`: the program's name, `<file stem>_model` as stanc names it."""
    stem = Path(model).stem if model and not model.startswith("<") else "model"
    return f"{stem}_model"


def config_lines(result, info: dict) -> list[str]:
    """The comment lines before draws.csv's header, in CmdStan's nesting (two spaces a level)."""
    vi = result.vi
    settings = getattr(result, "fit_settings", None) or {}
    cap = info.get("iteration_cap") or getattr(result, "iteration_cap", None) or vi.iterations
    draws = info.get("draws") or len(next(iter(result.draws.values()), []))
    data = info.get("data") or []
    lines = [
        f"model = {_model_name(info.get('model'))}",
        "method = variational",
        "  variational",
        f"    algorithm = {_algorithm(vi)}",
        f"    iter = {cap}",
        f"    grad_samples = {getattr(vi, 'grad_samples', 1) or 1}",
        f"    elbo_samples = {settings.get('elbo_samples', 100)}",
        f"    eta = {_eta(vi)}",
        "    adapt",
        f"      engaged = {1 if getattr(vi, 'adapt_iterations', 0) else 0}",
        f"      iter = {ADAPT_ITER}",
        f"    tol_rel_obj = {_tol_rel_obj(settings):g}",
        f"    eval_elbo = {EVAL_ELBO}",
        f"    output_samples = {draws}",
        "data",
        f"  file = {', '.join(str(d) for d in data)}",
        "random",
        f"  seed = {info.get('seed', result.seed)}",
        "output",
        "  file = draws.csv",
        f"ppl_method = {info.get('method') or result.method}",
        f"ppl_eta = {_step(vi):g}",
        "ppl_method_text = " + str(info.get("method_text") or result.method).replace("\n", " "),
    ]
    return ["# " + line for line in lines]


def _tol_rel_obj(settings: dict) -> float:
    """Stan's relative-ELBO tolerance when the fit stopped by it; CmdStan's default 0.01 where
    no such rule ran (the optimum rule or the deterministic road: `ppl_method_text` says which),
    since CmdStanPy reads the line as a number."""
    tol = settings.get("tol_rel_obj")
    return 0.01 if tol is None else float(tol)


def _algorithm(vi) -> str:
    """CmdStan's word for q's Gaussian: `fullrank` when its scale has an entry below the
    diagonal (the coordinates are correlated under q), else `meanfield`."""
    tril = getattr(vi, "scale_tril", None)
    full = tril is not None and np.ndim(tril) == 2 and np.any(np.tril(tril, -1) != 0)
    return "fullrank" if full else "meanfield"


def _eta(vi) -> str:
    """Stan's eta: the fit's step size; CmdStan's default 1 for a fit without a stochastic
    step (the deterministic road's eta is 0, which CmdStanPy refuses; ppl_eta says 0)."""
    return f"{_step(vi):g}" if _step(vi) > 0 else "1"


def _step(vi) -> float:
    """The fit's step size (0 for a q made without Stan's eta: SGVB's Adam, the road)."""
    eta = getattr(vi, "eta", 0.0)
    return float(eta) if eta is not None and np.isfinite(eta) else 0.0


def adaptation_lines(result) -> list[str]:
    """The lines after the header: CmdStan's `# Stepsize adaptation complete.` and the eta."""
    return ["# Stepsize adaptation complete.", f"# eta = {_eta(result.vi)}"]
