"""Which variational family approximates each latent, and how the family is described.

The one place the choice is made: `ppl fit` (ppl.methods) and `ppl ir` (ppl.ir.graph) both call
:func:`family_for` and :func:`family_label` with the fit method's :class:`FamilyPolicy`. A latent
here is anything with ``name``, ``binary``, ``kind`` (its constraining transform), ``support`` and
``hyper``: a compiled model's :class:`ppl.runtime.compiler.Latent`, or the IR's view of a
declaration when no data is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl.errors import ModelError
from ppl.families.registry import FAMILIES, FAMILY_NAMES, GAUSSIAN

#: A hyperparameter's "family" under DSVI: no q, a point estimate maximising the ELBO.
POINT_ESTIMATE = "point estimate (type-II ML)"


@dataclass(frozen=True)
class FamilyPolicy:
    """How a fit method chooses families and names them: each method (ppl.methods) has one.

    `rich`: automatic families (ppl.families.registry) wherever they cover a latent, else the
    Gaussian; `gaussian`: what the method's Gaussian is; `gradient`: the one gradient estimator
    every family is fitted by, when there is one; `pathwise`: how a reparameterised
    non-Gaussian family is fitted (formatted with `how`, the family's reparameterisation).
    """

    rich: bool = False
    gaussian: str = "mean-field Gaussian"
    gradient: str | None = None
    pathwise: str = "SGVB, {how}"


def family_for(latent, policy: FamilyPolicy, override: str | None = None) -> str:
    """The family a method with `policy` gives `latent`: a ppl.families.registry name.

    Binary latents are Bernoulli; a rich policy gives the first automatic family that covers
    the latent; the rest get a Gaussian on the unconstrained scale. `override` (a FAMILY_NAMES
    key, from --family NAME=FAMILY) replaces the choice.
    """
    if latent.binary:
        if override is not None:
            raise ModelError(
                f"--family {latent.name}={override}: '{latent.name}' is binary; its "
                "family is always Bernoulli"
            )
        return next(name for name, spec in FAMILIES.items()
                    if spec.score_only and spec.covers(latent))  # fmt: skip
    automatic = [name for name, spec in FAMILIES.items() if spec.automatic and spec.covers(latent)]
    fam = automatic[0] if policy.rich and automatic else GAUSSIAN
    if override is not None:
        fam = FAMILY_NAMES[override]
        if not FAMILIES[fam].covers(latent):
            raise ModelError(
                f"--family {latent.name}={override}: '{latent.name}' has support "
                f"{latent.support}; the {fam} family needs {FAMILIES[fam].needs}"
            )
    return fam


def choose_families(model, policy: FamilyPolicy, overrides: dict[str, str] | None = None):
    """The variational family of each of `model`'s latents (see family_for), by name.

    `overrides` (from --family NAME=FAMILY) replace the choice for single latents.
    """
    overrides = dict(overrides or {})
    known = {lat.name for lat in model.latents}
    for name, fam in overrides.items():
        if name not in known:
            raise ModelError(
                f"--family {name}={fam}: '{name}' is not a parameter; parameters: "
                + ", ".join(sorted(known))
            )
        if fam not in FAMILY_NAMES:
            raise ModelError(
                f"--family {name}={fam}: unknown family; choose one of "
                + ", ".join(sorted(FAMILY_NAMES))
            )
    return {lat.name: family_for(lat, policy, overrides.get(lat.name)) for lat in model.latents}


def family_label(family: str, policy: FamilyPolicy) -> str:
    """How `family` is described under a method with `policy` (`ppl ir`'s family column).

    A name that is no family is a label the fit made itself (DSVI's rank and standard
    distribution, a point estimate) and is kept as it is.
    """
    spec = FAMILIES.get(family)
    if spec is None:
        return family
    if spec.score_only:
        return f"{spec.title} (score-function gradient)"
    title = spec.title or policy.gaussian
    if policy.gradient:
        return f"{title} ({policy.gradient})"
    if spec.pathwise:
        return f"{title} ({policy.pathwise.format(how=spec.pathwise)})"
    return title


def family_of(latent, policy: FamilyPolicy, family: str = GAUSSIAN) -> str:
    """The fit's description of q(latent): family_label, and for a Gaussian on a transformed
    latent the transform and support it lives on (fit.json's and the summary's labels)."""
    label = family_label(family, policy)
    spec = FAMILIES.get(family)
    if family == POINT_ESTIMATE or (spec is not None and spec.labelled_alone):
        return label
    if latent.kind == "identity" or latent.binary:  # a binary latent has no unconstrained scale
        return label
    return f"{label} on the unconstrained scale ({latent.kind} transform, support {latent.support})"
