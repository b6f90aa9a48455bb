"""docs/language.md's coverage table is what `python -m ppl.language.coverage` generates today, and
the
support it reports agrees with what the checker accepts."""

from __future__ import annotations

import pytest

from ppl.errors import ModelError
from ppl.language import coverage
from ppl.language.checker import check
from ppl.language.parser import parse


def test_committed_coverage_table_is_current():
    text = coverage.DOC.read_text(encoding="utf-8")
    assert coverage.render(text) == text, "run: python -m ppl.language.coverage"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("normal_lpdf", True),
        ("neg_binomial_2_log_glm_lpmf", True),
        ("lkj_corr_cholesky_rng", False),  # Stan's takes the dimension
        ("poisson_lpdf", False),  # discrete: _lpmf
        ("qr_thin_Q", True),
        ("print", True),
        ("ode_rk45", True),
        ("ode_adjoint_tol_ctl", False),
        ("hmm_marginal", False),
    ],
)
def test_support_of_single_names(name, expected):
    assert coverage.supported(name) is expected


def test_supported_calls_pass_the_checker_and_unsupported_ones_name_themselves():
    ok = check(parse("parameters { real mu; } model { target += std_normal_lpdf(mu); }"))
    assert ok.program.model
    with pytest.raises(ModelError, match="'hmm_marginal' is a Stan function"):
        check(parse("parameters { real mu; } model { target += hmm_marginal(mu, mu, mu); }"))
