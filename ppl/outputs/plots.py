"""`ppl plot DIR`: PNGs of a fit's ELBO trace and of each parameter's approximate marginals,
from the files `ppl fit --output DIR` wrote, so that a fit can be looked at after the fact.

A reference (a posteriordb `reference.json`, whose `parameters` map element names to summary
statistics, or a file with `mean` and `sd` maps, like models/logistic_regression's NUTS
reference) is drawn over the marginals: its normal approximation and its 5% / 95% quantiles.
matplotlib is an optional dependency (`pip install matplotlib`; from a checkout of ppl,
`pip install '.[plot]'` -- not `'ppl[plot]'`: `ppl` on PyPI is another project).
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np

from ppl.errors import PplError
from ppl.outputs.files import write_images
from ppl.outputs.stancsv import StanCsv, bracket_name, read_draws

MAX_PANELS = 16


def _read_outputs(directory: Path) -> tuple[dict, np.ndarray, StanCsv]:
    need = ["fit.json", "elbo.csv", "draws.csv"]
    missing = [n for n in need if not (directory / n).is_file()]
    if missing:
        raise PplError(
            f"{directory}: no {', '.join(missing)} here; give the directory that "
            "`ppl fit ... --output DIR` wrote"
        )
    try:
        info = json.loads((directory / "fit.json").read_text())
        elbo = np.loadtxt(directory / "elbo.csv", delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError) as e:
        raise PplError(f"{directory}: cannot read the fit's output files: {e}") from None
    return info, elbo, read_draws(directory / "draws.csv")


def _read_reference(path: str) -> dict[str, tuple[float, float, float | None, float | None]]:
    """element name -> (mean, sd, q5, q95)"""
    try:
        ref = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise PplError(f"{path}: cannot read the reference: {e}") from None
    out: dict = {}
    if not isinstance(ref, dict):
        ref = {}
    if isinstance(ref.get("parameters"), dict):
        for name, s in ref["parameters"].items():
            if isinstance(s, dict) and "mean" in s and "sd" in s:
                out[name] = (s["mean"], s["sd"], s.get("q05"), s.get("q95"))
    elif isinstance(ref.get("mean"), dict) and isinstance(ref.get("sd"), dict):
        for name, m in ref["mean"].items():
            if name in ref["sd"]:
                out[name] = (m, ref["sd"][name], None, None)
    if not out:
        raise PplError(
            f"{path}: no reference statistics found (expected 'parameters' with mean and sd per "
            "element, as posteriordb's reference.json, or 'mean' and 'sd' maps)"
        )
    return out


def _render(fig) -> bytes:
    """The PNG, in memory: the images are written together once all are made (files.py)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _image_name(variable: str, taken: dict[str, bytes]) -> str:
    """<variable>.png; a variable named elbo does not take the ELBO trace's name."""
    name = f"{variable}.png"
    while name in taken:
        name = "_" + name
    return name


def _histogram(ax, x: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """q's histogram of one element (and the PSIS-weighted one): its finite draws, which it
    returns. An element fixed by its type (a correlation matrix's unit diagonal, a Cholesky
    factor's zeros) or constant up to rounding gets a line at its value, as matplotlib cannot
    cut a zero range into bins."""
    finite = np.isfinite(x)
    x, w = x[finite], (None if weights is None else weights[finite])
    if not x.size:
        ax.text(0.5, 0.5, "no finite draws", ha="center", transform=ax.transAxes)
        return x
    if np.ptp(x) <= 1e-9 * max(1.0, float(np.abs(x).max())):
        value = float(np.median(x))
        ax.axvline(value)
        ax.set_xlim(value - 1, value + 1)
        ax.text(0.5, 0.5, f"constant {value:.6g}", ha="center", transform=ax.transAxes)
        return x
    ax.hist(x, bins=40, density=True, alpha=0.6, label="q")
    if w is not None and w.sum() > 0:
        ax.hist(x, bins=40, density=True, weights=w, histtype="step", label="q, PSIS-weighted")
    return x


def _elbo_image(elbo: np.ndarray, info: dict) -> bytes:
    """elbo.png: the trace, and its second half beside it when the early values dwarf it."""
    import matplotlib.pyplot as plt

    iterations, values = elbo[:, 0], elbo[:, 1]
    late = iterations >= iterations[-1] / 2
    zoom = late.sum() >= 3  # the early ELBOs dwarf the later changes: a second panel shows them
    fig, axes = plt.subplots(1, 2 if zoom else 1, figsize=(10 if zoom else 5, 3.5), squeeze=False)
    axes = axes.ravel()
    axes[0].plot(iterations, values, marker=".")
    axes[0].set(xlabel="iteration", ylabel="ELBO", title=f"ELBO ({info.get('method', '')})")
    if zoom:
        axes[1].plot(iterations[late], values[late], marker=".")
        axes[1].set(xlabel="iteration", title="second half")
    fig.tight_layout()
    image = _render(fig)
    plt.close(fig)
    return image


def plot_fit(directory: str, reference: str | None = None, overwrite: bool = False) -> list[Path]:
    """Write elbo.png and <parameter>.png into `directory`; return their paths. As the fit's
    outputs, they never replace a file ppl did not write (without `overwrite`) nor the
    reference, and are written whole (ppl.outputs.files.write_images)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PplError(
            "ppl plot needs matplotlib: pip install matplotlib (or, in ppl's "
            "source tree, pip install '.[plot]')"
        ) from None
    out = Path(directory)
    info, elbo, draws = _read_outputs(out)
    ref = {bracket_name(k): v for k, v in _read_reference(reference).items()} if reference else {}
    names = {bracket_name(n) for elements in draws.names.values() for n in elements}
    if ref and not set(ref) & names:
        shown = ", ".join(list(ref)[:4])
        raise PplError(f"{reference}: names none of the fit's parameters ({shown}, ...)")
    images: dict[str, bytes] = {}
    if elbo.shape[0] and elbo.shape[1] >= 2:  # a short --method svi fit may record no ELBO
        images["elbo.png"] = _elbo_image(elbo, info)

    weights = None
    lw = draws.other.get("psis_log_weight__", draws.other.get("psis_log_weight"))
    if lw is not None:
        weights = np.exp(lw - lw.max())
    families = info.get("families", {}) if isinstance(info.get("families"), dict) else {}
    for variable in draws.variables:
        columns = draws.elements(variable)
        family = families.get(variable, "a function of the parameters (draws through the model)")
        shown = columns[:MAX_PANELS]
        ncol = min(4, len(shown))
        nrow = math.ceil(len(shown) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.6 * nrow), squeeze=False)
        for ax, (column, x) in zip(axes.ravel(), shown, strict=False):
            name = bracket_name(column)
            x = _histogram(ax, x, weights)
            if name in ref and x.size:
                m, sd, q5, q95 = ref[name]
                grid = np.linspace(min(x.min(), m - 4 * sd), max(x.max(), m + 4 * sd), 200)
                density = np.exp(-0.5 * ((grid - m) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
                ax.plot(grid, density, "k--", label="reference (normal)")
                for q in (q5, q95):
                    if q is not None:
                        ax.axvline(q, color="k", lw=0.8, ls=":")
            ax.set_title(name, fontsize=9)
            ax.tick_params(labelsize=7)
        for ax in axes.ravel()[len(shown) :]:
            ax.axis("off")
        labelled = [ax for ax in axes.ravel() if ax.get_legend_handles_labels()[1]]
        if labelled:
            labelled[0].legend(fontsize=7)
        more = f" (first {MAX_PANELS} of {len(columns)})" if len(columns) > len(shown) else ""
        fig.suptitle(f"{variable}: {family}{more}", fontsize=10)
        fig.tight_layout()
        images[_image_name(variable, images)] = _render(fig)
        plt.close(fig)
    return write_images(directory, images, [reference] if reference else [], overwrite)
