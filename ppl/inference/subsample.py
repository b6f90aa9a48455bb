"""Data subsampling for BBVI (Ranganath et al. 2014, sec. 4.2): B of the N data rows per step.

The rows are the leading dimension shared by most data variables (its size is a data integer,
e.g. N). Every data and transformed-data variable with that leading dimension is sliced to the
batch's rows, and so is every *local* latent (a parameter with that leading dimension). The batch
model is the compiled model with those slices and N = B. A statement that depends on sliced data
or local latents (through any deterministic node) is a per-row term and is scaled by N / B, so
the gradient for the global latents is unbiased for the full-data gradient (a statement must then
be a sum over rows, as every `~` over rows is). A local latent's gradient uses its own rows'
terms unscaled and is computed for the batch's rows only: a per-coordinate rescaling, by B / N,
of an unbiased estimate, with the same stationary point.

Markov blankets are probed on two batches. If the two agree they are used for every batch; if
not (the model indexes latents by data, `u[group[n]]`), each latent's blanket is every element of
the statements the graph IR says it reaches: unbiased, less reduced.
"""

from __future__ import annotations

import copy
from collections import Counter

import numpy as np

from ppl.errors import ModelError
from ppl.families.composite import MixedFamily
from ppl.inference.bbvi import FamilyObjective
from ppl.inference.blankets import find_blankets, stack_terms
from ppl.inference.estimators import score_gradient
from ppl.ir.graph import build_graph


class Batches:
    """The batch model and the map from its coordinates to the full model's."""

    def __init__(self, model, batch: int, rng: np.random.Generator, rows: int | None = None):
        """`rows`: the number of data rows, when `model` holds only a sample of them (--stream)."""
        self.model = model
        self.graph = build_graph(model.checked, model)
        firsts = Counter(n.dims[0] for n in self.graph.of_kind("data") if n.dims)
        if not firsts:
            raise ModelError("--batch: the model has no data with a leading dimension to subsample")
        self.rows_name = firsts.most_common(1)[0][0]
        N = model.data.get(self.rows_name)
        if N is None or np.ndim(N) != 0:
            raise ModelError(
                f"--batch: the data's leading dimension '{self.rows_name}' is not a data integer"
            )
        self.N, self.B = int(N if rows is None else rows), int(batch)
        self.sampled = rows is not None  # `model` holds a sample of the rows
        if not 0 < self.B < self.N:
            raise ModelError(f"--batch {batch}: must be between 1 and {self.N - 1} (the rows)")
        self.sliced = [
            n.name
            for n in self.graph.of_kind("data")
            if n.dims and n.dims[0] == self.rows_name and n.name in model.data
        ]
        self.local = {
            n.name for n in self.graph.of_kind("latent") if n.dims and n.dims[0] == self.rows_name
        }
        self.rng = rng
        self.pool = model.data  # the data the rows are drawn from
        self.batch_model = copy.copy(model)
        self.set_rows(np.arange(self.B))
        self.batch_model.latents = self.batch_model._layout()
        self.batch_model.dim = sum(lat.size for lat in self.batch_model.latents)
        self.local_columns = np.concatenate(
            [np.full(lat.size, lat.name in self.local) for lat in self.batch_model.latents]
        )

    def set_rows(self, rows: np.ndarray) -> None:
        """Point the batch model at these rows (0-based, sorted)."""
        data = dict(self.model.data)
        data[self.rows_name] = self.B
        for name in self.sliced:
            data[name] = np.asarray(self.pool[name])[rows]
        self.batch_model.data = data
        columns = []
        for lat in self.model.latents:
            if lat.name in self.local:  # the rows' blocks, without spelling out every row's
                width = lat.size // self.N
                block = (lat.offset + np.asarray(rows)[:, None] * width + np.arange(width)).ravel()
            else:
                block = np.arange(lat.offset, lat.offset + lat.size)
            columns.append(block)
        self.columns = np.concatenate(columns) if columns else np.zeros(0, dtype=int)

    def draw_rows(self) -> np.ndarray:
        n = len(self.pool[self.sliced[0]])
        return np.sort(self.rng.choice(n, self.B, replace=self.B > n))

    def get_state(self) -> dict:
        """What a checkpoint keeps of the row sampler (ppl.inference.checkpoint)."""
        return {"rng": self.rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]

    def row_keys(self) -> set[int]:
        """ids of the statements and log-Jacobians that are per-row terms."""
        reach = set(self.sliced) | self.local
        changed = True
        while changed:
            changed = False
            for n in self.graph.nodes:
                if n.kind == "deterministic" and n.name not in reach and reach & set(n.parents):
                    reach.add(n.name)
                    changed = True
        keys = {
            id(self.graph.statements[f.name])
            for f in self.graph.of_kind("factor")
            if reach & set(f.parents)
        }
        keys |= {id(lat.decl) for lat in self.model.latents if lat.name in self.local}
        return keys


class SubsampledScoreObjective(FamilyObjective):
    """BBVI's ELBO with the log joint estimated from a batch of rows (module docstring)."""

    def __init__(
        self,
        family: MixedFamily,
        batches: Batches,
        draws: int,
        theta0: np.ndarray,
        like: SubsampledScoreObjective | None = None,
    ):
        """`like`: an objective for the same model whose blankets and scales are reused."""
        self.family, self.batches, self.draws_per_step = family, batches, draws
        self.estimator = "rb+cv"
        self.warnings: list[str] = []
        if like is not None:
            self.blankets, self.scale = like.blankets, like.scale
            return
        bm = batches.batch_model
        found = []
        for _ in range(2):
            batches.set_rows(batches.draw_rows())
            draws0 = family.rvs(theta0, batches.rng, 2)[:, batches.columns]
            found.append(find_blankets(bm, batches.graph, list(draws0), batches.rng))
        first, second = found
        if first.residual:
            raise ModelError(
                "--batch: the log joint is not the sum of its statements' terms for this model"
            )
        if (first.matrix != second.matrix).nnz:
            self.warnings.append(
                "--batch: the terms a coordinate reaches depend on the rows (data used as an "
                "index?); blankets are whole statements"
            )
            first = find_blankets(bm, batches.graph, list(draws0), batches.rng, probe=False)
        self.blankets = first
        # term layout and the per-row scale of every element
        total, terms = bm.log_terms(draws0)
        row_keys = batches.row_keys()
        scale = [
            np.full(m, batches.N / batches.B if id(key) in row_keys else 1.0)
            for (key, _), keep, m in zip(terms, first.sampled, first.sizes, strict=True)
            if keep
        ]
        self.scale = np.concatenate(scale) if scale else np.zeros(0)

    def _evaluate(self, theta, rng, n):
        b = self.batches
        b.set_rows(b.draw_rows())
        zeta = self.family.rvs(theta, rng, n)
        with np.errstate(all="ignore"):
            total, terms = b.batch_model.log_terms(zeta[:, b.columns])
        T = stack_terms(terms, self.blankets.sampled, self.blankets.sizes, n)
        constant = total - T.sum(axis=1)  # terms without a sample axis
        weighted = T * self.scale
        log_q = self.family.log_q_terms(theta, zeta)[:, b.columns]
        factor = np.where(b.local_columns, b.N / b.B, 1.0)
        elbo = weighted.sum(axis=1) + constant - (log_q * factor).sum(axis=1)
        return zeta, T, weighted, elbo

    def estimate(self, theta: np.ndarray, rng: np.random.Generator):
        b = self.batches
        zeta, T, weighted, elbo = self._evaluate(theta, rng, self.draws_per_step)
        A = self.blankets.matrix
        unscaled = np.asarray(A.T @ T.T).T
        scaled = np.asarray(A.T @ weighted.T).T
        local_b = np.where(b.local_columns, unscaled, scaled)
        ok = np.isfinite(elbo) & np.all(np.isfinite(local_b), axis=1)
        if ok.sum() < max(3, self.draws_per_step // 2):
            return None
        local = np.zeros((int(ok.sum()), self.family.dim))
        local[:, b.columns] = local_b[ok]
        grad = score_gradient(self.family, theta, zeta[ok], elbo[ok], local, "rb+cv")
        in_batch = np.zeros(self.family.dim, dtype=bool)
        in_batch[b.columns] = True
        grad[~in_batch[self.family.param_column]] = 0.0
        return grad, float(np.mean(elbo[ok])), int((~ok).sum())

    def fresh_elbo(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> float:
        """On the full data (one pass, in chunks of draws): the reported ELBO has no batch noise."""
        values = []
        for start in range(0, n, 100):
            zeta = self.family.rvs(theta, rng, min(100, n - start))
            with np.errstate(all="ignore"):
                lp = np.asarray(self.batches.model.log_joint(zeta, binary=True), dtype=float)
            values.append(lp - self.family.log_q_terms(theta, zeta).sum(axis=1))
        values = np.concatenate(values)
        return float(np.mean(values)) if np.all(np.isfinite(values)) else -np.inf


def require_global(batches: Batches) -> None:
    """Pathwise minibatch gradients step all of theta at once: no parameter may be per-row."""
    if batches.local:
        raise ModelError(
            f"--batch: parameter(s) {', '.join(sorted(batches.local))} have one value per "
            f"row ('{batches.rows_name}'); minibatches with this method need global "
            "parameters only (--method bbvi subsamples local ones)"
        )


class SubsampledLogJoint:
    """A fresh minibatch of rows at every call, per-row statements weighted N / B: an unbiased,
    differentiable estimate of the log joint for pathwise gradients (DSVI's doubly stochastic
    gradients, the paper's section 2). Every parameter must be global: a local one's q would be
    updated only when its row is drawn, which a pathwise step over all of theta does not do."""

    def __init__(self, batches: Batches):
        require_global(batches)
        self.batches = batches
        weight = batches.N / batches.B
        self.scales = {key: weight for key in batches.row_keys()}

    def __call__(self, zeta):
        b = self.batches
        b.set_rows(b.draw_rows())
        return b.batch_model.log_joint_scaled(zeta, self.scales)


def check_row_wise(batches: Batches, option: str, why: str) -> None:
    """Transformed data computed part by part (a chunk, a partition) must act row by row:
    computed on the first half of the sample it must equal the first half of it computed on the
    whole."""
    model, data = batches.model, batches.model.data
    names = [n for n in model.checked.names_in("transformed_data") if n in data]
    m = int(data[batches.rows_name])
    if not names or m < 2:
        return
    h = m // 2
    raw = {k: v for k, v in data.items() if k not in names}
    half = {k: (np.asarray(v)[:h] if k in batches.sliced else v) for k, v in raw.items()}
    half[batches.rows_name] = np.array(h)
    half_data = type(model)(model.ir, half).data
    for name in names:
        whole, part = np.asarray(data[name]), np.asarray(half_data[name])
        if name in batches.sliced:
            whole = whole[:h]
        if whole.shape != part.shape or not np.allclose(whole, part, rtol=1e-9, equal_nan=True):
            raise ModelError(
                f"{option}: transformed data '{name}' depends on the rows together (a sum, a "
                f"mean, a sort ...), but {why}; compute it beforehand, or in transformed "
                "parameters or the model block"
            )


class StreamBatches(Batches):
    """Minibatches from a CSV read one chunk at a time (--stream). Every pass over the file visits
    the chunks in a fresh random order and draws from a chunk of n rows n / B batches
    (stochastically rounded), so every row is used once per pass in expectation and the gradient
    stays unbiased for the full-data one. `model` holds the stream's uniform sample of rows."""

    def __init__(self, model, batch: int, rng: np.random.Generator, stream):
        super().__init__(model, batch, rng, rows=stream.rows)
        if self.rows_name != stream.rows_name:
            raise ModelError(
                f"--stream: the file's rows are '{stream.rows_name}' but most data is indexed "
                f"by '{self.rows_name}'"
            )
        self.stream = stream
        self.order: list[int] = []
        self.left = 0
        self.current = None  # the chunk in self.pool
        check_row_wise(self, "--stream", "the file is read one chunk at a time")

    def draw_rows(self) -> np.ndarray:
        while self.left == 0:
            if not self.order:
                self.order = list(self.rng.permutation(len(self.stream.chunks)))
            chunk = self.stream.chunks[self.order.pop()]
            steps = chunk.rows / self.B
            self.left = int(steps) + int(self.rng.random() < steps % 1)
            if self.left and chunk is not self.current:
                values = self.stream.read(chunk)
                self.pool = type(self.model)(self.model.ir, values).data
                self.current = chunk
        self.left -= 1
        return super().draw_rows()

    def get_state(self) -> dict:
        current = None if self.current is None else self.stream.chunks.index(self.current)
        return {**super().get_state(), "order": list(self.order), "left": self.left,
                "current": current}  # fmt: skip

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.order, self.left = list(state["order"]), state["left"]
        if state["current"] is not None:
            self.current = self.stream.chunks[state["current"]]
            self.pool = type(self.model)(self.model.ir, self.stream.read(self.current)).data


def sample_log_joint(model, batches: Batches, keep: int, rng: np.random.Generator):
    """The log joint on a fixed uniform sample of `keep` rows with per-row statements weighted
    N / keep: the ELBO under minibatches is estimated on it, at the cost of `keep` rows instead of
    N. Fixed rows (like the ELBO's fixed draws) make successive estimates comparable, so the
    relative-change stopping rule sees the fit's progress rather than the sample's noise.
    Returns (log_joint, rows used)."""
    if batches.sampled:
        sample, m = model, int(model.data[batches.rows_name])
    elif batches.N <= keep:
        return model.log_joint, batches.N
    else:
        fixed = Batches(model, keep, rng)
        fixed.set_rows(fixed.draw_rows())
        sample, m = fixed.batch_model, keep
    if m == batches.N:
        return sample.log_joint, m
    scales = dict.fromkeys(batches.row_keys(), batches.N / m)
    return (lambda zeta: sample.log_joint_scaled(zeta, scales)), m
