"""Stan's distributions: autograd-differentiable, vectorised log densities and numpy samplers.

``DISTRIBUTIONS`` maps each Stan name (``"normal"``, ``"neg_binomial_2"``, ...) to a
:class:`Distribution`; :func:`get_distribution` also accepts the spellings users write
(``"Normal"``, ``"StudentT"``, ``"Student_t"``) and Stan's function suffixes (``normal_lpdf``,
``poisson_rng``).
"""

from __future__ import annotations

import re

from .base import SUPPORTS, Distribution
from .continuous import CONTINUOUS
from .discrete import DISCRETE
from .glm import GLMS
from .multivariate import MULTIVARIATE

DISTRIBUTIONS: dict[str, Distribution] = {
    d.name: d for d in CONTINUOUS + DISCRETE + MULTIVARIATE + GLMS
}

_SUFFIXES = ("_lpdf", "_lpmf", "_lupdf", "_lupmf", "_rng")


def _key(name: str) -> str:
    """Spelling-insensitive key: lower case with underscores dropped (StudentT == student_t)."""
    return re.sub(r"_", "", name.lower())


_BY_KEY: dict[str, Distribution] = {_key(n): d for n, d in DISTRIBUTIONS.items()}


def get_distribution(name: str) -> Distribution | None:
    """The distribution called ``name`` (any capitalisation / underscores), or None if unknown."""
    if not isinstance(name, str):
        return None
    if name in DISTRIBUTIONS:
        return DISTRIBUTIONS[name]
    found = _BY_KEY.get(_key(name))
    if found is not None:
        return found
    for suffix in _SUFFIXES:
        if name.lower().endswith(suffix):
            return _BY_KEY.get(_key(name[: -len(suffix)]))
    return None


__all__ = ["DISTRIBUTIONS", "SUPPORTS", "Distribution", "get_distribution"]
