"""A fit's draws as CmdStanPy and ArviZ users take them: a DataFrame by element name
(`draws_pd`), the generated quantities run again on new data (`generate_quantities`, for
posterior predictive checks), and InferenceData with observed data, posterior predictive and
log-likelihood groups (`to_arviz`)."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from ppl.api_point import unconstrained
from ppl.errors import PplError
from ppl.outputs.summary import flatten_draws
from ppl.runtime.compiler import CompiledModel


def draws_frame(result, names: list[str] | None):
    """lp__, log_p__ and log_g__, then every scalar of `names` (all variables when None) by
    Stan's element name (`theta[1]`, `W[1,2]`), one row per draw; integers stay integers."""
    import pandas as pd

    chosen = list(result.draws) if names is None else names
    missing = [n for n in chosen if n not in result.draws]
    if missing:
        raise PplError(f"no variable {', '.join(repr(n) for n in missing)} in the fit; it has "
                       f"{', '.join(result.draws)}")  # fmt: skip
    n = len(next(iter(result.draws.values()), []))
    columns: dict[str, np.ndarray] = {}
    if names is None:
        diag = result.diagnostics
        columns["lp__"] = np.zeros(n)
        for col, key in (("log_p__", "log_p"), ("log_g__", "log_q")):
            v = diag.get(key)
            columns[col] = np.full(n, np.nan) if v is None or len(v) != n else np.asarray(v)
    for name in chosen:
        arr = np.asarray(result.draws[name])
        flat_names, matrix = flatten_draws({name: arr})
        for j, col in enumerate(flat_names):
            columns[col] = matrix[:, j].astype(arr.dtype) if arr.dtype.kind in "iub" \
                else matrix[:, j]  # fmt: skip
    return pd.DataFrame(columns)


def regenerated(result, compiled: CompiledModel, seed: int) -> dict[str, np.ndarray]:
    """Every variable of the fit's draws on `compiled` (the model on new data): the parameters
    as drawn, transformed parameters and generated quantities computed again."""
    if not compiled.program.generated_quantities:
        raise PplError("generate_quantities: the model has no generated quantities block")
    params = {lat.name: np.asarray(result.draws[lat.name]) for lat in compiled.latents}
    n = len(next(iter(params.values())))
    for lat in compiled.latents:
        if params[lat.name].shape[1:] != tuple(lat.shape):
            raise PplError(f"generate_quantities: '{lat.name}' has shape "
                           f"{params[lat.name].shape[1:]} in the fit but {tuple(lat.shape)} "
                           "with the new data; the data that size parameters must not "
                           "change")  # fmt: skip
    zeta = unconstrained(compiled, params, np.zeros((n, compiled.dim)), "generate_quantities")
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        values = compiled.constrained_draws(zeta, rng)
    for name, arr in values.items():
        symbol = compiled.checked.symbols.get(name)
        if symbol is not None and symbol.stype.base == "int" and arr.dtype.kind == "f" \
                and np.isfinite(arr).all():  # fmt: skip
            values[name] = arr.astype(np.int64)
    values.update(params)  # exactly the fit's draws, not their round trip
    return values


def with_draws(result, compiled: CompiledModel, draws: dict[str, np.ndarray]):
    """The fit's result on new data: its q and diagnostics, these draws."""
    return dataclasses.replace(result, model=compiled, draws=draws, warnings=list(result.warnings))


def _names(spec, what: str) -> list[str]:
    if spec is None or spec is False:
        return []
    if isinstance(spec, str):
        return [spec]
    try:
        return list(spec)
    except TypeError:
        raise PplError(f"to_arviz: {what} is a name or a list of names") from None


def arviz_groups(result, *, observed_data=None, posterior_predictive=None,
                 log_likelihood=None, constant_data=None) -> tuple[dict, dict]:  # fmt: skip
    """(the posterior's variables, the other groups as az.from_dict keywords).

    `posterior_predictive`: generated quantities moved from the posterior to that group, by
    name, or {observed name: generated name} to file them under the observed data's names
    (what az.plot_ppc pairs without data_pairs). `observed_data` and `constant_data`: a dict of
    values, or names of the data block's variables (taken from the fit's data).
    `log_likelihood`: the generated quantities of pointwise log-likelihoods (default: `log_lik`
    when the model has one)."""
    variables = {k: np.asarray(v) for k, v in result.draws.items()}
    pairs = (dict(posterior_predictive) if isinstance(posterior_predictive, dict)
             else {n: n for n in _names(posterior_predictive, "posterior_predictive")})  # fmt: skip
    loglik = (["log_lik"] if "log_lik" in variables else []) if log_likelihood is None \
        else _names(log_likelihood, "log_likelihood")  # fmt: skip
    for name in [*pairs.values(), *loglik]:
        if name not in variables:
            raise PplError(f"to_arviz: no variable '{name}' in the fit; it has "
                           f"{', '.join(variables)}")  # fmt: skip
    groups: dict = {}
    if pairs:
        groups["posterior_predictive"] = {obs: variables[gen][None] for obs, gen in pairs.items()}
    if loglik:
        groups["log_likelihood"] = {n: variables[n][None] for n in loglik}
    for key, spec in (("observed_data", observed_data), ("constant_data", constant_data)):
        if spec is None:
            continue
        values = spec if isinstance(spec, dict) else _data_values(result, _names(spec, key))
        groups[key] = {k: np.asarray(v) for k, v in values.items()}
    moved = set(pairs.values()) | set(loglik)
    posterior = {k: v for k, v in variables.items() if k not in moved}
    dims = {}
    for group in groups.values():
        for name, v in group.items():
            sampled = group is not groups.get("observed_data") and \
                group is not groups.get("constant_data")  # fmt: skip
            extra = v.ndim - (2 if sampled else 0)
            dims[name] = [f"{name}_dim_{i}" for i in range(extra)]
    return posterior, {**groups, "dims": dims}


def _data_values(result, names: list[str]) -> dict[str, np.ndarray]:
    data = result.model.data
    missing = [n for n in names if n not in data]
    if missing:
        raise PplError(f"to_arviz: {', '.join(repr(n) for n in missing)} not in the fit's data; "
                       f"it has {', '.join(data)}")  # fmt: skip
    return {n: np.asarray(data[n]) for n in names}
