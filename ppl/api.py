"""The Python API: compile a model once, fit it to data given as numpy arrays, dicts, pandas
DataFrames or files, and read the result as arrays, a DataFrame or ArviZ InferenceData.

    model = ppl.Model.from_file("eight_schools.stan")       # or ppl.Model(code)
    fit = model.fit({"J": 8, "y": y, "sigma": sigma})        # same defaults as `ppl fit`
    fit.summary(); fit.draws("theta"); fit.to_arviz(); fit.save("out")

The `ppl fit` command is this module with argument parsing: the same defaults, the same numbers
for the same seed, the same messages (every user error raises ppl.PplError)."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ppl.api_draws import arviz_groups, draws_frame, regenerated, with_draws
from ppl.api_point import (
    OPTIMIZE_ITERATIONS,
    Optimum,
    initial_point,
    laplace_result,
    optimize,
    optimum_at,
)
from ppl.data.files import PythonValues, load_data, open_data_file
from ppl.data.specs import data_specs
from ppl.errors import PplError, PplWarning, UnreliableFitWarning
from ppl.language.frontend import load_model, model_from_text
from ppl.limits import ResourceLimit, interrupts_noted
from ppl.methods import DEFAULTS, FitResult
from ppl.outputs.files import write_outputs
from ppl.outputs.report import (
    PER_DRAW,
    diagnostics_lines,
    fit_info,
    header_lines,
    psis_weights,
    summaries_text,
)
from ppl.outputs.stancsv import read_draws
from ppl.outputs.summary import SUMMARY_HEADER, fit_summary, format_table
from ppl.pipeline import check_finite_result
from ppl.pipeline import fit as run_fit
from ppl.runtime.compiler import CompiledModel


def user_errors(method):
    """The API's contract on a public method: every user error a ppl.PplError (a model nested too
    deeply, a size no check foresaw), numpy's and autograd's warnings kept from the user (ppl's
    own, PplWarning, as the caller's filters say), and a Ctrl-C never lost
    (ppl.limits.interrupts_noted)."""

    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        try:
            with interrupts_noted(), warnings.catch_warnings():
                # numpy's overflow and invalid-value warnings, autograd's: not for the user;
                # ppl's own warnings (PplWarning) keep the caller's filters
                warnings.filterwarnings("ignore", category=RuntimeWarning)
                warnings.filterwarnings("ignore", message="Output seems independent of input")
                return method(*args, **kwargs)
        except RecursionError:
            from ppl.language.parser import TOO_DEEP

            where = getattr(args[0], "filename", None) if args else None
            if method.__name__ == "__init__":
                where = args[2] if len(args) > 2 else kwargs.get("filename", "<model>")
            elif method.__name__ == "from_file":
                where = str(args[1] if len(args) > 1 else kwargs.get("path"))
            raise PplError(f"{where}: {TOO_DEEP}" if where else TOO_DEEP) from None
        except MemoryError:
            raise ResourceLimit(
                "out of memory: the model, data or options need more memory than the machine "
                "has; reduce the sizes or draws"
            ) from None

    return wrapped


#: How the verdict's warning begins (ppl.diagnostics.verdict.unreliable_text): raised as an
#: UnreliableFitWarning, not again as a plain PplWarning.
UNRELIABLE = "the fit is not reliable:"


@contextlib.contextmanager
def _progress(progress, quiet: bool, options: dict):
    """The fit's progress callback: None (progress None or False, or quiet), the CLI's status
    lines on stderr (True), or the caller's callable (ppl.progress's protocol). CmdStanPy's
    name, show_progress, means the same."""
    if "show_progress" in options:
        shown = options.pop("show_progress")
        progress = shown if progress is None else progress
    if quiet or progress is None or progress is False:
        yield None
    elif progress is True:
        from ppl.progress import StatusLines

        lines = StatusLines(sys.stderr, sys.stderr.isatty())
        try:
            yield lines
        finally:
            lines.close()
    elif callable(progress):
        yield progress
    else:
        raise PplError(f"progress: True, False or a callable, not {type(progress).__name__}")


def _raise_warnings(result) -> None:
    """The fit's warnings as Python warnings, located at the caller's line (model.fit's, or
    laplace_sample's): the verdict's as UnreliableFitWarning, once per fit, the others as
    PplWarning."""
    diag = result.diagnostics
    for text in result.warnings:
        unreliable = text.startswith(UNRELIABLE)
        if not (unreliable and diag.get("warned")):
            # _raise_warnings, fitted and its wrapper, the public method and its wrapper
            warnings.warn(text, UnreliableFitWarning if unreliable else PplWarning,
                          stacklevel=6)  # fmt: skip
    diag["warned"] = True


def _sources(data) -> tuple[list[str], list]:
    """Labels (for fit.json and messages) and opened sources for load_data."""
    if data is None:
        return [], []
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    labels, opened = [], []
    for i, item in enumerate(items):
        if isinstance(item, (str, os.PathLike)):
            labels.append(str(item))
            opened.append(open_data_file(str(item)))
        elif hasattr(item, "columns") and hasattr(item, "iloc"):  # a pandas DataFrame
            label = "the DataFrame" if len(items) == 1 else f"data item {i + 1} (a DataFrame)"
            labels.append(label)
            opened.append(PythonValues.from_frame(item, label))
        elif isinstance(item, Mapping):
            label = "the data dict" if len(items) == 1 else f"data item {i + 1} (a dict)"
            labels.append(label)
            opened.append(PythonValues(label, item))
        else:
            raise PplError(
                f"data must be a dict, a pandas DataFrame, a file path or a list of these, "
                f"not {type(item).__name__}"
            )
    return labels, opened


class Model:
    """A checked model; compiled once, fitted to any number of datasets."""

    @user_errors
    def __init__(self, code: str, filename: str = "<model>", *,
                 include_paths: Sequence[str] | None = None) -> None:  # fmt: skip
        """`include_paths`: where `#include` looks after `filename`'s directory (the current
        one for "<model>")."""
        self.checked = model_from_text(code, filename, include_paths)
        self.filename = filename
        self._specs = data_specs(self.checked)

    @classmethod
    @user_errors
    def from_file(
        cls, path: str | os.PathLike, *, include_paths: Sequence[str] | None = None
    ) -> Model:
        model = cls.__new__(cls)
        model.checked = load_model(str(path), include_paths)
        model.filename = str(path)
        model._specs = data_specs(model.checked)
        return model

    def __repr__(self) -> str:
        data = ", ".join(s.name for s in self._specs) or "none"
        return f"ppl.Model({self.filename!r}; data: {data})"

    @user_errors
    def data(self, data=None, sets: dict[str, str] | None = None) -> dict[str, np.ndarray]:
        """The data block's values from `data`, checked as `ppl fit` checks its files."""
        labels, opened = _sources(data)
        return load_data(self._specs, labels, sets or {}, opened=opened)

    @user_errors
    def compile(self, data=None, *, sets: dict[str, str] | None = None,
                seed: int = DEFAULTS["seed"]) -> CompiledModel:  # fmt: skip
        """The log joint on `data` (transformed data run once with `seed`)."""
        return CompiledModel(self.checked, self.data(data, sets), seed)

    def _compiled(self, data, seed: int) -> tuple[list[str], CompiledModel]:
        labels, opened = _sources(data)
        values = load_data(self._specs, labels, {}, opened=opened)
        return labels, CompiledModel(self.checked, values, seed)

    @user_errors
    def fit(self, data=None, *, method: str = DEFAULTS["method"], seed: int = DEFAULTS["seed"],
            draws: int = DEFAULTS["draws"], iterations: int = DEFAULTS["iterations"],
            tol_rel_obj: float | None = DEFAULTS["tol_rel_obj"], psis: bool = False, inits=None,
            progress=None, quiet: bool = False, **options) -> Fit:  # fmt: skip
        """Fit the model to `data` (a dict of arrays/numbers/lists, a pandas DataFrame in the
        CSV convention, a path to a .csv/.json file, or a list of these). `inits`: the start, as
        CmdStanPy's (a dict of parameter values, a number x for uniform(-x, x) on the
        unconstrained scale, or a JSON file). `progress`: True shows the fit's phases on
        stderr (as `ppl fit`), or a callable (ppl.progress); `quiet`: no progress and no Python
        warnings (they stay in fit.warnings). `options` are the other `ppl fit` options by their
        Python names (eta, grad_samples, families, optimizer, estimator, batch, rank, dof,
        schedule, refine_draws, reparam)."""
        labels, compiled = self._compiled(data, seed)
        if inits is not None and options.get("reparam") == "noncentre":
            raise PplError("inits= with reparam='noncentre': the rewritten model's parameters "
                           "are not the ones the inits name")  # fmt: skip
        init = initial_point(compiled, inits, np.random.default_rng(seed))
        with _progress(progress, quiet, options) as shown:
            result = self.run(compiled, method=method, seed=seed, draws=draws,
                              iterations=iterations, tol_rel_obj=tol_rel_obj, init=init,
                              progress=shown, **options)  # fmt: skip
        return self.fitted(result, data=labels, iterations=iterations, psis=psis, quiet=quiet)

    @user_errors
    def optimize(self, data=None, *, jacobian: bool = False, inits=None,
                 seed: int = DEFAULTS["seed"], iterations: int = OPTIMIZE_ITERATIONS,
                 progress=None, quiet: bool = False) -> Optimum:  # fmt: skip
        """The mode by L-BFGS, as CmdStanPy's optimize: `jacobian=False` the mode of the
        model's density of the constrained parameters (penalised MLE / MAP), True the mode on
        the unconstrained scale with the transforms' log-Jacobians (what laplace_sample
        approximates). A ppl.api_point.Optimum: stan_variable(name), optimized_params_dict."""
        _, compiled = self._compiled(data, seed)
        with _progress(progress, quiet, {}) as shown:
            found = optimize(compiled, jacobian=jacobian, inits=inits, seed=seed,
                             iterations=iterations, progress=shown)  # fmt: skip
        if not found.converged and not quiet:
            warnings.warn(f"optimize: L-BFGS did not meet its tolerance in {found.iterations} "
                          "iterations; the mode may be off", PplWarning, stacklevel=3)  # fmt: skip
        return found

    @user_errors
    def laplace_sample(self, data=None, mode: Optimum | Mapping | None = None, *,
                       draws: int = DEFAULTS["draws"], jacobian: bool = True, inits=None,
                       seed: int = DEFAULTS["seed"], iterations: int = OPTIMIZE_ITERATIONS,
                       progress=None, quiet: bool = False) -> Fit:  # fmt: skip
        """Draws from N(mode, (-H)^-1) on the unconstrained scale, H the Hessian of the log
        density at the mode (CmdStanPy's laplace_sample): `mode` from optimize (with the same
        `jacobian`), a dict of parameter values, or None to optimize first. A Fit, judged by
        PSIS against the model as any fit; fit.mode is the Optimum."""
        started = time.perf_counter()
        labels, compiled = self._compiled(data, seed)
        supplied = mode is not None
        if isinstance(mode, Mapping):
            mode = optimum_at(compiled, dict(mode), jacobian=jacobian, seed=seed)
        elif mode is None:
            mode = self.optimize(data, jacobian=jacobian, inits=inits, seed=seed,
                                 iterations=iterations, progress=progress, quiet=quiet)  # fmt: skip
        elif not isinstance(mode, Optimum):
            raise PplError(f"laplace_sample: mode is optimize()'s result or a dict of parameter "
                           f"values, not {type(mode).__name__}")  # fmt: skip
        elif len(mode.unconstrained) != compiled.dim:
            raise PplError("laplace_sample: the mode has another number of parameters than the "
                           "model has with this data")  # fmt: skip
        result = laplace_result(compiled, mode, jacobian=jacobian, draws=draws, seed=seed,
                                supplied=supplied, started=started)  # fmt: skip
        fit = self.fitted(result, data=labels, iterations=iterations, quiet=quiet)
        fit.mode = mode
        return fit

    @user_errors
    def generate_quantities(self, data=None, previous_fit: Fit | None = None, *,
                            seed: int | None = None) -> Fit:  # fmt: skip
        """CmdStanPy's generate_quantities: the generated quantities (and transformed
        parameters) run again on `data` at every draw of `previous_fit`'s parameters, for
        posterior predictive checks on new data. A Fit with the same q and diagnostics."""
        if not isinstance(previous_fit, Fit):
            raise PplError("generate_quantities(data, previous_fit): previous_fit is a ppl.Fit")
        seed = previous_fit.result.seed if seed is None else seed
        labels, compiled = self._compiled(data, seed)
        values = regenerated(previous_fit.result, compiled, seed)
        return Fit(with_draws(previous_fit.result, compiled, values), model=self.filename,
                   data=labels, iterations=previous_fit.iterations)  # fmt: skip

    @user_errors
    def run(self, compiled: CompiledModel, *, method: str = DEFAULTS["method"],
            **options) -> FitResult:  # fmt: skip
        """The fit of `compiled` (this model on data: compile(); or on a sample of the rows,
        with the `stream` or Dask `partitions` that hold them all in `options`): the one fit of
        Model.fit and `ppl fit`. `options`: ppl.pipeline.fit's."""
        return run_fit(compiled, method, **options)

    @user_errors
    def fitted(self, result: FitResult, *, data: list[str], iterations: int = DEFAULTS[
            "iterations"], psis: bool = False, engine: str = "embedded",
               quiet: bool = False) -> Fit:  # fmt: skip
        """`result` checked (refused when it produced nothing usable, marked not converged when
        its numbers say so: ppl.diagnostics.trust) and wrapped for reading; its warnings raised
        as Python warnings (ppl.PplWarning; the verdict's UnreliableFitWarning) unless
        `quiet`, and kept in fit.warnings either way."""
        check_finite_result(result)
        if not quiet:
            _raise_warnings(result)
        return Fit(result, model=self.filename, data=data, iterations=iterations, psis=psis,
                   engine=engine)  # fmt: skip


class Fit:
    """A fitted q: its draws by Stan variable, summaries, diagnostics, and the CLI's files."""

    def __init__(self, result: FitResult, *, model: str, data: list[str], iterations: int,
                 psis: bool = False, engine: str = "embedded") -> None:  # fmt: skip
        self.result = result
        self.model_file, self.data_files = model, list(data)
        self.iterations, self.engine = iterations, engine
        self.log_weights = psis_weights(result, psis)
        self.mode: Optimum | None = None  # laplace_sample's: the mode it is centred on

    # ---- what the fit says about itself
    @property
    def method(self) -> str:
        return self.result.method

    @property
    def khat(self) -> float:
        """PSIS k-hat of q against the model (<= 0.5 good, <= 0.7 usable, > 0.7 not reliable)."""
        return float(self.result.diagnostics["khat"])

    @property
    def verdict(self) -> str:
        """good | usable | not reliable (ppl.diagnostics.verdict), as the console and fit.json."""
        return str(self.result.diagnostics.get("verdict"))

    @property
    def faults(self) -> list[dict]:
        """What makes the fit not reliable: {"parameters": [latent names], "how", "detail"}."""
        return [dict(f) for f in self.result.diagnostics.get("faults", [])]

    @property
    def elbo(self) -> float:
        return float(self.result.vi.elbo)

    @property
    def elbo_trace(self) -> np.ndarray:
        """(iteration, ELBO) rows, as elbo.csv."""
        return np.array(self.result.vi.elbo_trace, dtype=float).reshape(-1, 2)

    @property
    def converged(self) -> bool:
        return bool(self.result.vi.converged)

    @property
    def families(self) -> dict[str, str]:
        return dict(self.result.families)

    @property
    def warnings(self) -> list[str]:
        return list(self.result.warnings)

    @property
    def notes(self) -> list[str]:
        return list(self.result.notes)

    @property
    def diagnostics(self) -> dict:
        return {k: v for k, v in self.result.diagnostics.items() if k not in PER_DRAW}

    # ---- draws
    def stan_variables(self) -> dict[str, np.ndarray]:
        """Every parameter, transformed parameter and generated quantity: name -> array shaped
        (draws, *Stan shape)."""
        return {name: np.asarray(v) for name, v in self.result.draws.items()}

    def stan_variable(self, var: str) -> np.ndarray:
        """One Stan variable's draws, shaped (draws, *its Stan shape) (CmdStanPy's name)."""
        return self.draws(var)

    def draws_pd(self, vars: str | list[str] | None = None):  # noqa: A002 - CmdStanPy's name
        """A pandas DataFrame, one row per draw: lp__ (0), log_p__ and log_g__ (the model's and
        q's log densities on the unconstrained scale), then every scalar by Stan's element name
        (`theta[1]`, `W[1,2]`); with `vars` (a name or names), only their columns."""
        try:
            import pandas  # noqa: F401
        except ModuleNotFoundError:
            raise PplError("fit.draws_pd() needs pandas: pip install pandas") from None
        names = [vars] if isinstance(vars, str) else None if vars is None else list(vars)
        return draws_frame(self.result, names)

    def generate_quantities(self, data=None, *, seed: int | None = None) -> Fit:
        """model.generate_quantities(data, this fit): the generated quantities on new data."""
        model = Model.__new__(Model)
        model.checked, model.filename = self.result.model.checked, self.model_file
        model._specs = data_specs(model.checked)
        return model.generate_quantities(data, self, seed=seed)

    def draws(self, name: str) -> np.ndarray:
        """One Stan variable's draws, shaped (draws, *its Stan shape)."""
        if name not in self.result.draws:
            means = getattr(self.result.vi, "local_means", None) or {}
            if getattr(self.result.vi, "summarised", False) and name in means:
                raise PplError(
                    f"'{name}' is a local latent kept as per-row means, not draws (too many "
                    f"values: ppl.inference.local_rows); fit.local_means('{name}') has them, or "
                    "refit with local_draws='all' (--local-draws all) to draw it"
                )
            known = ", ".join(self.result.draws)
            raise PplError(f"no variable '{name}' in the fit; it has {known}")
        return np.asarray(self.result.draws[name])

    def local_means(self, name: str) -> np.ndarray:
        """A local latent's per-row means over the Gibbs draws at q's mean globals (--method
        svi; `"Z .* W"` for E[Z * W] of a binary latent and its slab), shaped (rows, per row)."""
        means = getattr(self.result.vi, "local_means", None) or {}
        if name not in means:
            raise PplError(f"no local means of '{name}'; the fit has {', '.join(means) or 'none'}")
        return np.asarray(means[name])

    def summary(self):
        """A pandas DataFrame indexed by Stan's element names (`theta[1]`), with the CLI's
        columns: mean, mcse, sd, q5, q50, q95 (importance-weighted when fitted with psis=True
        and k-hat allowed it, or by default where the verdict made them PSIS-corrected)."""
        try:
            import pandas as pd
        except ModuleNotFoundError:
            raise PplError("fit.summary() needs pandas: pip install pandas") from None
        rows = fit_summary(self.result, self.log_weights)
        frame = pd.DataFrame([r[1:] for r in rows], columns=SUMMARY_HEADER[1:],
                             index=[r[0] for r in rows])  # fmt: skip
        frame.index.name = SUMMARY_HEADER[0]
        return frame

    def to_arviz(self, *, observed_data=None, posterior_predictive=None, log_likelihood=None,
                 constant_data=None):  # fmt: skip
        """ArviZ InferenceData: a posterior group keyed by Stan variable names (one chain of
        independent draws from q), sample_stats with log_p and log_q, log_likelihood with the
        `log_lik` generated quantity (or the names in `log_likelihood`), and as
        az.from_cmdstanpy: `posterior_predictive` (generated quantities by name, or
        {observed name: generated name} to file them under the observed names az.plot_ppc
        pairs), `observed_data` and `constant_data` (a dict, or names of data variables taken
        from the fit's data)."""
        posterior, groups = arviz_groups(self.result, observed_data=observed_data,
                                         posterior_predictive=posterior_predictive,
                                         log_likelihood=log_likelihood,
                                         constant_data=constant_data)  # fmt: skip
        idata = _inference_data(posterior, self.result.diagnostics)
        if len(groups) > 1:  # groups beyond the dims
            import arviz as az

            idata.extend(az.from_dict(**groups))
        return idata

    def save(self, directory: str | os.PathLike, overwrite: bool = False,
             inputs: list[str] = ()) -> list[Path]:  # fmt: skip
        """summary.csv, draws.csv, fit.json and elbo.csv (and local_means.csv for an svi fit
        whose locals are per-row means), as `ppl fit --output DIR` writes them:
        never over the model, a data file or `inputs`; over files ppl did not write only with
        `overwrite`."""
        read = [os.fspath(p) for p in [self.model_file, *self.data_files, *inputs]
                if isinstance(p, str | os.PathLike)]  # fmt: skip
        return write_outputs(str(directory), self.result, self.info(), self.log_weights,
                             inputs=read, overwrite=overwrite)  # fmt: skip

    def info(self) -> dict:
        """fit.json's record."""
        draws = len(next(iter(self.result.draws.values()), []))
        return fit_info(self.result, model=self.model_file, data=self.data_files, draws=draws,
                        engine=self.engine, weighted=self.log_weights is not None,
                        iterations=self.iterations)  # fmt: skip

    def report(self, max_rows: int = 60) -> str:
        """What `ppl fit` prints: the fit's header lines, families and the summary table."""
        lines = header_lines(self.result, iterations=self.iterations)
        lines += diagnostics_lines(self.result)
        summaries = summaries_text(self.result, self.log_weights)
        if summaries:
            lines.append(summaries)
        lines += [f"  q({name}): {fam}" for name, fam in self.result.families.items()]
        table = format_table(fit_summary(self.result, self.log_weights), max_rows)
        return "\n".join([*lines, "", table])

    def __repr__(self) -> str:
        return (f"<ppl.Fit {self.method}: ELBO {self.elbo:.6g}, k-hat {self.khat:.2f}, "
                f"{self.verdict}>")  # fmt: skip

    def __str__(self) -> str:
        return self.report()


def _inference_data(variables: dict[str, np.ndarray], diagnostics: dict):
    try:
        import arviz as az
    except ModuleNotFoundError:
        raise PplError("to_arviz() needs ArviZ: pip install arviz") from None
    posterior = {name: v[None, ...] for name, v in variables.items() if name != "log_lik"}
    dims = {name: [f"{name}_dim_{i}" for i in range(v.ndim - 1)]
            for name, v in variables.items()}  # fmt: skip
    groups = {"posterior": posterior, "dims": dims}
    stats = {key: np.asarray(diagnostics[key])[None, :]
             for key in ("log_p", "log_q") if diagnostics.get(key) is not None}  # fmt: skip
    if stats:
        groups["sample_stats"] = stats
    if "log_lik" in variables:
        groups["log_likelihood"] = {"log_lik": variables["log_lik"][None, ...]}
    return az.from_dict(**groups)


def to_arviz(directory: str | os.PathLike):
    """InferenceData from a `ppl fit --output DIR` directory (or a Stan CSV file): its
    draws.csv read back with every Stan variable's shape and integer type
    (ppl.outputs.stancsv), log_p__ and log_g__ as sample stats: the groups fit.to_arviz()
    gives."""
    draws = read_draws(directory)
    names = {"log_p": "log_p__", "log_q": "log_g__"}
    stats = {key: draws.other[column] for key, column in names.items() if column in draws.other}
    return _inference_data(draws.variables, stats)
