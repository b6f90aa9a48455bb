"""The verdict on a fit: good, usable or not reliable, and which parameters are at fault and how.

Four independent checks, each able to make a fit "not reliable" (docs/diagnostics.md):

- PSIS k-hat (ppl.diagnostics.psis) against its threshold at S draws, min(1 - 1/log10 S, 0.7)
  (Vehtari et al. 2024). k-hat from S draws is noisy: when it lands within NEAR of 0.5 or of the
  threshold, it is recomputed from MORE times as many fresh draws of q (log-density evaluations
  only; the output draws stay as asked), unless the road already did (ppl.diagnostics.settle).
  Over the threshold, the importance-weighted moments of those draws against q's own name the
  coordinates at fault (none moved, k-hat < 1: usable).
- Hidden correlation, for a q independent across coordinates the posterior correlates
  (mean-field): its optimum's sds are too small by sqrt((A^-1)_ii / ((A_bb)^-1)_ii) for the
  precision A = -H at q's mean and i's block b in q (ppl.diagnostics.correlation for blocks of
  one). PSIS misses this: q sits inside the posterior, so its ratios p / q have a light tail. A
  factor over NARROW names the coordinate "too narrow".
- Reweighted sds of the output draws against q's, where k-hat allows weights (see
  _reweighted_moments).
- The road's own findings (`vi.polish["faults"]`: an unbounded density, a second mode, ...).

Then the summaries themselves: a scalar whose sd, from the draws as printed, rests on a tail too
heavy for them (ppl.diagnostics.mcse_tail) makes the fit "not reliable" too, even where q is
exact. `diagnostics["not_from_draws"]`, set before judge, exempts scalars whose summaries are
computed otherwise (quadrature).
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ppl.diagnostics.mcse_tail import (
    BATCH_SD,
    TAIL_SD,
    summary_batch_faults,
    summary_tail_faults,
)
from ppl.diagnostics.psis import GOOD
from ppl.diagnostics.settle import (
    SETTLED,
    khat_threshold,
    more_draws,
    near,
    record,
)
from ppl.inference.hessian import hessian_by_hvp
from ppl.ir.passes.noncentre import NAME as NONCENTRE

#: A mean-field sd too small by more than this factor is a fault (the benchmark's "good" allows
#: sd ratios down to 1 / 1.25 = 0.8).
NARROW = 1.25
#: Largest dimension whose dense Hessian the correlation check forms (D Hessian-vector products).
MAX_HESSIAN_DIM = 1000
#: A weighted sd beyond this factor of q's, in both halves of the draws, is a fault.
FAR = 2.0
#: The k-hat fault when no coordinate's weighted moments leave q's.
TAIL_ONLY = "heavy-tailed importance ratios"
#: Draws of q whose correlations say which coordinates q ties together (noise ~ 0.03).
PROBE_DRAWS, DEPENDENT = 1000, 0.2
#: Over the k-hat threshold, a coordinate whose weighted mean moved more than SHIFT q-sds, or
#: whose weighted sd is outside [1 / NARROW, NARROW] times q's, is named.
SHIFT = 0.3


#: The warning of a q with a Gibbs part (--method svi): why the verdict is "usable" at best.
IMPLICIT_TEXT = (
    "PSIS k-hat does not judge this fit: q's binary latents (and the slabs they switch) are "
    "drawn by Gibbs sweeps given the other parameters, a q with no density, so its ratios p / q "
    "cannot be formed; the verdict rests on the other checks and is 'usable' at best "
    "(docs/binary.md: the Gibbs road against exact enumeration)"
)


def judge(result, log_joint, rng: np.random.Generator) -> None:
    """Set result.diagnostics["verdict"] (good | usable | not reliable) and ["faults"] (a list
    of {"parameters", "how", "detail"}); add one warning naming them when not reliable."""
    diag = result.diagnostics
    if diag.get("judged"):
        diag.pop(SETTLED, None)  # draws for the redraw only
        return  # a refit's result (auto's full-rank candidate), judged by its own fit
    diag["judged"] = True
    faults: list[dict] = []
    implicit = getattr(result.vi, "implicit_q", False)
    if implicit:  # q's Gibbs part has no density: p / q, hence k-hat, judges nothing
        diag["khat_threshold"] = khat_threshold(int(diag["draws"]))
        diag["khat_not_used"] = True
        khat = 0.0
        result.warnings.append(IMPLICIT_TEXT)
        if diag.get("psis_skipped"):  # its locals are per-row means: not even a stand-in check
            result.warnings.append(diag["psis_skipped"])
    else:
        khat = _settled_khat(result, log_joint, rng, faults)
        faults += hidden_correlation_faults(result, log_joint, rng)
    if khat <= diag["khat_threshold"] and not implicit:
        faults += _reweighted_moments(result)
    polish = getattr(result.vi, "polish", None) or {}
    faults += [dict(f) for f in polish.get("faults") or []]
    threshold = diag["khat_threshold"]
    verdict = "good" if khat <= GOOD else "usable" if khat <= threshold else "not reliable"
    if implicit:
        verdict = "usable"  # at best: no check of q against p covers the Gibbs part
    if verdict == "not reliable" and diag.get("tail_only"):
        verdict = "usable"
    if faults:
        verdict = "not reliable"
    diag["psis_summaries"] = bool(
        verdict == "usable"
        and not implicit  # its log q is a stand-in: weights from it would bend the summaries
        and khat <= threshold
        and diag.get("log_weights") is not None
        and _stable(result)
    )
    # the summaries as they will be printed (weighted or not): is each sd a reliable estimate?
    weights = diag["log_weights"] if diag["psis_summaries"] else None
    exempt = diag.get("not_from_draws") or ()
    groups = getattr(result.vi, "draw_groups", None)
    if implicit and groups is not None:  # Gibbs draws: their own Monte Carlo error, by chains
        S = int(diag["draws"])
        tail, diag["summary_tail"] = summary_batch_faults(result.draws, groups(S), exempt)
    else:
        tail, diag["summary_tail"] = summary_tail_faults(result.draws, weights, exempt)
    faults += tail
    if tail:
        verdict = "not reliable"
    diag["verdict"], diag["faults"] = verdict, faults
    if verdict == "not reliable":
        result.warnings.append(unreliable_text(result))


def unreliable_text(result) -> str:
    """The warning of a fit judged not reliable: the faults, then advice the fit did not take
    (about q for faults of q, about the summaries for summaries too heavy-tailed for draws)."""
    faults = result.diagnostics["faults"]
    parts = [f"{', '.join(f['parameters']) or 'q'}: {f['how']} ({f['detail']})" for f in faults]
    return f"the fit is not reliable: {'; '.join(parts)}. {_what_to_do(result)}"


def advice(result) -> str | None:
    """What to do about a fit judged not reliable, and only what the fit did not already do
    (the record's "advice", ppl.outputs.record: the warning says the same); None for a fit
    judged good or usable."""
    if result.diagnostics.get("verdict") != "not reliable":
        return None
    return _what_to_do(result) or None


def _what_to_do(result) -> str:
    """Advice about q for faults of q, about the summaries for summaries too heavy-tailed."""
    faults = result.diagnostics.get("faults") or []
    tails = [f for f in faults if f.get("how", "").startswith(TAIL_SD)]
    batch = [f for f in faults if f.get("how", "").startswith(BATCH_SD)]
    said = [_advice(result)] if len(tails) + len(batch) < len(faults) else []
    said += [tail_advice(result, f) for f in tails]
    if batch:
        said.append(f"Draw more (--draws, now {result.diagnostics.get('draws')}): the effective "
                    "sample size grows with the draws.")  # fmt: skip
    return " ".join(said)


def tail_advice(result, fault: dict) -> str:
    """What would make the sd of a heavy-tailed scalar reliable; not more draws (their sd
    converges too slowly to help) nor another q when q already fits (k-hat good, no fault of q)."""
    diag = result.diagnostics
    names = ", ".join(fault["parameters"])
    fits = diag.get("khat", np.inf) <= GOOD and all(
        f.get("how", "").startswith(TAIL_SD) for f in diag.get("faults") or []
    )
    q = f"q itself fits (k-hat {diag['khat']:.2f}); " if fits else ""
    return (f"{q}for {names}, more draws will not make the sd reliable (a tail this heavy "
            "converges too slowly): read their quantiles (q5, q50, q95) instead, summarise a "
            "lighter-tailed scale (the log of a positive parameter; a funnel's v and x_raw "
            "rather than x), or give the model proper, lighter-tailed priors if the posterior "
            "should have a finite variance.")  # fmt: skip


def _advice(result) -> str:
    """Advice the fit has not already taken: a full-rank family only after a factorised q that
    no Gaussian with correlations was tried against (the road's escalation records that it
    tried one: `correlations_tried`), non-centred scales only where the fit did not non-centre
    (the road's pass, or its refit that was not better: `noncentring_tried`)."""
    diag = result.diagnostics
    blocks, tried = diag.get("q_blocks"), diag.get("correlations_tried")
    if blocks is not None and blocks > 1 and not tried:
        return ("A full-rank family (--method fullrank) can follow correlations; check it against "
                "a sampler (NUTS) where you can.")  # fmt: skip
    if blocks == 1:
        done = "q already followed every correlation: "
    elif tried:
        done = "a Gaussian with correlations was fitted too and was not better: "
    else:
        done = ""
    model = getattr(result, "model", None)
    passes = getattr(getattr(model, "ir", None), "passes", ())
    if NONCENTRE in passes or diag.get("noncentring_tried"):
        done += ("the model was non-centred where its data are weak; " if NONCENTRE in passes
                 else "a non-centred refit was not better; ")  # fmt: skip
        ways = "better-identified parameters, proper priors"
    else:
        ways = "non-centred scales, better-identified parameters, proper priors"
    return f"{done}reparameterise the model ({ways}) or check against a sampler (NUTS)."


def _settled_khat(result, log_joint, rng, faults: list[dict]) -> float:
    """k-hat of the output draws, redrawn from MORE times as many when it is near a threshold
    (or over it, to name the coordinates at fault), the output draws among them; or as the
    road settled it (ppl.diagnostics.settle)."""
    diag = result.diagnostics
    S, khat = int(diag["draws"]), float(diag["khat"])
    settled = diag.pop(SETTLED, None)
    over = False
    if settled is None:
        diag["khat_threshold"] = khat_threshold(S)
        over = not khat <= diag["khat_threshold"]
        if near(khat, S) or over:
            # fresh draws, not the output ones among them: the docs' examples keep their k-hat
            got = more_draws(result.vi, log_joint, rng, None, diag)
            if got is not None and got[1]["log_weights"] is not None:
                record(diag, *got)
                settled = diag.pop(SETTLED)
    if settled is None:
        if over:
            faults.append(_tail_fault(result, None, None, khat))
        return khat
    everything, more = settled
    khat, n = float(diag["khat"]), int(diag["khat_draws"])
    if not khat <= diag["khat_threshold"]:
        fault = _tail_fault(result, everything, more["log_weights"], khat)
        if fault["how"] == TAIL_ONLY and khat < 1:
            diag["tail_only"] = True  # the weighted moments agree with q's: usable
            result.warnings.append(
                f"PSIS k-hat {khat:.2f} from {n} draws is over {diag['khat_threshold']:.2f}, but "
                f"the importance-weighted means and sds of those draws agree with q's (within "
                f"{SHIFT} sd, ratios within {NARROW}x): q's summaries are usable; its far tails "
                "are not"
            )  # fmt: skip
        else:
            faults.append(fault)
    return khat


def _tail_fault(result, zeta, log_weights, khat: float) -> dict:
    """The k-hat fault, naming the coordinates whose importance-weighted moments leave q's."""
    detail = (f"PSIS k-hat {khat:.2f} over {result.diagnostics['khat_threshold']:.2f}: the "
              "ratios p / q of q's draws have a heavy tail, q misses posterior mass")  # fmt: skip
    names, how = [], TAIL_ONLY
    if zeta is not None:
        w = np.exp(log_weights - np.max(log_weights))
        w /= w.sum()
        mean, sd = zeta.mean(axis=0), zeta.std(axis=0)
        wmean = w @ zeta
        wsd = np.sqrt(np.maximum(w @ (zeta - wmean) ** 2, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            shift, ratio = np.abs(wmean - mean) / sd, wsd / sd
        wide, narrow = ratio < 1 / NARROW, ratio > NARROW
        moved = shift > SHIFT
        names = _names(result, wide | narrow | moved)
        kinds = [k for k, m in (("too narrow", narrow), ("too wide", wide), ("shifted", moved))
                 if m.any()]  # fmt: skip
        if kinds:
            how = ", ".join(kinds)
    return {"parameters": names or _names(result, None), "how": how, "detail": detail}


def hidden_correlation_faults(result, log_joint, rng) -> list[dict]:
    """A q that factorises over blocks of coordinates where the posterior correlates them:
    its sds are too small (see above). The blocks are where q's own draws correlate."""
    if any(lat.binary for lat in result.model.latents):
        return []
    L = getattr(result.vi, "scale_tril", None)
    if L is not None and np.ndim(L) == 2 and np.any(np.tril(L, -1) != 0):
        # a full-rank q (or a flow) holds every correlation it found worth having; -H at its mean
        # is not its optimum's condition (E_q[-H] is), so the check has nothing to say
        result.diagnostics["q_blocks"] = 1
        return []
    probe = np.asarray(result.vi.sample(rng, PROBE_DRAWS), dtype=float)
    dim = probe.shape[1]
    sd = probe.std(axis=0)
    free = np.isfinite(sd) & (sd > 0)
    if free.sum() < 2 or dim > MAX_HESSIAN_DIM or not np.all(np.isfinite(probe[:, free])):
        return []
    try:
        with np.errstate(all="ignore"):
            A = -hessian_by_hvp(log_joint, probe.mean(axis=0))
    except Exception:  # noqa: BLE001 - a model without second derivatives: no check, no fault
        return []
    linked = np.abs(np.nan_to_num(np.corrcoef(probe[:, free], rowvar=False))) > DEPENDENT
    blocks, label = connected_components(csr_matrix(linked), directed=False)
    result.diagnostics["q_blocks"] = int(blocks)
    factor = understated_sd(A[np.ix_(free, free)], label)
    if factor is None:
        return []
    full = np.ones(dim)
    full[free] = factor
    result.diagnostics["sd_understated"] = float(full.max())
    bad = full > NARROW
    if not bad.any():
        return []
    return [{
        "parameters": _names(result, bad),
        "how": "too narrow",
        "detail": (f"the posterior correlates these coordinates, which q, independent across "
                   f"them, cannot follow: its sds are too small by up to {full.max():.2g}x "
                   "(the curvature -H at q's mean)"),
    }]  # fmt: skip


def understated_sd(precision: np.ndarray, label: np.ndarray) -> np.ndarray | None:
    """Per coordinate, sqrt((A^-1)_ii / ((A_bb)^-1)_ii) for the posterior precision A, where b is
    the block of coordinates (`label`) q ties i to (q independent across blocks, each block's
    optimum matching A_bb): the factor by which q's sd is too small. 1 for a full-rank q;
    hidden_correlation's factor for a mean-field q. None when A is not positive definite."""
    A = np.asarray(precision, dtype=float)
    if not np.all(np.isfinite(A)) or np.any(np.diag(A) <= 0):
        return None
    d = np.sqrt(np.diag(A))
    A = 0.5 * (A + A.T) / np.outer(d, d)
    try:
        L = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return None
    marginal = np.sum(np.linalg.inv(L) ** 2, axis=0)
    blockwise = np.empty(len(A))
    for c in np.unique(label):
        idx = np.flatnonzero(label == c)
        blockwise[idx] = np.diag(np.linalg.inv(A[np.ix_(idx, idx)]))
    return np.sqrt(np.maximum(marginal / blockwise, 1.0))


def _reweighted_moments(result) -> list[dict]:
    """Where the weights are reliable (k-hat under the threshold), the PSIS-weighted sd of a
    parameter's output draws against q's own: a ratio beyond FAR in both halves of the draws
    (so not noise) is q "too wide" or "too narrow". Catches a q whose bulk sits where the
    posterior has little mass on the constrained scale (a gamma(0.01, 1.01) posterior: q's mean
    of lambda 10^4, the posterior's 0.01, k-hat under 0.5)."""
    lw = result.diagnostics.get("log_weights")
    if lw is None:
        return []
    lw = np.asarray(lw, dtype=float)
    half = len(lw) // 2
    if half < 50:
        return []
    wide, narrow = [], []
    for lat in result.model.latents:
        x = result.draws.get(lat.name)
        if x is None or lat.binary or lat.hyper or len(x) != len(lw):
            continue
        x = np.asarray(x, dtype=float).reshape(len(x), -1)
        ratios = [_sd_ratio(x[part], lw[part]) for part in (slice(0, half), slice(half, None))]
        if all(np.any(r < 1 / FAR) for r in ratios):
            wide.append(lat.name)
        elif all(np.any(r > FAR) for r in ratios):
            narrow.append(lat.name)
    detail = ("the PSIS-weighted sd of its draws is {} than q's in both halves of the draws: q's "
              "mass sits where the posterior's does not")  # fmt: skip
    return [{"parameters": names, "how": how, "detail": detail.format(f"{word} {FAR}x")}
            for names, how, word in ((wide, "too wide", "under 1 /"), (narrow, "too narrow",
                                     "over"))
            if names]  # fmt: skip


def _sd_ratio(x: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """Per column, the importance-weighted sd over the plain sd (1 where q's sd is 0)."""
    w = np.exp(lw - lw.max())
    w /= w.sum()
    m = w @ x
    wsd = np.sqrt(np.maximum(w @ (x - m) ** 2, 0.0))
    sd = x.std(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 0, wsd / sd, 1.0)


def _names(result, mask) -> list[str]:
    """Latent names of the unconstrained coordinates in `mask` (every latent when None)."""
    out = []
    for lat in result.model.latents:
        if mask is None or np.any(mask[lat.offset : lat.offset + lat.size]):
            out.append(lat.name)
    return out


def _stable(result) -> bool:
    """The PSIS-weighted means of the output draws' two halves agree within 3 MCSE."""
    lw = np.asarray(result.diagnostics["log_weights"], dtype=float)
    columns = [np.asarray(v, dtype=float).reshape(len(v), -1) for v in result.draws.values()
               if np.asarray(v).dtype.kind in "fiu" and len(v) == len(lw)]  # fmt: skip
    if not columns:
        return False
    matrix = np.concatenate(columns, axis=1)
    half = len(lw) // 2
    if half < 50 or matrix.shape[0] != len(lw):
        return False
    est = []
    for part in (slice(0, half), slice(half, 2 * half)):
        w = np.exp(lw[part] - lw[part].max())
        w /= w.sum()
        m = w @ matrix[part]
        est.append((m, np.sqrt(w**2 @ (matrix[part] - m) ** 2)))
    (m1, e1), (m2, e2) = est
    with np.errstate(invalid="ignore"):
        ok = np.abs(m1 - m2) <= 3 * np.sqrt(e1**2 + e2**2) + 1e-12 * (1 + np.abs(m1))
    return bool(np.all(ok))
