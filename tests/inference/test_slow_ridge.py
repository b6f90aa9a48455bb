"""A mode search still climbing at its cap: an unbounded density (a scale going to 0) or a slow
ridge that ends at a mode (a factor model's scale symmetry x -> c x, W -> W / c, broken only by
the priors)? The log density along the search's last move, carried on, tells them apart
(ppl.inference.suspect.still_rising); models/gamma_normal's false "x: unbounded density" fault
came from reading the ridge as a spike."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ppl.inference.mode import find_mode
from ppl.inference.suspect import unbounded
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

sys.path.insert(0, str(Path(__file__).parent))
from test_suspect_mode import _measurement_error  # noqa: E402

FACTOR = (Path(__file__).parents[2] / "models" / "gamma_normal" / "gamma_normal.model").read_text()


def _factor_model(seed: int = 0) -> CompiledModel:
    """The gamma_normal model on 40 x 6 simulated labs, 2 factors (93 parameters), two patients
    with an outlying lab as in the liver data: its mode exists (the search converges after
    about 190 iterations)."""
    rng = np.random.default_rng(seed)
    x, W = rng.gamma(1.0, 1.0, (40, 2)), rng.normal(0.0, 1.0, (2, 6))
    y = x @ W + 0.5 * rng.normal(size=(40, 6))
    y[:2, 5] = -10.0
    return CompiledModel(check(parse(FACTOR)), {"N": 40, "J": 6, "L": 2, "y": y})


def test_a_slow_ridge_cut_short_is_not_an_unbounded_density():
    """Cut at 50 iterations the factor model's search gained 10 nats in its last quarter (the
    old rule's "unbounded density"); carried on, its last move falls past the mode, so it is
    "no convergence"; run on, the search converges to a finite mode."""
    model = _factor_model()
    init = model.random_init(np.random.default_rng(1))
    cut = find_mode(model.log_joint, init, np.random.default_rng(1), max_iter=50)
    assert not cut.converged
    assert unbounded(cut)["how"] == "unbounded density"  # the gain alone misreads it
    assert unbounded(cut, model.log_joint)["how"] == "no convergence"
    full = find_mode(model.log_joint, init, np.random.default_rng(1), max_iter=2000)
    assert full.converged and np.isfinite(full.log_density)
    assert full.log_density > cut.log_density


def test_a_scale_going_to_zero_is_still_an_unbounded_density():
    """The measurement-error model's climb as sigma -> 0 keeps rising along its last move."""
    model = _measurement_error()
    rng = np.random.default_rng(1)
    mode = find_mode(model.log_joint, model.random_init(rng), rng, max_iter=400)
    found = unbounded(mode, model.log_joint)
    assert found["how"] == "unbounded density"
    assert found["coordinates"] == [model.dim - 1]  # log sigma


@pytest.mark.slow
def test_the_factor_model_fit_has_no_unbounded_density_fault(monkeypatch):
    """The default road on the factor model with its mode search cut short (the cap of a model
    this small is its dimension, 93): no "unbounded density" fault reaches the verdict."""
    import ppl.inference.auto as road
    from ppl.pipeline import fit

    monkeypatch.setattr(road, "MODE_MAX_ITER", 50)
    result = fit(_factor_model(), "auto", seed=1)
    assert result.vi.polish["suspect"]["how"] == "no convergence"
    faults = result.vi.polish.get("faults", [])
    assert not [f for f in faults if f["how"] == "unbounded density"]
