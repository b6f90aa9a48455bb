"""The families by name: what each one is (its block class) and what the choice and the labels
need to know of it. Adding a family: its class (ppl/families/NAME.py) and a register() here."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

#: The Gaussian family's name: every method's default, and the warm start of the others.
GAUSSIAN = "gaussian"


@dataclass(frozen=True)
class FamilySpec:
    """A per-block family of a composite q (ppl.families.composite) and its part in the choice.

    `block`: its class, or "module:Class" for one imported on first use (`ppl check` and the
    CLI's options load no scipy).
    `covers(latent)` says which latents it can approximate (`needs` says it in words, for the
    error when --family asks for another); `automatic` families are given, wherever they cover,
    by the methods that choose rich families (auto, bbvi). `title` is how a label names it (None:
    the method's own Gaussian, mean-field or full-rank); `pathwise` how its draws are
    differentiated (None: as a Gaussian's), `score_only` that they are not at all. A
    `warm_started` family is fitted after a Gaussian, moment-matched from it.
    """

    name: str
    block: Callable | str
    covers: Callable = lambda latent: True
    needs: str = ""
    automatic: bool = False
    title: str | None = None
    pathwise: str | None = None
    score_only: bool = False
    warm_started: bool = False
    labelled_alone: bool = False  # its label needs no note of the transform it lives on

    @property
    def cls(self):
        """The block class."""
        if not isinstance(self.block, str):
            return self.block
        module, name = self.block.split(":")
        return getattr(importlib.import_module(module), name)


def positive(latent) -> bool:
    """Declared with lower=0 and no upper bound: the support a gamma family can cover."""
    return latent.kind == "lower" and latent.support == "positive"


#: The families by name, in the order composite families draw them and the choice tries them.
FAMILIES: dict[str, FamilySpec] = {}

#: --family NAME=FAMILY: the names a user may write, and the family each one means.
FAMILY_NAMES: dict[str, str] = {}


def register(spec: FamilySpec, *names: str) -> FamilySpec:
    """Add `spec` to FAMILIES, written on the command line as its name or any of `names`."""
    FAMILIES[spec.name] = spec
    for name in (spec.name, *names):
        FAMILY_NAMES[name] = spec.name
    return spec


register(FamilySpec(GAUSSIAN, "ppl.families.gaussian:MeanFieldGaussian"), "lognormal", "normal")
register(FamilySpec("gamma", "ppl.families.gamma:GammaFamily", covers=positive, automatic=True,
                    needs="a positive parameter (declared with lower=0 only)", title="gamma",
                    pathwise="inverse-CDF reparameterisation", warm_started=True,
                    labelled_alone=True))  # fmt: skip
register(FamilySpec("bernoulli", "ppl.families.bernoulli:Bernoulli",
                    covers=lambda latent: latent.binary, title="Bernoulli", score_only=True,
                    labelled_alone=True))  # fmt: skip


def pathwise_non_gaussian(chosen: dict[str, str]) -> bool:
    """Whether a choice holds a reparameterised family other than the Gaussian: then a composite
    q (SGVB) fits it, not ADVI's Gaussian."""
    return any(FAMILIES[fam].pathwise is not None for fam in chosen.values())


def gaussian_first(chosen: dict[str, str]) -> dict[str, str]:
    """The choice with every warm-started family replaced by the Gaussian it starts from."""
    return {name: (GAUSSIAN if FAMILIES[fam].warm_started else fam)
            for name, fam in chosen.items()}  # fmt: skip
