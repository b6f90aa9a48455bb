"""The log joint of many draws, differentiated a chunk of draws at a time.

A fixed-draw solve takes the gradient of the ELBO over all of its draws in one autograd pass, so
the pass keeps every intermediate of every draw until its reverse sweep: for a Gaussian
process (a 405 x 405 covariance, its factor and their cotangents per draw) 128 draws held about
1.5 GB, and arrays that size leave the caches and are mapped afresh at each call (the GP
regression example spent 15 s of its 88 in the kernel). Here the draws go through the model in
chunks of the model's own value-only call size (ppl.runtime.compiler: its rows times the draws
stay under a budget), each chunk's gradient taken at once, and the log joint over all the draws
is one primitive whose reverse rule multiplies those gradients by the incoming cotangent. A
gradient being differentiated again (the linear-response Hessian) takes the plain rule.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive
from autograd.tracer import isbox


class ChunkedLogJoint:
    """log_joint(zeta), (S, D) -> (S,), with its gradient taken `rows` draws at a time."""

    def __init__(self, log_joint: Callable, rows: int):
        self.log_joint, self.rows = log_joint, max(1, int(rows))
        self._gradients: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._values = primitive(self._forward)
        defvjp(self._values, self._vjp_maker)

    def __call__(self, zeta):
        if not isbox(zeta) or len(zeta) <= self.rows:
            return self.log_joint(zeta)
        return self._values(zeta)

    def _forward(self, zeta: np.ndarray) -> np.ndarray:
        values = np.empty(len(zeta))
        gradients = np.empty(np.shape(zeta))
        for lo in range(0, len(zeta), self.rows):
            vjp, ans = make_vjp(self.log_joint)(zeta[lo : lo + self.rows])
            values[lo : lo + len(ans)] = ans
            gradients[lo : lo + len(ans)] = vjp(np.ones(len(ans)))
        self._gradients[id(zeta)] = (zeta, gradients)
        return values

    def _vjp_maker(self, ans, zeta):
        kept = self._gradients.pop(id(zeta), None)
        if kept is not None and kept[0] is zeta:
            gradients = kept[1]
            return lambda g: g[:, None] * gradients
        log_joint = self.log_joint

        def vjp(g):  # under a trace (a gradient differentiated again): the plain rule
            back, _ = make_vjp(log_joint)(zeta)
            return back(g)

        return vjp


def chunked(log_joint: Callable) -> Callable:
    """`log_joint` as a ChunkedLogJoint where it is a compiled model's whose value-only calls
    take fewer than BATCH draws (its per-draw arrays are large); else as it is."""
    rows = getattr(getattr(log_joint, "__self__", None), "draws_per_call", None)
    if not isinstance(rows, int) or rows >= BATCH or isinstance(log_joint, ChunkedLogJoint):
        return log_joint
    return ChunkedLogJoint(log_joint, rows)


#: Value-only calls of at least this many draws: a model's log joint is differentiated whole.
BATCH = 512
