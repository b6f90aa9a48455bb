"""One benchmark problem, stated once for ppl and once for each peer (PyMC, NumPyro).

A problem names the ppl model and data, the reference posterior (posteriordb or a stored NUTS
run), and builders for the same model in PyMC and NumPyro. Peers must use the Stan model's
parameter names and shapes (`vector[K] beta` -> shape (K,), `matrix[D, K] W` -> (D, K)), so
their constrained draws flatten to the same Stan element names (`beta[1]`, `W[2,3]`) as ppl's
(ppl.outputs.summary.flatten_draws). PyMC and NumPyro are imported only inside the builders: the
benchmark package must import without them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

# constrained draws: parameter name -> array (n_draws, *shape)
Draws = dict[str, np.ndarray]


@dataclass
class Problem:
    name: str
    model: Path  # the ppl model file (a .stan or .model file)
    data: list[Path]  # the ppl data files, as given to `ppl fit`
    reference: dict[str, dict]  # Stan element name -> {"mean": float, "sd": float}
    reference_source: str  # where the reference comes from, one line
    # () -> pymc.Model with the same priors and likelihood, data inside
    pymc_model: Callable[[], object]
    # () -> (model function, kwargs to call it with); numpyro sample sites named as in Stan
    numpyro_model: Callable[[], tuple[Callable, dict]]
    # extra quantities to compare computed from constrained draws (e.g. permutation-invariant
    # ones), keyed by Stan-style element name -> (n_draws,) array; None = compare parameters
    derived: Callable[[Draws], dict[str, np.ndarray]] | None = None
    notes: list[str] = field(default_factory=list)


def load_json(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def nuts_reference(path: Path) -> dict[str, dict]:
    """{Stan element name: {"mean", "sd"}} from a stored NUTS run (benchmarks/reference/*)."""
    ref = load_json(path)
    return {name: {"mean": ref["mean"][name], "sd": ref["sd"][name]} for name in ref["mean"]}
