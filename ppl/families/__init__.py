"""Variational families, one class per family (gaussian, gamma, bernoulli, studentt), and the
composite family that gives each latent its own (composite); choice decides which."""

from ppl.families.gamma import (
    GammaFamily,
    gamma_entropy,
    gamma_sample,
    gamma_sample_log,
)

__all__ = ["GammaFamily", "gamma_entropy", "gamma_sample", "gamma_sample_log"]
