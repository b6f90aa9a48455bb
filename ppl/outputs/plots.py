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
import re
from pathlib import Path

import numpy as np

from ppl.errors import PplError
from ppl.outputs.files import write_images

MAX_PANELS = 16


def _read_outputs(directory: Path) -> tuple[dict, np.ndarray, list[str], np.ndarray]:
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
        with open(directory / "draws.csv") as f:
            names = f.readline().strip().split(",")
        draws = np.loadtxt(directory / "draws.csv", delimiter=",", skiprows=1, ndmin=2)
    except (OSError, ValueError) as e:
        raise PplError(f"{directory}: cannot read the fit's output files: {e}") from None
    return info, elbo, names, draws


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


_ELEMENT = re.compile(r"([A-Za-z][A-Za-z0-9_]*)(\[[0-9,]+\])?")
#: draws.csv's columns that are not Stan variables (CmdStan's and --psis's)
_NOT_VARIABLES = {"lp__", "log_p__", "log_g__", "psis_log_weight"}


def _variables(names: list[str]) -> dict[str, list[int]]:
    """Stan variable -> its columns in draws.csv: parameters, transformed parameters and
    generated quantities alike. Only identifiers name a PNG, so a crafted header cannot send
    a file outside the directory."""
    out: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        m = _ELEMENT.fullmatch(name)
        if m and name not in _NOT_VARIABLES:
            out.setdefault(m.group(1), []).append(j)
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
    info, elbo, names, draws = _read_outputs(out)
    ref = _read_reference(reference) if reference else {}
    if ref and not set(ref) & set(names):
        shown = ", ".join(list(ref)[:4])
        raise PplError(f"{reference}: names none of the fit's parameters ({shown}, ...)")
    images: dict[str, bytes] = {}

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
    images["elbo.png"] = _render(fig)
    plt.close(fig)

    weights = None
    if names and names[-1] == "psis_log_weight":
        lw = draws[:, -1]
        weights = np.exp(lw - lw.max())
    families = info.get("families", {}) if isinstance(info.get("families"), dict) else {}
    for variable, columns in _variables(names).items():
        family = families.get(variable, "a function of the parameters (draws through the model)")
        shown = columns[:MAX_PANELS]
        ncol = min(4, len(shown))
        nrow = math.ceil(len(shown) / ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.6 * nrow), squeeze=False)
        for ax, j in zip(axes.ravel(), shown, strict=False):
            x = draws[:, j]
            ax.hist(x, bins=40, density=True, alpha=0.6, label="q")
            if weights is not None:
                ax.hist(x, bins=40, density=True, weights=weights, histtype="step",
                        label="q, PSIS-weighted")  # fmt: skip
            if names[j] in ref:
                m, sd, q5, q95 = ref[names[j]]
                grid = np.linspace(min(x.min(), m - 4 * sd), max(x.max(), m + 4 * sd), 200)
                density = np.exp(-0.5 * ((grid - m) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))
                ax.plot(grid, density, "k--", label="reference (normal)")
                for q in (q5, q95):
                    if q is not None:
                        ax.axvline(q, color="k", lw=0.8, ls=":")
            ax.set_title(names[j], fontsize=9)
            ax.tick_params(labelsize=7)
        for ax in axes.ravel()[len(shown) :]:
            ax.axis("off")
        axes.ravel()[0].legend(fontsize=7)
        more = f" (first {MAX_PANELS} of {len(columns)})" if len(columns) > len(shown) else ""
        fig.suptitle(f"{variable}: {family}{more}", fontsize=10)
        fig.tight_layout()
        images[_image_name(variable, images)] = _render(fig)
        plt.close(fig)
    return write_images(directory, images, [reference] if reference else [], overwrite)
