"""Constrained types end to end: data of a constrained type is validated with a message naming
the variable and the constraint; parameters of every constrained type compile, and their log
joint is the density of the constrained value plus the transform's log-Jacobian."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from ppl.data.specs import read_data
from ppl.errors import DataError, ModelError
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.library.transforms import make_transform
from ppl.runtime.compiler import CompiledModel

GOOD = {
    "simplex[3]": [0.2, 0.3, 0.5],
    "ordered[3]": [-1.0, 0.5, 2.0],
    "positive_ordered[3]": [0.1, 0.5, 2.0],
    "unit_vector[2]": [0.6, 0.8],
    "sum_to_zero_vector[3]": [1.0, -0.25, -0.75],
    "cov_matrix[2]": [[2.0, 0.5], [0.5, 1.0]],
    "corr_matrix[2]": [[1.0, 0.5], [0.5, 1.0]],
    "cholesky_factor_cov[2]": [[1.0, 0.0], [0.5, 2.0]],
    "cholesky_factor_corr[2]": [[1.0, 0.0], [0.6, 0.8]],
}
BAD = {
    "simplex[3]": [0.2, 0.3, 0.6],
    "ordered[3]": [-1.0, 2.0, 0.5],
    "positive_ordered[3]": [-0.1, 0.5, 2.0],
    "unit_vector[2]": [0.6, 0.7],
    "sum_to_zero_vector[3]": [1.0, -0.25, -0.5],
    "cov_matrix[2]": [[1.0, 2.0], [2.0, 1.0]],
    "corr_matrix[2]": [[2.0, 0.5], [0.5, 1.0]],
    "cholesky_factor_cov[2]": [[1.0, 0.3], [0.5, 2.0]],
    "cholesky_factor_corr[2]": [[1.0, 0.0], [0.6, 0.7]],
}


def _read(tmp_path, decl, value):
    src = f"data {{ {decl} x; }} parameters {{ real mu; }} model {{ mu ~ normal(0, 1); }}"
    checked = check(parse(src, "m.stan"))
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"x": value}))
    return read_data(checked, [str(path)])


@pytest.mark.parametrize("decl", sorted(GOOD))
def test_constrained_data_is_validated(tmp_path, decl):
    np.testing.assert_allclose(_read(tmp_path, decl, GOOD[decl])["x"], GOOD[decl])
    with pytest.raises(DataError) as err:
        _read(tmp_path, decl, BAD[decl])
    kind = decl.split("[")[0]
    text = str(err.value)
    assert text.startswith("x (") and " is not " in text
    assert make_transform(kind).in_support(np.asarray(GOOD[decl]))


def test_arrays_of_constrained_data_name_the_bad_entry(tmp_path):
    with pytest.raises(DataError, match=r"x\[2\] in x .* is not ordered"):
        _read(tmp_path, "array[2] ordered[3]", [[1, 2, 3], [1, 3, 2]])


def _compiled(src: str) -> CompiledModel:
    return CompiledModel(check(parse(src, "m.stan")), {}, seed=0)


@pytest.mark.parametrize(
    "decl, event",
    [
        ("unit_vector[3]", (3,)),
        ("sum_to_zero_vector[4]", (4,)),
        ("positive_ordered[3]", (3,)),
        ("cholesky_factor_corr[3]", (3, 3)),
        ("cholesky_factor_cov[3]", (3, 3)),
        ("cholesky_factor_cov[4, 2]", (4, 2)),
        ("corr_matrix[3]", (3, 3)),
        ("cov_matrix[3]", (3, 3)),
    ],
)
def test_parameters_of_every_constrained_type(decl, event):
    """log joint = sum normal(x | 0, 1) + log|J|, for a batch of unconstrained draws."""
    model = _compiled(f"parameters {{ {decl} x; }} model {{ to_vector(x) ~ normal(0, 1); }}")
    kind = decl.split("[")[0]
    shape = event if kind == "cholesky_factor_cov" and len(event) == 2 else None
    t = make_transform(kind, shape=shape) if kind == "cholesky_factor_cov" else make_transform(kind)
    zeta = np.random.default_rng(0).normal(size=(5, model.dim)) * 0.5
    assert model.dim == int(np.prod(t.unconstrained_shape(event)))
    x, log_jac = t.forward(zeta.reshape((5,) + t.unconstrained_shape(event)), len(event))
    expected = stats.norm.logpdf(x).reshape(5, -1).sum(axis=1) + log_jac
    np.testing.assert_allclose(model.log_joint(zeta), expected, rtol=1e-10)
    draws = t.forward(zeta.reshape((5,) + t.unconstrained_shape(event)), len(event))[0]
    assert all(t.in_support(d) for d in draws)


def test_a_nan_bound_and_nan_made_in_transformed_data_are_located_errors():
    """A bound from data that is NaN, and transformed data that came out NaN from data without
    any (cholesky_decompose of a matrix that is not positive definite), stop with the
    declaration's place, as Stan does, instead of letting NaN into every draw."""
    bound = "data { real lo; } parameters { real<lower=lo> x; } model { x ~ normal(0, 1); }"
    with pytest.raises(ModelError, match=r"b\.stan:1:\d+: the lower bound of 'x' is NaN"):
        CompiledModel(check(parse(bound, "b.stan")), {"lo": np.array(np.nan)})
    chol = """data { matrix[2, 2] S; }
transformed data { matrix[2, 2] L = cholesky_decompose(S); }
parameters { vector[2] z; } model { z ~ multi_normal_cholesky(rep_vector(0, 2), L); }"""
    with pytest.raises(ModelError, match=r"c\.stan:2:\d+: transformed data 'L' has NaN values"):
        CompiledModel(check(parse(chol, "c.stan")), {"S": np.array([[1.0, 2.0], [2.0, 1.0]])})
    # NaN given on purpose in the data is left alone
    CompiledModel(check(parse(chol, "c.stan")), {"S": np.array([[1.0, np.nan], [0.5, 1.0]])})
