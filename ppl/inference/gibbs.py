"""Gibbs sweeps over binary latents, and the continuous latents they switch, from the model's terms.

A binary coordinate z is drawn from its exact full conditional: its log-odds is
log p(z = 1, rest) - log p(z = 0, rest), a difference of two log-joint evaluations in which only the
terms of z's Markov blanket differ. No model-specific code: the evaluations are the compiled
model's own elementwise terms (``model.log_terms``).

*Pairs.* A continuous latent with the shape of a binary one (the slab ``w`` of ``z .* w``) is its
partner, coordinate by coordinate, when the log joint is quadratic in it given the rest (checked
numerically at the start: a fourth point on the fitted parabola). Then (z, w) is drawn jointly:
z from p(z | rest) with w integrated out in closed form (for each value of z the log joint is a
parabola in w, whose integral is exp(e0 + g^2 / 2c) sqrt(2 pi / c)), then w from its Gaussian
conditional. Single-site Gibbs on z given w mixes badly (an excluded slab sits at a value drawn
from its prior, so switching it on is rarely accepted); the pair update does not have that
problem. A continuous local latent with no binary partner is drawn coordinate by coordinate from
its conditional if that is Gaussian (the same check); otherwise the road refuses the model.

*Rows in parallel.* When the data have rows and the latents indexed by them (local latents) are
independent across rows given the rest, coordinate t of every row is updated at once: one
vectorised evaluation per point gives every row's conditional. Which term elements belong to
which row is found by a probe (ppl.inference.blankets finds blankets the same way): the local
coordinates of the rows whose index has bit b set are moved, for every bit b, and an element's row
is read off the bits under which it changed; a random pattern then checks the map. So a sweep
over a batch of B rows with K local binaries costs K evaluations of the batch (6 points each with
a partner, 2 without), not B K.

Global binary latents (spike-and-slab's indicators) are updated one coordinate at a time, with
S chains in parallel on the draws axis.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.special import expit

from ppl.errors import ModelError
from ppl.inference.blankets import _layout, stack_terms

_H = 1.0  # offset of the points a parabola is fitted through (exact for a quadratic)
_PAIR = [(z, d) for z in (0.0, 1.0) for d in (-_H, 0.0, _H)]  # (z, w offset) per point


class GibbsStructureError(ModelError):
    """The model's local latents are not independent across rows, or not conditionally
    Gaussian where the sweep needs them to be."""


@dataclass
class Unit:
    """Coordinates updated together: one per row for a local class (B columns each), one for a
    global unit. ``binary`` / ``cont`` are columns of the (batch) model's vector, or None."""

    binary: np.ndarray | None
    cont: np.ndarray | None
    name: str = ""

    @property
    def size(self) -> int:
        return len(self.binary if self.binary is not None else self.cont)


@dataclass
class GibbsPlan:
    """What a sweep updates, in order: the local classes (rows in parallel), then the global
    units (one coordinate at a time)."""

    model: object  # the (batch) model the columns index
    local: list[Unit]
    globals_: list[Unit]
    rows: int  # B, the rows of the batch (0: no local latents)
    row_map: sparse.csr_matrix | None = None  # (M elements, B rows): which row owns an element
    sampled: list[bool] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    evaluations: int = 0  # model calls made by sweeps

    @property
    def binary_columns(self) -> np.ndarray:
        cols = [u.binary for u in self.local + self.globals_ if u.binary is not None]
        return np.concatenate(cols) if cols else np.zeros(0, dtype=int)

    @property
    def columns(self) -> np.ndarray:
        """Every column a sweep draws."""
        cols = [c for u in self.local + self.globals_ for c in (u.binary, u.cont) if c is not None]
        return np.concatenate(cols) if cols else np.zeros(0, dtype=int)


def _partners(latents, binary, local: set[str]) -> dict[str, str]:
    """binary latent -> continuous latent of the same shape and locality, unconstrained (its
    coordinates are its values), not claimed by an earlier binary latent."""
    taken: set[str] = set()
    out = {}
    for b in binary:
        for lat in latents:
            same = lat.shape == b.shape and (lat.name in local) == (b.name in local)
            if not lat.binary and same and lat.kind == "identity" and lat.name not in taken:
                out[b.name] = lat.name
                taken.add(lat.name)
                break
    return out


def plan_gibbs(model, local: set[str], rows: int, pair: bool = True) -> GibbsPlan:
    """The units of a sweep over `model`'s binary latents, their partners and the continuous
    local latents; `local` names the latents with the rows (`rows` of them) as leading axis."""
    latents = {lat.name: lat for lat in model.latents}
    binary = [lat for lat in model.latents if lat.binary and lat.size]
    partner = _partners(model.latents, binary, local) if pair else {}
    claimed = set(partner.values())
    local_units, global_units = [], []

    def columns(lat, t: int) -> np.ndarray:
        per_row = lat.size // rows
        return lat.offset + np.arange(rows) * per_row + t

    for lat in binary:
        other = latents.get(partner.get(lat.name, ""))
        if lat.name in local:
            for t in range(lat.size // rows):
                cont = None if other is None else columns(other, t)
                local_units.append(Unit(columns(lat, t), cont, lat.name))
        else:
            for i in range(lat.size):
                cont = None if other is None else np.array([other.offset + i])
                global_units.append(Unit(np.array([lat.offset + i]), cont, lat.name))
    for lat in model.latents:
        if lat.name in local and not lat.binary and lat.name not in claimed and lat.size:
            for t in range(lat.size // rows):
                local_units.append(Unit(None, columns(lat, t), lat.name))
    plan = GibbsPlan(model, local_units, global_units, rows if local_units else 0)
    return plan


def map_rows(plan: GibbsPlan, x: np.ndarray, rng: np.random.Generator) -> None:
    """Find which row each sampled term element belongs to (module docstring), at state `x`
    (one row of the vector); GibbsStructureError if the rows are not separate."""
    model, B = plan.model, plan.rows
    _, plan.sampled, plan.sizes = _layout(model, x)
    if not B:
        return
    bits = max(1, int(np.ceil(np.log2(B))))
    row_index = np.arange(B)
    patterns = [np.ones(B, dtype=bool)] + [(row_index >> b) & 1 == 1 for b in range(bits)]
    check = rng.uniform(size=B) < 0.5
    patterns.append(check)
    X = np.repeat(x[None], len(patterns) + 1, axis=0)
    for p, rows in enumerate(patterns, start=1):
        for u in plan.local:
            if u.binary is not None:
                X[p, u.binary[rows]] = 1.0 - X[p, u.binary[rows]]
            if u.cont is not None:
                X[p, u.cont[rows]] += 0.5 + rng.uniform(size=int(rows.sum()))
    with np.errstate(all="ignore"):
        total, terms = model.log_terms(X)
    T = stack_terms(terms, plan.sampled, plan.sizes, len(X))
    moved = ~np.isclose(T[1:], T[0], rtol=1e-12, atol=1e-12, equal_nan=True)
    is_row = moved[0]
    code = np.zeros(T.shape[1], dtype=int)
    for b in range(bits):
        code |= moved[1 + b].astype(int) << b
    owner = np.where(is_row, code, -1)
    bad = is_row & (owner >= B)
    expected = np.where(is_row, check[np.clip(owner, 0, B - 1)], False)
    if bad.any() or np.any(moved[-1] != expected):
        raise GibbsStructureError(
            "the local latents are not independent across rows given the rest (a term moved "
            "with rows it should not depend on); the Gibbs road needs rows that are"
        )
    elements = np.flatnonzero(is_row)
    plan.row_map = sparse.csr_matrix(
        (np.ones(len(elements)), (elements, owner[elements])), shape=(T.shape[1], B)
    )


def _energies(plan: GibbsPlan, X: np.ndarray, per_row: bool) -> np.ndarray:
    """(n, B) each row's log-joint terms, or (n, 1) the whole log joint, at the states X."""
    plan.evaluations += 1
    with np.errstate(all="ignore"):
        total, terms = plan.model.log_terms(X)
    if not per_row:
        return total[:, None]
    T = stack_terms(terms, plan.sampled, plan.sizes, len(X))
    T = np.where(np.isnan(T), -np.inf, T)
    return np.asarray(plan.row_map.T @ T.T).T


def _parabola(em, e0, ep):
    """Slope g, curvature c > 0 and log of the integral of exp(e(d)) (up to sqrt(2 pi)) for the
    parabola e(d) = e0 + g d - c d^2 / 2 through d = -H, 0, H."""
    g = (ep - em) / (2 * _H)
    c = (2 * e0 - ep - em) / _H**2
    with np.errstate(all="ignore"):
        log_int = e0 + g * g / (2 * c) - 0.5 * np.log(c)
    return g, c, np.where(c > 0, log_int, np.nan)


def _update(plan: GibbsPlan, X: np.ndarray, u: Unit, rng: np.random.Generator, per_row: bool):
    """Draw unit u's coordinates from their exact conditional in every chain (row of X), in
    place; the conditional P(z = 1) of its binary coordinates (S, n), or None."""
    S = X.shape[0]
    if u.binary is not None and u.cont is None:
        points = [(0.0, None), (1.0, None)]
    elif u.binary is None:
        points = [(None, d) for d in (-_H, 0.0, _H)]
    else:
        points = _PAIR
    P = np.repeat(X[:, None, :], len(points), axis=1)
    base = X[:, u.cont] if u.cont is not None else None
    for j, (z, d) in enumerate(points):
        if z is not None:
            P[:, j, u.binary] = z
        if d is not None:
            P[:, j, u.cont] = base + d
    E = _energies(plan, P.reshape(S * len(points), -1), per_row).reshape(S, len(points), -1)
    if u.cont is None:
        with np.errstate(invalid="ignore"):
            p = expit(E[:, 1] - E[:, 0])
        X[:, u.binary] = (rng.uniform(size=p.shape) < p).astype(float)
        return p
    if u.binary is None:
        g, c, _ = _parabola(E[:, 0], E[:, 1], E[:, 2])
        _check_gaussian(c, u)
        X[:, u.cont] = base + g / c + rng.standard_normal(c.shape) / np.sqrt(c)
        return None
    (g0, c0, l0), (g1, c1, l1) = _pair_parabolas(E)
    _check_gaussian(np.minimum(c0, c1), u)
    with np.errstate(invalid="ignore"):
        p = expit(l1 - l0)
    z = rng.uniform(size=p.shape) < p
    g, c = np.where(z, g1, g0), np.where(z, c1, c0)
    X[:, u.binary] = z.astype(float)
    X[:, u.cont] = base + g / c + rng.standard_normal(c.shape) / np.sqrt(c)
    return p


def _pair_parabolas(E: np.ndarray):
    """(g, c, log integral) at z = 0 and at z = 1 from the six points of _PAIR."""
    return _parabola(E[:, 0], E[:, 1], E[:, 2]), _parabola(E[:, 3], E[:, 4], E[:, 5])


def pair_conditionals(plan: GibbsPlan, X: np.ndarray, u: Unit, per_row: bool = True):
    """For a local pair unit at X: the log-odds of z with w integrated out, and the slope g,
    curvature c and current value of w for z = 1 (each (S, B)); the exact six-point answer.
    A global unit (`per_row` False): each (S, 1)."""
    S = X.shape[0]
    P = np.repeat(X[:, None, :], len(_PAIR), axis=1)
    base = X[:, u.cont]
    for j, (z, d) in enumerate(_PAIR):
        P[:, j, u.binary] = z
        P[:, j, u.cont] = base + d
    E = _energies(plan, P.reshape(S * len(_PAIR), -1), per_row).reshape(S, len(_PAIR), -1)
    (_, _, l0), (g1, c1, l1) = _pair_parabolas(E)
    return l1 - l0, g1, c1, base


def _check_gaussian(c: np.ndarray, u: Unit) -> None:
    if not np.all(c > 0):
        raise GibbsStructureError(
            f"the conditional of '{u.name}' given the rest is not a proper Gaussian "
            "(the log joint is not concave in it); the Gibbs road cannot draw it exactly"
        )


def sweep(plan: GibbsPlan, X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One sweep over every unit, in place on X (S, D); the conditional P(z = 1) each binary
    coordinate was drawn from, (S, len(plan.binary_columns))."""
    probs = []
    for u in plan.local:
        p = _update(plan, X, u, rng, per_row=True)
        if p is not None:
            probs.append(p)
    for u in plan.globals_:
        p = _update(plan, X, u, rng, per_row=False)
        if p is not None:
            probs.append(p)
    return np.concatenate(probs, axis=1) if probs else np.zeros((X.shape[0], 0))


def check_quadratic(plan: GibbsPlan, X: np.ndarray) -> list[str]:
    """Names of latents in a unit with a continuous part whose log joint is not a parabola in it
    at X (a fourth point, 2H, off the parabola through -H, 0, H), at both values of the binary."""
    bad: list[str] = []
    seen: dict[str, int] = {}
    units = plan.local + plan.globals_
    for i, u in enumerate(units):
        if u.cont is None or u.name in bad:
            continue
        # the first two and the last unit of each latent: its units share one statement
        seen[u.name] = seen.get(u.name, 0) + 1
        last = i + 1 == len(units) or units[i + 1].name != u.name
        if seen[u.name] > 2 and not last:
            continue
        per_row = i < len(plan.local)
        for z in (0.0, 1.0) if u.binary is not None else (None,):
            P = np.repeat(X[:1], 4, axis=0)
            if z is not None:
                P[:, u.binary] = z
            for j, d in enumerate((-_H, 0.0, _H, 2 * _H)):
                P[j, u.cont] = X[0, u.cont] + d
            E = _energies(plan, P, per_row)
            g, c, _ = _parabola(E[0], E[1], E[2])
            predicted = E[1] + 2 * _H * g - 2 * c * _H**2
            scale = 1.0 + np.abs(E[1]) + np.abs(c) * _H**2
            if not np.all(np.abs(predicted - E[3]) <= 1e-6 * scale) or not np.all(c > 0):
                bad.append(u.name)
                break
    return bad


def coupled(model, rng: np.random.Generator, per_latent: int = 32) -> bool:
    """Whether two binary coordinates share a term of the log joint (so their posterior is
    dependent and a factorised q(z) cannot show it): a probe (ppl.inference.blankets) of the
    first `per_latent` coordinates of each binary latent and `per_latent` spread over it (a
    column-major array's neighbours in a row are far apart), at a random point and at it with
    the binaries flipped."""
    from ppl.inference.blankets import TermLayoutError, find_blankets
    from ppl.ir.graph import build_graph
    from ppl.runtime.signals import NeedsPerSample

    columns = []
    for lat in model.latents:
        if lat.binary and lat.size:
            picks = np.arange(min(per_latent, lat.size))
            spread = np.linspace(0, lat.size - 1, min(per_latent, lat.size)).astype(int)
            columns.append(lat.offset + np.union1d(picks, spread))
    if not columns:
        return False
    columns = np.concatenate(columns)
    if len(columns) < 2:
        return False
    point = model.random_init(rng)
    point[columns] = rng.integers(0, 2, len(columns))
    binary = np.zeros(model.dim, dtype=bool)
    for lat in model.latents:
        binary[lat.offset : lat.offset + lat.size] = lat.binary
    points = [point, np.where(binary, 1.0 - point, point)]
    try:
        blankets = find_blankets(model, build_graph(model.checked, model), points, rng, columns)
    except (TermLayoutError, NeedsPerSample):  # no elementwise terms to tell: the mixed fit
        return False
    shared = np.asarray(blankets.matrix[:, columns].sum(axis=1)).ravel()
    return bool(np.any(shared >= 2))
