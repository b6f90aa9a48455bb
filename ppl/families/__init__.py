"""Non-Gaussian variational families with pathwise (reparameterisation) gradients."""

from ppl.families.gamma import (
    GammaFamily,
    gamma_entropy,
    gamma_sample,
    gamma_sample_log,
)

__all__ = ["GammaFamily", "gamma_entropy", "gamma_sample", "gamma_sample_log"]
