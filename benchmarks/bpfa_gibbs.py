"""Hand-written numpy references for BPFA (Shah, Knowles & Ghahramani 2015, eq. 5): an
uncollapsed Gibbs sampler, and the paper's Gibbs-SSVI, MF-SSVI and MF-SVI written out for this
one model. They are what ppl's generic `svi` method is measured against in the benchmarks
(bpfa_synthetic.py, bpfa_paper_inpainting.py): the "Gibbs sampler" of the paper's sec. 5.1, and
the same algorithms with the model's conditionals by hand.

The model is models/bpfa/bpfa.model's: y_i = (z_i .* w_i) Phi + e_i on the observed entries
(mask M), z_ik ~ Bernoulli(pi_k), pi_k ~ Beta(a / K, b (K - 1) / K), w_ik ~ N(0, 1 / gamma_w),
Phi_kp ~ N(0, 1 / P), gamma_w ~ Gamma(1, 1), gamma_obs ~ Gamma(1, 0.01) (shape, rate).

Every update is vectorised over rows: a sweep loops over the K atoms only. The local update of
(z_ik, w_ik) is blocked: w_ik integrated out for z's conditional (Gaussian), then w_ik drawn
given z_ik, so a sweep is exact Gibbs on (z, w) (tests/models/test_bpfa_gibbs.py checks it
against enumeration). R holds the masked residual M .* (Y - (Z .* W) Phi), kept incrementally.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import numpy as np
from scipy.special import digamma, expit

C0, D0, E0, F0 = 1.0, 0.01, 1.0, 1.0  # gamma_obs ~ Gamma(C0, D0), gamma_w ~ Gamma(E0, F0)


@dataclasses.dataclass
class Globals:
    """A point value of the global latents (a draw, or q's means)."""

    Phi: np.ndarray  # (K, P)
    pi: np.ndarray  # (K,)
    gamma_w: float
    gamma_obs: float


def prior_draw(N: int, P: int, K: int, rng: np.random.Generator, a: float = 1.0,
               b: float = 1.0, gamma_w: float = 1.0, gamma_obs: float = 100.0):  # fmt: skip
    """(Y, Z, W, Phi, pi): data from the BPFA prior at fixed precisions (the paper's sec. 5.1)."""
    pi = rng.beta(a / K, b * (K - 1) / K, size=K)
    Phi = rng.normal(0, 1 / np.sqrt(P), size=(K, P))
    Z = rng.uniform(size=(N, K)) < pi
    W = rng.normal(0, 1 / np.sqrt(gamma_w), size=(N, K))
    Y = (Z * W) @ Phi + rng.normal(0, 1 / np.sqrt(gamma_obs), size=(N, P))
    return Y, Z, W, Phi, pi


def residual(Y: np.ndarray, M: np.ndarray, L: np.ndarray, Phi: np.ndarray) -> np.ndarray:
    """M .* (Y - L Phi), with Y's unobserved entries ignored (they may hold anything)."""
    return np.where(M, Y - L @ Phi, 0.0)


def gibbs_local(R: np.ndarray, M: np.ndarray, Z: np.ndarray, W: np.ndarray, g: Globals,
                rng: np.random.Generator, Mf: np.ndarray | None = None) -> None:  # fmt: skip
    """One sweep over k of blocked (z_ik, w_ik) draws for every row at once; Z, W, R in place.

    z's log-odds with w integrated out: logit(pi_k) + log N(0; ...) difference =
    logit(pi_k) + 0.5 log(gamma_w / lam) + 0.5 lam mu^2, lam = gamma_w + gamma_obs sum_p M phi^2,
    mu = gamma_obs sum_p M phi r^{-k} / lam; then w | z = 1 ~ N(mu, 1 / lam), w | z = 0 ~ prior.
    Everything that does not depend on the residual (lam, the random numbers) is computed for all
    k at once before the loop, so the loop is a few small numpy calls per atom (`Mf`: M as
    floats, if the caller has it).
    """
    Mf = M.astype(float) if Mf is None else Mf
    B, K = Z.shape
    S2 = (g.Phi**2) @ Mf.T  # (K, B): sum_p M phi_k^2, rows contiguous per atom
    lam = g.gamma_w + g.gamma_obs * S2
    ratio = g.gamma_obs / lam
    # z = 1 iff u < expit(logodds), i.e. logit(u) - logit(pi) - 0.5 log(gamma_w / lam) <
    # 0.5 lam mu^2 = 0.5 ratio h^2 gamma_obs: the threshold on ratio h^2, for all k at once
    u = rng.uniform(size=(K, B))
    logit_pi = (np.log(g.pi) - np.log1p(-g.pi))[:, None]
    threshold = (np.log(u) - np.log1p(-u) - logit_pi - 0.5 * np.log(g.gamma_w / lam)) * (
        2.0 / g.gamma_obs
    )
    eps = rng.standard_normal((K, B))
    slab_noise, prior_noise = eps / np.sqrt(lam), eps / np.sqrt(g.gamma_w)
    Zt, Wt = np.empty((K, B), bool), np.empty((K, B))
    Lt = np.ascontiguousarray((Z * W).T)
    for k in range(K):
        phi, old = g.Phi[k], Lt[k]
        h = R @ phi
        h += old * S2[k]  # (r^{-k}) . phi, without adding old back to R
        mu = ratio[k] * h
        z = Zt[k] = mu * h > threshold[k]
        w = Wt[k] = np.where(z, mu + slab_noise[k], prior_noise[k])
        delta = z * w - old
        moved = np.flatnonzero(delta)
        if len(moved) > B // 4:
            R -= Mf * np.multiply.outer(delta, phi)
        elif len(moved):
            R[moved] -= Mf[moved] * np.multiply.outer(delta[moved], phi)
    Z[:], W[:] = Zt.T, Wt.T


def sample_phi(R: np.ndarray, M: np.ndarray, L: np.ndarray, g: Globals,
               rng: np.random.Generator) -> None:  # fmt: skip
    """Phi_k | rest for each k in turn (independent over pixels p); g.Phi and R in place."""
    P = g.Phi.shape[1]
    for k in range(g.Phi.shape[0]):
        rows = np.flatnonzero(L[:, k])
        phi = g.Phi[k]
        if not len(rows):
            g.Phi[k] = rng.normal(0, 1 / np.sqrt(P), size=P)
            continue
        lk, Mk = L[rows, k], M[rows].astype(float)
        Rk = R[rows] + Mk * np.outer(lk, phi)  # residual without atom k
        prec = P + g.gamma_obs * (lk**2 @ Mk)
        mean = g.gamma_obs * (lk @ Rk) / prec
        g.Phi[k] = mean + rng.standard_normal(P) / np.sqrt(prec)
        R[rows] = Rk - Mk * np.outer(lk, g.Phi[k])


def sample_globals_rest(R: np.ndarray, M: np.ndarray, Z: np.ndarray, W: np.ndarray, g: Globals,
                        a: float, b: float, rng: np.random.Generator) -> None:  # fmt: skip
    """pi, gamma_w, gamma_obs from their conjugate conditionals; g in place."""
    N, K = Z.shape
    nz = Z.sum(axis=0)
    g.pi = np.clip(rng.beta(a / K + nz, b * (K - 1) / K + N - nz), 1e-300, 1 - 1e-16)
    g.gamma_w = rng.gamma(E0 + N * K / 2, 1 / (F0 + 0.5 * np.sum(W**2)))
    g.gamma_obs = rng.gamma(C0 + M.sum() / 2, 1 / (D0 + 0.5 * np.sum(R**2)))


Monitor = Callable[[str, float, int, np.ndarray], None]  # (label, seconds, iteration, recon)


def gibbs_sampler(Y: np.ndarray, M: np.ndarray, K: int, *, iterations: int, burnin: int,
                  rng: np.random.Generator, a: float = 1.0, b: float = 1.0,
                  monitor: Monitor | None = None, every: int = 1,
                  time_budget: float = np.inf,
                  state: Callable[[int, np.ndarray, Globals], None] | None = None,
                  ) -> np.ndarray:  # fmt: skip
    """The uncollapsed Gibbs sampler from a random start; returns the posterior mean of
    (Z .* W) Phi (averaged after `burnin` sweeps). `monitor` sees the running mean; `state`, if
    given, sees (sweep, Z .* W, the globals) just before it (a posterior draw, for scores of
    predictive draws). gamma_obs starts at its prior mean C0 / D0 (100 at the module's D0 =
    0.01, the raw scale): a start of 100 on standardised data (noise precision about 3) turns
    on about 50 atoms per row in the first sweep, a state the sampler leaves only slowly."""
    N, P = Y.shape
    g = Globals(rng.normal(0, 1 / np.sqrt(P), (K, P)), np.full(K, 1.0 / K), 1.0, C0 / D0)
    Z = np.zeros((N, K), bool)
    W = rng.normal(size=(N, K))
    R = residual(Y, M, Z * W, g.Phi)
    total, kept, clock = np.zeros_like(Y), 0, 0.0
    for it in range(1, iterations + 1):
        start = time.perf_counter()
        gibbs_local(R, M, Z, W, g, rng)
        L = Z * W
        sample_phi(R, M, L, g, rng)
        sample_globals_rest(R, M, Z, W, g, a, b, rng)
        clock += time.perf_counter() - start
        fit = L @ g.Phi
        if it > burnin:
            total += fit
            kept += 1
        recon = total / kept if kept else fit
        if monitor is not None and (it % every == 0 or it == iterations or clock > time_budget):
            if state is not None:
                state(it, L, g)
            monitor("Gibbs sampler", clock, it, recon)
        if clock > time_budget:
            break
    return recon


@dataclasses.dataclass
class GlobalQ:
    """q over the globals in natural parameters, as the paper's eq. 7: Beta(a_k, b_k) for pi,
    N(nu / tau, 1 / tau) per Phi entry, Gamma(c, d) for gamma_obs, Gamma(e, f) for gamma_w."""

    a: np.ndarray
    b: np.ndarray
    c: float
    d: float
    e: float
    f: float
    tau: np.ndarray
    nu: np.ndarray

    def vector(self) -> list:
        return [self.a, self.b, self.c, self.d, self.e, self.f, self.tau, self.nu]

    def step(self, target: GlobalQ, rho: float) -> None:
        """lambda <- (1 - rho) lambda + rho lambda_hat (Algorithm 1)."""
        for name in ("a", "b", "c", "d", "e", "f", "tau", "nu"):
            setattr(self, name, (1 - rho) * getattr(self, name) + rho * getattr(target, name))

    def mean(self) -> Globals:
        return Globals(self.nu / self.tau, self.a / (self.a + self.b), self.e / self.f,
                       self.c / self.d)  # fmt: skip

    def draw(self, rng: np.random.Generator) -> Globals:
        Phi = self.nu / self.tau + rng.standard_normal(self.tau.shape) / np.sqrt(self.tau)
        pi = np.clip(rng.beta(self.a, self.b), 1e-300, 1 - 1e-16)
        return Globals(Phi, pi, rng.gamma(self.e, 1 / self.f), rng.gamma(self.c, 1 / self.d))


@dataclasses.dataclass
class Stats:
    """Minibatch sufficient statistics (sums over the batch's rows) for the global update."""

    nz: np.ndarray  # sum z_ik (K,)
    rows: int
    w2: float  # sum w^2
    r2: float  # sum of squared residuals (expected)
    obs: float  # observed entries
    tau: np.ndarray  # gamma_obs sum_i M_ip E[l_ik^2]  (K, P)
    nu: np.ndarray  # gamma_obs sum_i M_ip E[l_ik r^{-k}_ip]  (K, P)


def target(q0: GlobalQ, s: Stats, scale: float) -> GlobalQ:
    """lambda_hat = prior natural parameters + (N / B) x the batch's statistics."""
    K = len(s.nz)
    return GlobalQ(q0.a + scale * s.nz, q0.b + scale * (s.rows - s.nz), q0.c + scale * s.obs / 2,
                   q0.d + scale * s.r2 / 2, q0.e + scale * s.rows * K / 2,
                   q0.f + scale * s.w2 / 2, q0.tau + scale * s.tau,
                   q0.nu + scale * s.nu)  # fmt: skip


def prior_q(K: int, P: int, a: float, b: float, rng: np.random.Generator) -> tuple:
    """(the prior's natural parameters, a random start: the prior with Phi's means drawn)."""
    q0 = GlobalQ(np.full(K, a / K), np.full(K, b * (K - 1) / K), C0, D0, E0, F0,
                 np.full((K, P), float(P)), np.zeros((K, P)))  # fmt: skip
    start = dataclasses.replace(q0, nu=P * rng.normal(0, 1 / np.sqrt(P), (K, P)))
    return q0, start


def gibbs_start(
    Y: np.ndarray,
    M: np.ndarray,
    K: int,
    *,
    rows: int,
    sweeps: int,
    rng: np.random.Generator,
    a: float = 1.0,
    b: float = 1.0,
) -> GlobalQ:
    """The paper's Table 1 start: the uncollapsed Gibbs sampler run for `sweeps` sweeps on
    `rows` rows drawn at random, then the global q that its last state implies for the whole
    data (prior + N / rows x the subset's statistics at the sampler's globals: the SVI target
    with rho = 1), so SVI starts from a dictionary learnt on a subset, not from the prior."""
    N, P = Y.shape
    sub = np.sort(rng.choice(N, size=min(rows, N), replace=False))
    Ys, Ms = Y[sub], M[sub]
    Mf = Ms.astype(float)
    g = Globals(rng.normal(0, 1 / np.sqrt(P), (K, P)), np.full(K, 1.0 / K), 1.0, 10.0)
    Z, W = np.zeros((len(sub), K), bool), rng.normal(size=(len(sub), K))
    R = residual(Ys, Ms, Z * W, g.Phi)
    for _ in range(sweeps):
        gibbs_local(R, Ms, Z, W, g, rng, Mf)
        sample_phi(R, Ms, Z * W, g, rng)
        sample_globals_rest(R, Ms, Z, W, g, a, b, rng)
    q0, _ = prior_q(K, P, a, b, rng)
    s, _ = gibbs_stats(Ys, Ms, Z, W, g, rng, 0, 3)
    return target(q0, s, N / len(sub))


def gibbs_stats(Y, M, Z, W, g: Globals, rng, burnin: int, samples: int) -> tuple[Stats, np.ndarray]:
    """Gibbs-SSVI's local step on a batch (Z, W warm starts, in place): `burnin` sweeps, then
    `samples` sweeps whose statistics are averaged; also the mean of Z .* W."""
    Mf = M.astype(float)
    R = residual(Y, M, Z * W, g.Phi)
    for _ in range(burnin):
        gibbs_local(R, M, Z, W, g, rng, Mf)
    K, P = g.Phi.shape
    acc = Stats(np.zeros(K), len(Y), 0.0, 0.0, float(M.sum()), np.zeros((K, P)), np.zeros((K, P)))
    Lsum = np.zeros(Z.shape)
    for _ in range(samples):
        gibbs_local(R, M, Z, W, g, rng, Mf)
        L = Z * W
        L2M = (L**2).T @ Mf
        acc.nz += Z.sum(0)
        acc.w2 += float(np.sum(W**2))
        acc.r2 += float(np.sum(R**2))
        acc.tau += g.gamma_obs * L2M
        acc.nu += g.gamma_obs * (L.T @ R + L2M * g.Phi)
        Lsum += L
    for name in ("nz", "w2", "r2", "tau", "nu"):
        setattr(acc, name, getattr(acc, name) / samples)
    return acc, Lsum / samples


def meanfield_local(Y, M, g: Globals, Phi2: np.ndarray, logit_pi: np.ndarray,
                    rng: np.random.Generator, sweeps: int) -> tuple[Stats, np.ndarray]:  # fmt: skip
    """MF local step: q(z_ik) q(w_ik) by coordinate ascent given the globals (a draw for
    MF-SSVI; q's moments for MF-SVI: Phi2 = E[Phi^2], logit_pi = E[log pi] - E[log(1 - pi)]),
    reinitialised per batch (theta = 1/2, m = 0); returns its statistics, E[Z .* W]."""
    B, K = len(Y), g.Phi.shape[0]
    Mf = M.astype(float)
    theta = np.full((B, K), 0.5)  # q(w) first in each update, so a start at m = 0 is alive
    m = np.zeros((B, K))
    v = np.full((B, K), 1 / g.gamma_w)
    El = theta * m
    R = residual(Y, M, El, g.Phi)
    S2 = Mf @ Phi2.T  # (B, K): sum_p M E[phi^2]
    for _ in range(sweeps):
        for k in range(K):
            phi = g.Phi[k]
            h = R @ phi + El[:, k] * (Mf @ phi**2)
            prec = g.gamma_w + g.gamma_obs * theta[:, k] * S2[:, k]
            m[:, k], v[:, k] = g.gamma_obs * theta[:, k] * h / prec, 1 / prec
            t = logit_pi[k] + g.gamma_obs * (
                m[:, k] * h - 0.5 * (m[:, k] ** 2 + v[:, k]) * S2[:, k]
            )
            theta[:, k] = expit(t)
            new = theta[:, k] * m[:, k]
            R -= Mf * np.outer(new - El[:, k], phi)
            El[:, k] = new
    El2 = theta * (m**2 + v)
    var_terms = np.sum(Mf * (El2 @ Phi2 - El**2 @ g.Phi**2))
    s = Stats(theta.sum(0), B, float(np.sum(m**2 + v)), float(np.sum(R**2) + var_terms),
              float(M.sum()), g.gamma_obs * (El2.T @ Mf),
              g.gamma_obs * (El.T @ R + (El**2).T @ Mf * g.Phi))  # fmt: skip
    return s, El


def expected_globals(q: GlobalQ) -> tuple[Globals, np.ndarray, np.ndarray]:
    """MF-SVI's view of q: means, E[Phi^2], E[logit pi] (digamma differences)."""
    g = q.mean()
    return g, g.Phi**2 + 1 / q.tau, digamma(q.a) - digamma(q.b)


def svi(Y: np.ndarray, M: np.ndarray, K: int, *, local: str, batch: int, iterations: int,
        rng: np.random.Generator, a: float = 1.0, b: float = 1.0, burnin: int = 3,
        samples: int = 3, sweeps: int = 5, kappa: float = 0.75, tau0: float = 1.0,
        monitor: Monitor | None = None, every: int = 100, predict: Callable | None = None,
        time_budget: float = np.inf, start: GlobalQ | None = None,
        at_seconds: tuple = ()) -> GlobalQ:  # fmt: skip
    """Stochastic VI over minibatches of rows, rho_t = (t + tau0)^-kappa. `local`: "gibbs"
    (Gibbs-SSVI: globals drawn from q, Gibbs on the batch's rows, warm-started), "mf-ssvi"
    (a draw, mean-field local), "mf-svi" (q's expectations, mean-field local: Hoffman et al.
    2013). Every `every` iterations, and when the training clock passes each of `at_seconds`,
    `monitor` gets `predict(q, Z, W)` (training time only is timed). `start`: the global q to
    start from (gibbs_start's; default a random draw of Phi's means under the prior)."""
    N, P = Y.shape
    q0, q = prior_q(K, P, a, b, rng)
    q = q if start is None else dataclasses.replace(start)
    Z, W = np.zeros((N, K), bool), np.zeros((N, K))  # W is redrawn by the first sweep
    clock, marks = 0.0, sorted(at_seconds)
    label = {"gibbs": "Gibbs-SSVI", "mf-ssvi": "MF-SSVI", "mf-svi": "MF-SVI"}[local]
    for t in range(1, iterations + 1):
        start = time.perf_counter()
        rows = np.sort(rng.choice(N, size=batch, replace=False))
        if local == "gibbs":
            Zb, Wb = Z[rows], W[rows]
            s, _ = gibbs_stats(Y[rows], M[rows], Zb, Wb, q.draw(rng), rng, burnin, samples)
            Z[rows], W[rows] = Zb, Wb
        elif local == "mf-ssvi":
            g = q.draw(rng)
            s, _ = meanfield_local(Y[rows], M[rows], g, g.Phi**2,
                                   np.log(g.pi) - np.log1p(-g.pi), rng, sweeps)  # fmt: skip
        else:
            g, Phi2, logit_pi = expected_globals(q)
            s, _ = meanfield_local(Y[rows], M[rows], g, Phi2, logit_pi, rng, sweeps)
        q.step(target(q0, s, N / batch), (t + tau0) ** -kappa)
        clock += time.perf_counter() - start
        due = t % every == 0 or t == iterations or bool(marks and clock >= marks[0])
        while marks and clock >= marks[0]:
            marks.pop(0)
        if monitor is not None and predict is not None and due:
            monitor(label, clock, t, predict(q, Z, W))
        if clock > time_budget:
            if monitor is not None and predict is not None and not due:
                monitor(label, clock, t, predict(q, Z, W))
            break
    return q


def predict_rows(Y: np.ndarray, M: np.ndarray, q: GlobalQ, Z: np.ndarray, W: np.ndarray, *,
                 local: str, rng: np.random.Generator, chunk: int = 4000, burnin: int = 2,
                 samples: int = 3, sweeps: int = 5) -> np.ndarray:  # fmt: skip
    """E[(z_i .* w_i) Phi] for every row at q's global means: the local step run on all rows
    (Gibbs from each row's last state, not written back; or mean-field), in chunks."""
    out = np.empty(Y.shape)
    for lo in range(0, len(Y), chunk):
        sl = slice(lo, lo + chunk)
        if local == "gibbs":
            g = q.mean()
            _, L = gibbs_stats(Y[sl], M[sl], Z[sl].copy(), W[sl].copy(), g, rng, burnin, samples)
        else:
            g, Phi2, logit_pi = expected_globals(q)
            _, L = meanfield_local(Y[sl], M[sl], g, Phi2, logit_pi, rng, sweeps)
        out[sl] = L @ g.Phi
    return out
