"""Which variational family approximates each latent, and how the family is described.

The one place the choice is made: `ppl fit` (ppl.pipeline) and `ppl ir` (ppl.ir.graph) both call
:func:`family_for` and :func:`family_label`. A latent here is anything with ``name``, ``binary``,
``kind`` (its constraining transform), ``support`` and ``hyper``: a compiled model's
:class:`ppl.runtime.compiler.Latent`, or the IR's view of a declaration when no data is given.
"""

from __future__ import annotations

from ppl.errors import ModelError

#: --family NAME=FAMILY: the names a user may write, and the family each one means.
FAMILY_NAMES = {
    "gamma": "gamma",
    "lognormal": "gaussian",
    "gaussian": "gaussian",
    "normal": "gaussian",
}

#: A hyperparameter's "family" under DSVI: no q, a point estimate maximising the ELBO.
POINT_ESTIMATE = "point estimate (type-II ML)"


def positive(latent) -> bool:
    """Declared with lower=0 and no upper bound: the support a gamma family can cover."""
    return latent.kind == "lower" and latent.support == "positive"


def family_for(latent, method: str, override: str | None = None) -> str:
    """The family `ppl fit --method METHOD` gives `latent`: "bernoulli", "gamma" or "gaussian".

    Binary latents are Bernoulli; `auto` and `bbvi` give a gamma family to positive latents; the
    rest get a Gaussian on the unconstrained scale. `override` (a FAMILY_NAMES key, from
    --family NAME=FAMILY) replaces the choice.
    """
    if latent.binary:
        if override is not None:
            raise ModelError(
                f"--family {latent.name}={override}: '{latent.name}' is binary; its "
                "family is always Bernoulli"
            )
        return "bernoulli"
    fam = "gamma" if (method in ("auto", "bbvi") and positive(latent)) else "gaussian"
    if override is not None:
        fam = FAMILY_NAMES[override]
        if fam == "gamma" and not positive(latent):
            raise ModelError(
                f"--family {latent.name}=gamma: '{latent.name}' has support {latent.support}; "
                "the gamma family needs a positive parameter (declared with lower=0 only)"
            )
    return fam


def choose_families(model, method: str, overrides: dict[str, str] | None = None):
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
    return {lat.name: family_for(lat, method, overrides.get(lat.name)) for lat in model.latents}


def family_label(family: str, method: str) -> str:
    """How `family` is described under the fit method `method` (`ppl ir`'s family column).

    Under DSVI the fit passes its own label (rank and standard distribution) as `family`; a
    plain "gaussian" there is DSVI's default, a full-rank Gaussian.
    """
    if family == "bernoulli":
        return "Bernoulli (score-function gradient)"
    if family == "gamma":
        if method == "bbvi":
            return "gamma (score-function gradient)"
        if method == "auto":
            return "gamma (inverse-CDF reparameterisation, fixed draws)"
        return "gamma (SGVB, inverse-CDF reparameterisation)"
    if method == "dsvi":
        return "full-rank Gaussian (DSVI)" if family == "gaussian" else family
    gauss = "full-rank Gaussian" if method == "fullrank" else "mean-field Gaussian"
    if method == "bbvi":
        gauss += " (score-function gradient)"
    return gauss


def family_of(latent, method: str, family: str = "gaussian") -> str:
    """The fit's description of q(latent): family_label, and for a Gaussian on a transformed
    latent the transform and support it lives on (fit.json's and the summary's labels)."""
    label = family_label(family, method)
    if family in ("bernoulli", "gamma") or (method == "dsvi" and latent.hyper):
        return label
    if latent.kind == "identity":
        return label
    return f"{label} on the unconstrained scale ({latent.kind} transform, support {latent.support})"
