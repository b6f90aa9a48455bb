"""Inference backends. `fit_advi` and `VIResult` are loaded on first use: `ppl fit`'s default
road needs neither ADVI's loop nor the checkpoint machinery it imports."""

__all__ = ["fit_advi", "VIResult"]


def __getattr__(name: str):
    if name == "fit_advi":
        from ppl.inference.advi import fit_advi

        return fit_advi
    if name == "VIResult":
        from ppl.inference.result import VIResult

        return VIResult
    raise AttributeError(f"module 'ppl.inference' has no attribute '{name}'")
