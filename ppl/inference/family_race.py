"""Gamma or a Gaussian on the log scale, per positive latent, by their ELBO at the mode.

The gamma family's log x is skewed to the left (its log density a u - b e^u falls like e^u to
the right and only linearly to the left); a posterior on the log scale may lean the other way,
as a length-scale's under an inverse-gamma prior does (a long right tail: the GP regression
example's rho, standardised third derivatives at the mode of +0.2 to +1.0). There the gamma is
the worse shape and also the costlier one to solve: its fixed-draw rounds grew to 512 draws
(11,500 gradient evaluations, each a 405 x 405 Cholesky per draw) where a Gaussian q over the
same coordinates settled on 32 whitened draws (604). Both candidates are moment-matched to the
mode's Gaussian (its mean and Laplace sds: the starts the road solves from) and their ELBO
compared on the same probe draws, one latent switched at a time; a latent gets the Gaussian
only where that is higher by more than RACE_SE standard errors of the paired difference, so a
tie keeps the gamma (and the fits where it was chosen stay as they were).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ppl.families.registry import FAMILIES, GAUSSIAN
from ppl.inference.saa import floor_extended, whitened_draws
from ppl.inference.sgvb import Block, MixedFamily

#: Probe draws of the comparison (paired: common random numbers for both candidates).
RACE_DRAWS = 64
#: The Gaussian wins a latent when its ELBO is higher by this many standard errors.
RACE_SE = 2.0
#: At most this many latents are raced (each costs RACE_DRAWS log densities, no gradient).
RACE_MAX_LATENTS = 16


def _terms(log_joint: Callable, blocks: list[Block], dim: int, mode: np.ndarray,
           sd: np.ndarray, eps: np.ndarray) -> np.ndarray:  # fmt: skip
    """Per draw: log p + q's entropy, q moment-matched to N(mode, sd^2) block by block."""
    family = MixedFamily(blocks, dim)
    zeta, entropy = family.draws(family.from_gaussian(mode, sd), eps)
    with np.errstate(all="ignore"):
        lp = np.asarray(floor_extended(log_joint, family)(np.asarray(zeta)), dtype=float)
    return lp + float(entropy)


def gaussian_wins(log_joint: Callable, blocks: list[Block], dim: int, mode: np.ndarray,
                  sd: np.ndarray, seed: int, skip: list[str] = (),
                  run: bool = True) -> dict:  # fmt: skip
    """{"wins": the gamma-family latents (not in `skip`) whose Gaussian on the log scale has
    the higher ELBO at the mode (see the module's docstring), and the ties that join them
    (_ties), "ties": those, "scores": per raced latent the mean paired difference (Gaussian -
    gamma) and its standard error}; no race unless `run` (the caller's: a mode that is no
    suspect, with its Hessian)."""
    blocks = [replace(b, family=GAUSSIAN) if b.name in skip else b for b in blocks]
    raced = [b for b in blocks if FAMILIES[b.family].warm_started][:RACE_MAX_LATENTS]
    wins, scores = [], {}
    if not run or not raced or not (np.all(np.isfinite(mode)) and np.all(np.isfinite(sd))):
        return {"wins": wins, "ties": [], "scores": scores}
    eps = whitened_draws(RACE_DRAWS, dim, seed)
    base = _terms(log_joint, blocks, dim, mode, sd, eps)
    if not np.all(np.isfinite(base)):
        return {"wins": wins, "ties": [], "scores": scores}
    for block in raced:
        other = [replace(b, family=GAUSSIAN) if b.name == block.name else b for b in blocks]
        diff = _terms(log_joint, other, dim, mode, sd, eps) - base
        if not np.all(np.isfinite(diff)):
            continue
        gain, se = float(np.mean(diff)), float(np.std(diff) / np.sqrt(len(diff)))
        scores[block.name] = (gain, se)
        if gain > RACE_SE * se:
            wins.append(block.name)
    ties = _ties(raced, wins, scores)
    return {"wins": wins + ties, "ties": ties, "scores": scores}


def _ties(raced: list[Block], wins: list[str], scores: dict) -> list[str]:
    """The raced latents that tie (the Gaussian not lower by RACE_SE standard errors) where
    the winners hold most of the raced coordinates: with them q is Gaussian throughout and its
    road one round of whitened draws (the GP regression example's alpha and sigma, ties, kept
    the gamma's rounds of 8, 32, 128 ... draws for the two of them)."""
    won = sum(b.size for b in raced if b.name in wins)
    if not wins or 2 * won <= sum(b.size for b in raced):
        return []
    rest = [b.name for b in raced if b.name not in wins]
    tied = [n for n in rest if n in scores and scores[n][0] > -RACE_SE * scores[n][1]]
    return tied if len(tied) == len(rest) else []


def log_scale_choice(log_joint: Callable, blocks: list[Block], mode: np.ndarray, sd: np.ndarray,
                     seed: int, min_log_sd: float,
                     race: bool) -> tuple[list[Block], list[str], dict]:  # fmt: skip
    """The blocks with a Gaussian on the log scale for the gamma-family latents whose Laplace
    sd on the log scale is below `min_log_sd` (ppl.inference.auto.GAMMA_MIN_LOG_SD) and, where
    `race`, for those gaussian_wins picks; the names switched; the race's record."""
    too_sharp = [b.name for b in blocks if FAMILIES[b.family].warm_started
                 and np.min(sd[b.offset : b.offset + b.size]) < min_log_sd]  # fmt: skip
    dim = len(mode)
    record = gaussian_wins(log_joint, blocks, dim, mode, sd, seed, too_sharp, race)
    switched = too_sharp + record["wins"]
    blocks = [replace(b, family=GAUSSIAN) if b.name in switched else b for b in blocks]
    return blocks, switched, record


def log_scale_notes(polish: dict) -> list[str]:
    """The fit's notes on the positive latents that got a Gaussian on the log scale (the
    road's record `polish`: "gaussian_not_gamma", "family_race"), and why."""
    race = polish.get("family_race") or {}
    ties, by_elbo = race.get("ties", []), race.get("wins", [])
    won = [n for n in by_elbo if n not in ties]
    sharp = [n for n in polish.get("gaussian_not_gamma", []) if n not in by_elbo]
    notes = []
    if sharp:
        notes.append(f"auto: {', '.join(sharp)}: a Gaussian on the log scale, not a gamma: the "
                     "posterior at the mode is too concentrated for the gamma family (a shape "
                     "beyond 2.5e7)")  # fmt: skip
    if won:
        tied = f"; {', '.join(ties)} too (a tie: q is then Gaussian throughout)" if ties else ""
        notes.append(f"auto: {', '.join(won)}: a Gaussian on the log scale, not a gamma: its "
                     "ELBO at the mode is higher (the posterior leans right on the log scale)"
                     + tied)  # fmt: skip
    return notes
