"""The Method that describes a normalizing flow `auto`'s escalation kept (ppl.methods.escalation):
fit.json's method "flow", the label of each latent, its parameters (q's moments on the
unconstrained scale, estimated from its draws: a flow has no per-latent parameters)."""

from __future__ import annotations

from ppl.families.choice import FamilyPolicy
from ppl.families.flow import FLOW, FLOW_TITLE
from ppl.methods.base import Method, fixed_draw_ending


class FlowCandidate(Method):
    """A normalizing flow (ppl.families.flow) fitted on fixed draws from the best Gaussian."""

    name = "auto"
    fitted_as = FLOW
    families = FamilyPolicy(gaussian=FLOW_TITLE)

    def method_text(self, result, rows: str) -> str:
        return result.description + rows

    def ended_by(self, result, met: bool, iterations: int) -> str:
        return fixed_draw_ending(met)

    def gaussian_name(self, vi) -> str:
        return FLOW


FLOW_CANDIDATE = FlowCandidate()
