"""The Python API: compile a model once, fit it to data given as numpy arrays, dicts, pandas
DataFrames or files, and read the result as arrays, a DataFrame or ArviZ InferenceData.

    model = ppl.Model.from_file("eight_schools.stan")       # or ppl.Model(code)
    fit = model.fit({"J": 8, "y": y, "sigma": sigma})        # same defaults as `ppl fit`
    fit.summary(); fit.draws("theta"); fit.to_arviz(); fit.save("out")

The `ppl fit` command is this module with argument parsing: the same defaults, the same numbers
for the same seed, the same messages (every user error raises ppl.PplError)."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ppl.data.files import PythonValues, load_data, open_data_file
from ppl.data.specs import data_specs
from ppl.diagnostics.verdict import warn_unreliable
from ppl.errors import PplError
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

    @user_errors
    def fit(self, data=None, *, method: str = DEFAULTS["method"], seed: int = DEFAULTS["seed"],
            draws: int = DEFAULTS["draws"], iterations: int = DEFAULTS["iterations"],
            tol_rel_obj: float = DEFAULTS["tol_rel_obj"], psis: bool = False,
            **options) -> Fit:  # fmt: skip
        """Fit the model to `data` (a dict of arrays/numbers/lists, a pandas DataFrame in the
        CSV convention, a path to a .csv/.json file, or a list of these). `options` are the
        other `ppl fit` options by their Python names (eta, grad_samples, families, optimizer,
        estimator, batch, rank, dof, schedule, refine_draws, progress)."""
        labels, opened = _sources(data)
        values = load_data(self._specs, labels, {}, opened=opened)
        compiled = CompiledModel(self.checked, values, seed)
        result = self.run(compiled, method=method, seed=seed, draws=draws, iterations=iterations,
                          tol_rel_obj=tol_rel_obj, **options)  # fmt: skip
        return self.fitted(result, data=labels, iterations=iterations, psis=psis)

    @user_errors
    def run(self, compiled: CompiledModel, *, method: str = DEFAULTS["method"],
            **options) -> FitResult:  # fmt: skip
        """The fit of `compiled` (this model on data: compile(); or on a sample of the rows,
        with the `stream` or Dask `partitions` that hold them all in `options`): the one fit of
        Model.fit and `ppl fit`. `options`: ppl.pipeline.fit's."""
        return run_fit(compiled, method, **options)

    @user_errors
    def fitted(self, result: FitResult, *, data: list[str], iterations: int = DEFAULTS[
            "iterations"], psis: bool = False, engine: str = "embedded") -> Fit:  # fmt: skip
        """`result` checked (refused when it produced nothing usable, marked not converged when
        its numbers say so: ppl.diagnostics.trust) and wrapped for reading."""
        check_finite_result(result)
        warn_unreliable(result)  # UnreliableFitWarning, once per fit
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

    def draws(self, name: str) -> np.ndarray:
        """One Stan variable's draws, shaped (draws, *its Stan shape)."""
        if name not in self.result.draws:
            known = ", ".join(self.result.draws)
            raise PplError(f"no variable '{name}' in the fit; it has {known}")
        return np.asarray(self.result.draws[name])

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

    def to_arviz(self):
        """ArviZ InferenceData: a posterior group keyed by Stan variable names (one chain of
        independent draws from q), sample_stats with log_p and log_q, and log_likelihood when
        the model has a `log_lik` generated quantity."""
        return _inference_data(self.stan_variables(), self.result.diagnostics)

    def save(self, directory: str | os.PathLike, overwrite: bool = False,
             inputs: list[str] = ()) -> list[Path]:  # fmt: skip
        """summary.csv, draws.csv, fit.json and elbo.csv, as `ppl fit --output DIR` writes them:
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
    stats = {
        k: np.asarray(diagnostics[key])[None, :]
        for k, key in (("log_p", "log_p"), ("log_q", "log_q"))
        if diagnostics.get(key) is not None
    }
    if stats:
        groups["sample_stats"] = stats
    if "log_lik" in variables:
        groups["log_likelihood"] = {"log_lik": variables["log_lik"][None, ...]}
    return az.from_dict(**groups)


def to_arviz(directory: str | os.PathLike):
    """InferenceData from a `ppl fit --output DIR` directory (its draws.csv): one variable per
    Stan variable with its shape, log_p__ and log_g__ as sample stats."""
    path = Path(directory) / "draws.csv"
    try:
        header = path.read_text(encoding="utf-8").split("\n", 1)[0].split(",")
        table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError) as e:
        raise PplError(f"cannot read {path}: {e}") from None
    columns = {h: table[:, j] for j, h in enumerate(header)}
    stats = {"log_p": columns.pop("log_p__", None), "log_q": columns.pop("log_g__", None)}
    for extra in ("lp__", "psis_log_weight"):
        columns.pop(extra, None)
    variables = PythonValues.from_columns(columns, table.shape[0], str(path)).values
    return _inference_data(variables, {k: v for k, v in stats.items() if v is not None})
