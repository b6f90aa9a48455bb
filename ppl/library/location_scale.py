"""Which of Stan's distributions are location-scale families: `x ~ d(..., loc, scale)` is
`x = loc + scale * z` with `z ~ d(..., 0, 1)` (lognormal: `log x`, with `z ~ normal(0, 1)`).
The non-centring pass (ppl.ir.passes.noncentre) rewrites statements by this table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocationScale:
    """Where a distribution's location and scale are among its arguments, and the standard
    distribution of z (None: the distribution itself, with location 0 and scale 1)."""

    location: int
    scale: int
    standard: str | None = None
    log: bool = False  # the family is that of log x (lognormal): x = exp(loc + scale * z)


LOCATION_SCALE: dict[str, LocationScale] = {
    "normal": LocationScale(0, 1),
    "lognormal": LocationScale(0, 1, standard="normal", log=True),
    "student_t": LocationScale(1, 2),
    "cauchy": LocationScale(0, 1),
    "double_exponential": LocationScale(0, 1),
    "logistic": LocationScale(0, 1),
}
