"""The functions a fused kernel applies itself (ppl.runtime.fused.FUSED_CALLS) are the library's:
the kernel's value of `exp(x)` is the value the library's `exp` gives, for the same scalar."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.language.types import SType
from ppl.library.functions import lookup
from ppl.runtime.fused import FUSED_CALLS


@pytest.mark.parametrize("name", sorted(FUSED_CALLS))
def test_a_fused_call_computes_what_the_library_computes(name):
    fn = lookup(name)
    assert fn is not None and fn.nargs == (1,)
    for x in (0.3, 1.7, np.array([0.2, 2.5, 9.0])):
        assert np.array_equal(fn.impl([x], [SType("real")]), FUSED_CALLS[name](x))
