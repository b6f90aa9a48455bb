"""Variational families, one class per family (gaussian, gamma, bernoulli, studentt, lowrank),
the composite family that gives each latent its own (composite), the table of families by name
(registry) and the choice of one per latent (choice).

The names below are imported on first use (PEP 562): `ppl check` and the CLI's option parsing
read the registry and the choice without loading scipy."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ppl.families.gaussian": ["MeanFieldGaussian", "CholeskyGaussian", "FullRankGaussian"],
    "ppl.families.gamma": ["GammaFamily", "gamma_entropy", "gamma_sample", "gamma_sample_log"],
    "ppl.families.bernoulli": ["Bernoulli"],
    "ppl.families.studentt": ["StandardDistribution", "FullScale", "DiagonalScale"],
    "ppl.families.lowrank": ["LowRankGaussian"],
    "ppl.families.composite": ["Block", "MixedFamily", "blocks_of"],
    "ppl.families.registry": ["FAMILIES", "FAMILY_NAMES", "GAUSSIAN", "FamilySpec", "register"],
    "ppl.families.choice": ["FamilyPolicy", "POINT_ESTIMATE", "choose_families", "family_for",
                            "family_label", "family_of"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'ppl.families' has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
