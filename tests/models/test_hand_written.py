"""benchmarks/hand_written.py: each hand-written numpy log joint is the ppl model's log joint (the
benchmark's comparison is only fair if both compute the same thing), values and gradients."""

from __future__ import annotations

import runpy
from pathlib import Path

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

ROOT = Path(__file__).resolve().parents[2]
hand_written = runpy.run_path(str(ROOT / "benchmarks" / "hand_written.py"), run_name="hand")


@pytest.mark.parametrize("make", hand_written["CASES"], ids=lambda f: f.__name__)
def test_hand_written_log_joint_is_the_models(make):
    case = make(rows=2000) if make.__name__ == "linear_regression" else make()
    data = {k: np.asarray(v) for k, v in case.data.items()}
    model = CompiledModel(check(parse(case.source, "case.model")), data)
    zeta = np.random.default_rng(0).normal(scale=0.7, size=(4, model.dim))
    np.testing.assert_allclose(case.hand(zeta), model.log_joint(zeta), rtol=1e-10)
    np.testing.assert_allclose(
        grad(lambda z: anp.sum(case.hand(z)))(zeta),
        grad(lambda z: anp.sum(model.log_joint(z)))(zeta),
        rtol=1e-8,
        atol=1e-8,
    )
