"""Inference backends."""

from ppl.inference.advi import fit_advi
from ppl.inference.result import VIResult

__all__ = ["fit_advi", "VIResult"]
