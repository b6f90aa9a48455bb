"""ppl: a Stan-like probabilistic programming language for variational inference.

    import ppl
    model = ppl.Model.from_file("model.stan")   # or ppl.Model(code)
    fit = model.fit(data)                       # a dict, a pandas DataFrame or file paths
    fit.summary(); fit.draws("theta"); fit.to_arviz()

The API (ppl.api) is imported on first use, so `import ppl` stays cheap for the command line.
"""

__version__ = "0.1.0"

__all__ = ["Model", "Fit", "PplError", "to_arviz"]


def __getattr__(name: str):
    if name in ("Model", "Fit", "to_arviz"):
        from ppl import api

        return getattr(api, name)
    if name == "PplError":
        from ppl.errors import PplError

        return PplError
    raise AttributeError(f"module 'ppl' has no attribute {name!r}")
