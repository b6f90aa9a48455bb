"""Non-centring on the default road (ppl.ir.passes.noncentre): after `auto`'s first fit, the
model's location-scale statements whose data say little about their left side are non-centred
and fitted again, and the fit with the higher ELBO is kept (both bound the same log evidence:
the rewrite is an exact change of variables). `--reparam noncentre` fits the rewritten model
only, `--reparam none` never rewrites.

Which statements: Gorinova, Moore & Hoffman (ICML 2020) choose per variable by how informative
the data are. At the first fit's q, for `x ~ normal(mu, tau)`, the prior's precision of each
element is 1/tau^2 and q's is 1/var_q(x); the data's share is 1 - var_q(x) / tau^2 (what q's
precision has beyond the prior's). Where the data carry less than half of it on average, the
posterior of (x, tau) is a funnel and the non-centred coordinates are the better ones; where
they carry more, the centred ones are (the refit is skipped: no statement qualifies).
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from ppl.errors import ModelError, PplError
from ppl.ir.lowering import lower
from ppl.ir.passes import ALL, noncentre, optimise
from ppl.runtime.compiler import CompiledModel

#: --reparam's choices: auto (the default road decides), none, noncentre (every statement that
#: qualifies, whatever the method)
CHOICES = ("auto", "none", "noncentre")

#: The data's share of q's precision under which a statement is non-centred.
INFORMATIVE = 0.5

#: Draws of the first fit's q the data's share is estimated from.
RULE_DRAWS = 200


def noncentred(model: CompiledModel, only: set[str] | None = None) -> CompiledModel | None:
    """The model with its qualifying statements (those on the parameters in `only`, if given)
    non-centred, on the same data; None when none qualifies."""
    program = lower(model.checked)
    sites, _ = noncentre.find_sites(program)
    if not any(only is None or s.name in only for s in sites):
        return None
    noncentre.run(program, only)
    program.passes += (noncentre.NAME,)
    optimise(program, ALL)
    td = set(model.checked.names_in("transformed_data"))
    given = {k: v for k, v in model.data.items() if k not in td}
    out = CompiledModel(program, given, vectorise=model.vectorise)
    out.data.update({k: model.data[k] for k in td if k in model.data})  # the first model's
    return out


def prepared(model: CompiledModel, options) -> CompiledModel:
    """The model a fit runs on: non-centred where it qualifies under `--reparam noncentre`."""
    if options.reparam not in CHOICES:
        raise ModelError(f"--reparam {options.reparam}: one of {', '.join(CHOICES)}")
    if options.reparam != "noncentre" or noncentre.NAME in model.ir.passes:
        return model
    return noncentred(model) or model


def data_share(result, rng) -> dict[str, float]:
    """Per qualifying statement's left-side parameter, the data's mean share of q's precision
    of its elements at the fit `result` (Gorinova et al.'s informativeness), from q's draws."""
    model = result.model
    program = lower(model.checked)
    sites, _ = noncentre.find_sites(program)
    if not sites:
        return {}
    rewritten = noncentred(model)
    zeta = np.asarray(result.vi.sample(rng, RULE_DRAWS), dtype=float)
    mapped = zeta.copy()
    at = {lat.name: lat for lat in model.latents}
    raw_of = {c.name: r for c, r in zip(model.latents, rewritten.latents, strict=True)
              if c.name != r.name}  # fmt: skip
    out = {}
    for site in noncentre._ordered(sites):
        lat, raw = at[site.name], raw_of[site.name]
        block = slice(raw.offset, raw.offset + raw.size)
        values = []
        for u in (0.0, 1.0):
            mapped[:, block] = u
            x = rewritten.constrained_draws(mapped, rng)[site.name].reshape(len(zeta), -1)
            values.append(np.log(x) if site.family.log else x)
        loc, scale = values[0], values[1] - values[0]
        centred = zeta[:, lat.offset : lat.offset + lat.size]
        mapped[:, block] = (centred - loc) / scale  # the centred draws, in raw coordinates
        prior_precision = np.mean(1.0 / scale**2, axis=0)
        share = 1.0 - np.var(centred, axis=0) * prior_precision
        out[site.name] = float(np.mean(np.clip(share, 0.0, 1.0)))
    return out


def noncentred_if_better(first, refit, rng, options):
    """After the first fit of the default road: the non-centred refit of the statements the
    data inform weakly, kept when its ELBO is higher (with a note either way)."""
    elsewhere = options.stream is not None or options.partitions is not None
    if options.reparam != "auto" or elsewhere or refit is None \
            or noncentre.NAME in first.model.ir.passes:  # fmt: skip
        return first
    try:
        with np.errstate(all="ignore"):
            shares = data_share(first, np.random.default_rng([options.seed, 31]))
    except (PplError, ArithmeticError, ValueError) as e:
        first.notes.append(f"auto: non-centring was not tried ({str(e).splitlines()[0][:200]})")
        return first
    weak = {name for name, share in shares.items() if share < INFORMATIVE}
    if not shares:
        return first
    said = ", ".join(f"{name} {share:.2f}" for name, share in shares.items())
    if not weak:
        first.notes.append(f"auto: left centred: the data carry most of q's precision of "
                           f"{said} (share; non-centred under {INFORMATIVE})")  # fmt: skip
        return first
    model = noncentred(first.model, weak)
    kwargs = {f.name: getattr(options, f.name) for f in fields(options)}
    kwargs["reparam"] = "none"
    try:
        second = refit(model, "auto", **kwargs)
    except PplError as e:
        first.notes.append(f"auto: a non-centred fit failed ({str(e).splitlines()[0][:200]})")
        return first
    mine, theirs = first.diagnostics.get("elbo"), second.diagnostics.get("elbo")
    what = "; ".join(d.text for d in model.ir.decisions if d.pass_name == noncentre.NAME
                     and "non-centred:" in d.text)  # fmt: skip
    verdict = (f"ELBO {_text(theirs)} vs {_text(mine)}, k-hat "
               f"{second.diagnostics['khat']:.2f} vs {first.diagnostics['khat']:.2f}")  # fmt: skip
    grads = first.vi.grad_evals + second.vi.grad_evals
    if theirs is not None and (mine is None or theirs > mine):
        second.notes[:0] = first.notes
        second.notes.append(f"auto: non-centred (data's share of q's precision: {said}): "
                            f"{what}; kept: {verdict}")  # fmt: skip
        second.families = user_families(second)
        second.seconds += first.seconds
        second.vi.grad_evals = grads
        return second
    first.notes.append(f"auto: a non-centred fit ({what}) was not better: {verdict}")
    first.diagnostics["noncentring_tried"] = True  # the verdict's advice does not repeat it
    first.seconds += second.seconds
    first.vi.grad_evals = grads
    return first


def user_families(result) -> dict[str, str]:
    """The families by the user's parameters: x's is x_raw's, said so."""
    model = result.model
    raw = {d.name: lat.name for d, lat in zip(model.checked.program.parameters, model.latents,
                                              strict=True)}  # fmt: skip
    out = {}
    for name, lat_name in raw.items():
        family = result.families.get(lat_name)
        if family is None:
            continue
        out[name] = family if lat_name == name else f"{family} on {lat_name} (non-centred)"
    return out


def _text(value) -> str:
    return "non-finite" if value is None else f"{value:.6g}"
